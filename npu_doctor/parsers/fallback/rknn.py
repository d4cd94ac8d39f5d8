"""RKNN toolkit2 compiler and librknnrt runtime: ops placed on (or failing on) the CPU."""

from __future__ import annotations

import re
from typing import Any, List, Optional

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, log_lines, strip_prefix

# -- RKNN ----------------------------------------------------------------------------------
_RKNN_WILL_FALLBACK_RE = lazy(r"\b(?P<op>[A-Z][A-Za-z0-9_]*) will fallback to CPU\b(?P<why>.*)$")
_RKNN_NODE_TARGET_RE = lazy(r"\bnode:\s*(?P<op>[A-Za-z_][\w]*):(?P<name>\S+?),\s*Target:\s*"
                            r"(?P<target>[A-Za-z_]+)")
_RKNN_UNSUPPORT_CPU_RE = lazy(r"\bunsupport cpu (?P<op>[A-Za-z_]\w*) op(?:, op name:\s*"
                              r"(?P<name>\S+))?", re.IGNORECASE)
_RKNN_UNSUPPORT_CPU2_RE = lazy(r"\bUnsupport CPU op:\s*(?P<op>[A-Za-z_]\w*)")
_RKNN_TABLE_HEADER_RE = lazy(r"^\s*ID\s+OpType\s+DataType\s+Target\b(?P<rest>.*)$")
_RKNN_IO_OPS = ("InputOperator", "OutputOperator")
#: any line the RKNN parser acts on contains one of these (a cheap first test)
_RKNN_ANY = ("OpType", "Target:", "fallback to CPU", "nsupport cpu", "nsupport CPU")


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
    if not _rknn_any(text):
        return out
    lines = log_lines(text)
    seen = set()

    def add(op: str, name: Optional[str], line_no: int, raw: str, **extra: Any) -> None:
        key = (op, name) if name else (op, "line", line_no)
        if key in seen:
            return
        seen.add(key)
        out.append(_entry("rknn", "op", op, 1, "CPU", line_no, 0, raw, node=name, **extra))

    in_table = False
    for i, raw in enumerate(lines):
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
