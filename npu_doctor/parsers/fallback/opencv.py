"""OpenCV DNN, CUDA backend: layers without a CUDA implementation that run on the CPU.

With DNN_BACKEND_CUDA, Net::Impl::initCUDABackend (modules/dnn/src/dnn.cpp up to 4.5, then
modules/dnn/src/op_cuda.cpp) logs at INFO level (OPENCV_LOG_LEVEL=INFO, or any debug build), one
line per layer whose `supportBackend(DNN_BACKEND_CUDA)` is false:

    [ INFO:0@1.338] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend
    CUDA backend will fallback to the CPU implementation for the layer "onnx_node!ReduceMean_390"
    of type Reduce

(opencv/opencv#24064; older prefix `global /path/dnn.cpp (2757) ... initCUDABackend`,
opencv/opencv#21583, #17560). The network's input layer (`"_input" of type __NetInputLayer__`)
is listed for every net and is not a fallback. A layer is counted once per log (the lines repeat
when the net is set up again, e.g. per test case).
"""

from __future__ import annotations

from typing import List

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate

_LAYER_RE = lazy(r'CUDA backend will fallback to the CPU implementation for the layer '
                 r'"(?P<name>[^"\n]{1,200})" of type (?P<op>[A-Za-z_]\w*)')
_INPUT_LAYER = "__NetInputLayer__"
#: any line this parser acts on contains this literal
_ANY = ("will fallback to the CPU implementation",)


@parser("fallback_opencv_dnn")
def parse_opencv_dnn(text: str) -> List[Entry]:
    """One "op" entry per layer the OpenCV CUDA backend leaves on the CPU (op = layer type,
    node = layer name), input layer excluded."""
    cands = candidate_lines(text, _ANY)
    if not cands:
        return []
    lines = log_lines(text)
    out: List[Entry] = []
    seen = set()
    i, n = -1, len(lines)
    while True:
        i = next_candidate(cands, i + 1)
        if not 0 <= i < n:
            break
        raw = lines[i]
        m = _LAYER_RE.search(raw)
        if not m or m.group("op") == _INPUT_LAYER:
            continue
        key = (m.group("name"), m.group("op"))
        if key in seen:
            continue
        seen.add(key)
        out.append(_entry("opencv_dnn", "op", m.group("op"), 1, "CPU", i + 1, 0, raw,
                          node=m.group("name"), source_format="init-cuda-backend"))
    return out
