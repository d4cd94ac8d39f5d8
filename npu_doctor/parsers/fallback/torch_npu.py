"""torch_npu / PyTorch PrivateUse1 `npu_cpu_fallback` warnings."""

from __future__ import annotations

from typing import List

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, strip_prefix

# -- torch_npu -----------------------------------------------------------------------------
_TORCH_FALLBACK_RE = lazy(
    r"The operator '(?P<op>[^']+)' is not currently supported on the (?P<backend>\w+) backend "
    r"and will fall ?back to run on (?:the )?CPU")
_TORCH_START_RE = lazy(r"The operator '")


@parser("fallback_torch_npu")
def parse_torch_npu(text: str) -> List[Entry]:
    """PyTorch backend CPU-fallback warnings (torch_npu `npu_cpu_fallback`; the same text is
    printed for MPS and other PrivateUse1 backends: runtime "torch" there, backend kept).

    A warning wrapped by the terminal over several lines is joined before matching. Each
    operator counts once per log (torch warns once per process; ranks repeat it).
    """
    out: List[Entry] = []
    if "The operator '" not in text:
        return out
    lines = log_lines(text)
    seen = set()
    for i in candidate_lines(text, ("The operator '",)):
        raw = lines[i]
        if not _TORCH_START_RE.search(raw):
            continue
        parts = [strip_prefix(raw)]
        joined = parts[0]
        m = _TORCH_FALLBACK_RE.search(joined)
        k = i + 1
        while not m and k < len(lines) and k <= i + 3:
            # a terminal wraps mid-word (no blank) or at a blank that rstrip removed
            parts.append(strip_prefix(lines[k]))
            for sep in ("", " "):
                joined = sep.join(parts)
                m = _TORCH_FALLBACK_RE.search(joined)
                if m:
                    break
            k += 1
        if not m:
            continue
        op, backend = m.group("op"), m.group("backend")
        if op in seen:
            continue
        seen.add(op)
        rt = "torch_npu" if backend.upper() == "NPU" else "torch"
        out.append(_entry(rt, "op", op, 1, "CPU", i + 1, 0, joined, backend=backend))
    return out
