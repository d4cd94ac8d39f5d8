"""RKNN toolkit2 compiler and librknnrt runtime: ops placed on (or failing on) the CPU.

Besides the formats in the package docstring, the toolkit2 compiler states a CPU placement as
`I RKNN: [10:18:39.903] Compiler: LayerNorm: Shape not support Target:NPU, turn to Target:CPU
implement.` (rockchip-linux/rknn-toolkit2#162), `No lowering found for: /model/encoder/
embed_positions/CumSum, node type = CumSum, use CustomOperatorLower instead.` (toolkit2 2.x,
printed by the Python layer without the `RKNN:` prefix, sometimes wrapped after the comma; the
node becomes a CPU custom operator) and, for a layer it does not name, `E RKNN: [19:02:58.658]
channel is too large, may produce thousands of regtask, fallback to cpu!`.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate, strip_prefix

# -- RKNN ----------------------------------------------------------------------------------
_RKNN_WILL_FALLBACK_RE = lazy(r"\b(?P<op>[A-Z][A-Za-z0-9_]*) will fallback to CPU\b(?P<why>.*)$")
_RKNN_NODE_TARGET_RE = lazy(r"\bnode:\s*(?P<op>[A-Za-z_][\w]*):(?P<name>\S+?),\s*Target:\s*"
                            r"(?P<target>[A-Za-z_]+)")
_RKNN_UNSUPPORT_CPU_RE = lazy(r"\bunsupport cpu (?P<op>[A-Za-z_]\w*) op(?:, op name:\s*"
                              r"(?P<name>\S+))?", re.IGNORECASE)
_RKNN_UNSUPPORT_CPU2_RE = lazy(r"\bUnsupport CPU op:\s*(?P<op>[A-Za-z_]\w*)")
_RKNN_TURN_TO_CPU_RE = lazy(r"\bCompiler: (?P<op>[A-Za-z_]\w*): (?P<why>[^\n]{0,200}?)\s*,?\s*turn to "
                            r"Target:\s*CPU")
_RKNN_NO_LOWERING_RE = lazy(r"\bNo lowering found for: (?P<name>[^,\n]+?),\s*node type = "
                            r"(?P<op>[A-Za-z_]\w*), use CustomOperatorLower")
_RKNN_CHANNEL_CPU_RE = lazy(r"\bchannel is too large, may produce thousands of regtask, fallback "
                            r"to cpu", re.IGNORECASE)
_RKNN_TABLE_HEADER_RE = lazy(r"^\s*ID\s+OpType\s+DataType\s+Target\b(?P<rest>.*)$")
_RKNN_IO_OPS = ("InputOperator", "OutputOperator")
#: any line the RKNN parser acts on contains one of these (a cheap first test)
_RKNN_ANY = ("OpType", "Target:", "fallback to CPU", "fallback to cpu", "nsupport cpu",
             "nsupport CPU", "No lowering found")


def _rknn_any(text: str) -> bool:
    # substring tests, not one regex alternation: `in` runs at memory speed over a log window
    return any(s in text for s in _RKNN_ANY)


def _rknn_context(raw: str) -> bool:
    return "RKNN" in raw or "rknn" in raw


@parser("fallback_rknn")
def parse_rknn(text: str) -> List[Entry]:
    """RKNN compiler/runtime statements of operators on the CPU (see the module docstring).

    Each node counts once per log even when several formats name it (a build table and an
    eval_perf table of the same model). InputOperator/OutputOperator rows are the normal
    NPU<->CPU copies of every model and are not fallback.
    """
    out: List[Entry] = []
    cands = candidate_lines(text, _RKNN_ANY)
    if not cands:
        return out
    lines = log_lines(text)
    seen = set()

    def add(op: Optional[str], name: Optional[str], line_no: int, raw: str, **extra: Any) -> None:
        key = (op, name) if name else (op, "line", line_no)
        if key in seen:
            return
        seen.add(key)
        out.append(_entry("rknn", "op", op, 1, "CPU", line_no, 0, raw, node=name, **extra))

    in_table = False
    i, n = -1, len(lines)
    while True:
        i += 1
        if not in_table:  # a table's rows hold no needle: read them all
            i = next_candidate(cands, i)
        if not 0 <= i < n:
            break
        raw = lines[i]
        line_no = i + 1
        if not in_table and not _rknn_any(raw):
            continue
        body = strip_prefix(raw)
        hm = _RKNN_TABLE_HEADER_RE.match(body)
        if hm:
            in_table = True
            continue
        if in_table:
            cols = body.split()
            if len(cols) >= 4 and cols[0].isdigit():
                op, target = cols[1], cols[3]
                if target.upper() == "CPU" and op not in _RKNN_IO_OPS:
                    full = cols[-1] if ":" in cols[-1] and len(cols) > 5 else None
                    add(op, full or f"#{cols[0]}@{line_no}", line_no, raw, source_format="layer-table")
                continue
            if not body.strip() or set(body.strip()) <= set("-="):
                continue
            in_table = False
        m = _RKNN_NODE_TARGET_RE.search(raw)
        if m and _rknn_context(raw):
            if m.group("target").upper() == "CPU":
                add(m.group("op"), m.group("name"), line_no, raw, source_format="node-target")
            continue
        m = _RKNN_TURN_TO_CPU_RE.search(raw)
        if m and _rknn_context(raw):
            add(m.group("op"), None, line_no, raw, reason=m.group("why").strip() or None,
                source_format="compiler-turn-to-cpu")
            continue
        if "No lowering found" in raw:
            # the toolkit's Python layer prints it unprefixed, sometimes wrapped after the comma
            joined = raw + (" " + lines[i + 1].strip() if i + 1 < len(lines) else "")
            m = _RKNN_NO_LOWERING_RE.search(joined)
            if m:
                add(m.group("op"), m.group("name").strip(), line_no, raw,
                    source_format="no-lowering-custom-op")
            continue
        m = _RKNN_CHANNEL_CPU_RE.search(raw)
        if m and _rknn_context(raw):
            add(None, None, line_no, raw, reason="channel is too large",
                source_format="channel-too-large")
            continue
        m = _RKNN_WILL_FALLBACK_RE.search(raw)
        if m and _rknn_context(raw):
            add(m.group("op"), None, line_no, raw, reason=m.group("why").lstrip(", ").strip() or None,
                source_format="will-fallback")
            continue
        m = _RKNN_UNSUPPORT_CPU_RE.search(raw) or _RKNN_UNSUPPORT_CPU2_RE.search(raw)
        if m and _rknn_context(raw):
            name = m.groupdict().get("name")
            add(m.group("op"), name, line_no, raw, runtime_missing_kernel=True,
                source_format="runtime-unsupported-cpu-op")
    return out
