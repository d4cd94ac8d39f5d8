"""torch_npu / PyTorch PrivateUse1 `npu_cpu_fallback` warnings."""

from __future__ import annotations

from typing import List, Set, Tuple

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, strip_prefix

# -- torch_npu -----------------------------------------------------------------------------
_TORCH_FALLBACK_RE = lazy(
    r"The operator '(?P<op>[^']+)' is not currently supported on the (?P<backend>\w+) backend "
    r"and will fall ?back to run on (?:the )?CPU")
#: torch-xpu-ops (Intel GPU, XPUFallback.template xpu_fallback_impl) with
#: PYTORCH_DEBUG_XPU_FALLBACK=1: 2.4+ `The operator 'aten::cholesky on the XPU backend is falling
#: back to run on the CPU.` (the name is printed without its closing quote); the first release:
#: `The operator 'aten::choleskyon the XPU backend and will fall back to run on the CPU.`
_XPU_DEBUG_RE = lazy(
    r"The operator '(?P<op>[\w:.]+?)'? ?on the (?P<backend>\w+) backend (?:is falling back|"
    r"and will fall ?back) to run on (?:the )?CPU")
#: ... and without it, once per process and naming no operator: `Aten Op fallback from XPU to CPU
#: happends. This may have performance implications. If need debug the fallback ops please set
#: environment variable `PYTORCH_DEBUG_XPU_FALLBACK=1`` (a UserWarning, or the C++ handler's
#: `[W128 09:40:21.158 RegisterXPU.cpp:45778] Warning: ...`; "happens" in 2.8+)
#: (intel/torch-xpu-ops#4253, #1328)
_XPU_ANY_RE = lazy(r"Aten Op fallback from (?P<backend>\w+) to CPU happen")
#: the MPS backend's own per-operator fallbacks (aten/src/ATen/native/mps/operations/*.mm,
#: TORCH_WARN_ONCE), which run an operator on the CPU when this macOS or input cannot run it:
#: `MPS: nonzero op is supported natively starting from macOS 13.0. Falling back on CPU. This may
#: have performance implications.` (pytorch/pytorch#132110; 14.0 from 2.4.1), `MPS: pixel_shuffle
#: op is supported starting from macOS 13.0. ...`, `MPS: nonzero op is not supported for complex
#: datatypes. ...`, `MPS: nonzero op is not natively supported for the provided input on
#: MacOS14Falling back on CPU. ...`, `MPS: passing scale factor to upsample ops is supported
#: natively starting from macOS 13.0. ...`, `MPS: passing divisor to Average Pooling op with int64
#: input is not supported on MPS backend. ...`, `MPS: FFT operations are only supported natively
#: starting from macOS 14.0. ...`
_MPS_NATIVE_RE = lazy(r"\bMPS: (?P<what>[^\n]{1,200}?)\.? ?Falling back on CPU\b")
_MPS_OP_RE = lazy(r"^(?:passing [\w ]{1,60}? to )?(?P<op>[A-Za-z_][\w.]*(?: [A-Z]\w*)?) "
                  r"(?:op|ops|operations)\b ?(?P<why>[^\n]*)$")
_TORCH_START_RE = lazy(r"The operator '")
TRIGGER_LITERALS = ("The operator '", "Aten Op fallback from", "Falling back on CPU")


@parser("fallback_torch_npu")
def parse_torch_npu(text: str) -> List[Entry]:
    """PyTorch backend CPU-fallback warnings (torch_npu `npu_cpu_fallback`; the same text is
    printed for MPS and other PrivateUse1 backends: runtime "torch" there, backend kept).

    A warning wrapped by the terminal over several lines is joined before matching. Each
    operator counts once per log (torch warns once per process; ranks repeat it).
    """
    out: List[Entry] = []
    if not any(t in text for t in TRIGGER_LITERALS):
        return out
    lines = log_lines(text)
    seen: Set[Tuple[str, str]] = set()
    if "Aten Op fallback from" in text:
        for i in candidate_lines(text, ("Aten Op fallback from",)):
            m = _XPU_ANY_RE.search(lines[i])
            if not m or ("", m.group("backend")) in seen:
                continue
            seen.add(("", m.group("backend")))
            # some operator ran on the CPU; the warning names none and states no count
            out.append(_entry("torch", "op", None, None, "CPU", i + 1, 0, strip_prefix(lines[i]),
                              backend=m.group("backend"), unnamed=True))
    if "Falling back on CPU" in text:
        for i in candidate_lines(text, ("Falling back on CPU",)):
            m = _MPS_NATIVE_RE.search(lines[i])
            om = _MPS_OP_RE.match(m.group("what")) if m else None
            if not om or ("MPS", om.group("op")) in seen:
                continue
            seen.add(("MPS", om.group("op")))
            out.append(_entry("torch", "op", om.group("op"), 1, "CPU", i + 1, 0,
                              strip_prefix(lines[i]), backend="MPS",
                              reason=f"MPS: {om.group('op')} {om.group('why')}".strip()[:200]))
    for i in candidate_lines(text, ("The operator '",)):
        raw = lines[i]
        if not _TORCH_START_RE.search(raw):
            continue
        parts = [strip_prefix(raw)]
        joined = parts[0]
        m = _TORCH_FALLBACK_RE.search(joined) or _XPU_DEBUG_RE.search(joined)
        k = i + 1
        while not m and k < len(lines) and k <= i + 3:
            # a terminal wraps mid-word (no blank) or at a blank that rstrip removed
            parts.append(strip_prefix(lines[k]))
            for sep in ("", " "):
                joined = sep.join(parts)
                m = _TORCH_FALLBACK_RE.search(joined) or _XPU_DEBUG_RE.search(joined)
                if m:
                    break
            k += 1
        if not m:
            continue
        op, backend = m.group("op"), m.group("backend")
        if ("op", op) in seen:
            continue
        seen.add(("op", op))
        rt = "torch_npu" if backend.upper() == "NPU" else "torch"
        out.append(_entry(rt, "op", op, 1, "CPU", i + 1, 0, joined, backend=backend))
    return out
