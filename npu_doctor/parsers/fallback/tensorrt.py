"""TensorRT DLA: layers the builder moved from the Deep Learning Accelerator to the GPU.

On Jetson Xavier/Orin, an engine built for a DLA core with GPU fallback allowed (`trtexec
--useDLACore=N --allowGPUFallback`, `IBuilderConfig.DLA_core` + `GPU_FALLBACK`, DeepStream
`enable-dla=1`) puts every layer the DLA cannot run on the GPU, with a copy at each
DLA<->GPU boundary. The fallback target is the GPU, not the CPU: entries say target "GPU".

Formats (verbatim examples; sources):
- TensorRT 5-8.4 builder: `WARNING: [TRT]: Default DLA is enabled but layer leaky_1 is not
  supported on DLA, falling back to GPU.` (marcoslucianops/DeepStream-Yolo#27, NVIDIA/TensorRT
  #2318); the layer is named, its type is not;
- TensorRT 8.5+: `[W] [TRT] Layer '/model.24/Constant_1_output_0' (CONSTANT): Unsupported on
  DLA. Switching this layer's device type to GPU.` (NVIDIA-AI-IOT/jetson_dla_tutorial#3,
  ultralytics/ultralytics#16449);
- the engine summary (TensorRT 8.x, INFO): `---------- Layers Running on DLA ----------`,
  `[DlaLayer] {ForeignNode[...]}`, `---------- Layers Running on GPU ----------`, then
  `[GpuLayer] SHUFFLE: shuffle_between_pool5_and_fc6` (8.2+: TYPE: name) or `[GpuLayer]
  Conv_0` (8.0). It is authoritative when present, but only for an engine that uses the DLA
  (at least one [DlaLayer], or a DLA fallback warning in the log): a plain GPU build prints an
  empty DLA section and every layer under GPU by design.
"""

from __future__ import annotations

from typing import List, Optional

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate, strip_prefix

_OLD_RE = lazy(r"\b(?:Default DLA is enabled but )?layer (?P<name>.+?) is not supported on DLA, "
               r"falling back to GPU")
_NEW_RE = lazy(r"\bLayer '(?P<name>.*?)' \((?P<op>[A-Za-z_]+)\): Unsupported on DLA\. Switching "
               r"this layer's device type to GPU")
_SECTION_RE = lazy(r"-{5,} Layers [Rr]unning on (?P<dev>DLA|GPU)\b")
_GPU_LAYER_RE = lazy(r"\[GpuLayer\]\s+(?:(?P<op>[A-Z][A-Z_]*): )?(?P<name>.+)$")
_DLA_LAYER_RE = lazy(r"\[DlaLayer\]")
_ANY = ("on DLA", "unning on GPU", "GpuLayer", "DlaLayer")


def _any(text: str) -> bool:
    return any(s in text for s in _ANY)


@parser("fallback_tensorrt_dla")
def parse_tensorrt_dla(text: str) -> List[Entry]:
    """Layers TensorRT placed on the GPU instead of the DLA, one "op" entry per layer (op = the
    layer type when the log states it, node = the layer name); the engine summary replaces the
    per-layer warnings when it lists any GPU layer of a DLA engine."""
    cands = candidate_lines(text, _ANY)
    if not cands:
        return []
    lines = log_lines(text)
    warned: List[Entry] = []
    summary: List[Entry] = []
    seen = set()
    section: Optional[str] = None
    section_line = 0
    dla_layers = 0
    i, n = -1, len(lines)
    while True:
        i += 1
        if section != "GPU":  # in the GPU section every line counts (a plain one ends it)
            i = next_candidate(cands, i)
        if not 0 <= i < n:
            break
        raw = lines[i]
        if not _any(raw):
            if section == "GPU" and not raw.strip():
                continue
            if section == "GPU" and "[TRT]" not in raw:
                section = None
            continue
        body = strip_prefix(raw)
        m = _NEW_RE.search(body)
        if m:
            if m.group("name") not in seen:
                seen.add(m.group("name"))
                warned.append(_entry("tensorrt", "op", m.group("op"), 1, "GPU", i + 1, 0, body,
                                     node=m.group("name")))
            continue
        m = _OLD_RE.search(body)
        if m:
            if m.group("name") not in seen:
                seen.add(m.group("name"))
                warned.append(_entry("tensorrt", "op", None, 1, "GPU", i + 1, 0, body,
                                     node=m.group("name")))
            continue
        m = _SECTION_RE.search(body)
        if m:
            section, section_line = m.group("dev"), i + 1
            continue
        if section == "DLA" and _DLA_LAYER_RE.search(body):
            dla_layers += 1
            continue
        if section == "GPU":
            g = _GPU_LAYER_RE.search(body)
            if g:
                summary.append(_entry("tensorrt", "op", g.group("op"), 1, "GPU", i + 1,
                                      section_line, body, node=g.group("name").strip(),
                                      source_format="engine-summary"))
    if summary and (dla_layers or warned):
        return summary
    return warned
