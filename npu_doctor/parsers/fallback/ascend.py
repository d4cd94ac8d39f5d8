"""Ascend AICPU: op-plugin warnings and CANN profiler CSVs with core type AI_CPU."""

from __future__ import annotations

import re
from typing import List, Optional

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, strip_prefix

# -- Ascend AICPU --------------------------------------------------------------------------
_AICPU_KERNEL_RE = lazy(r"kernel \[(?P<op>[\w.:\-]+)\][^\n]*?running on AiCpu", re.IGNORECASE)
_CSV_SPLIT_RE = lazy(r",")
_CSV_OP_COLS = ("op type", "type")
_CSV_CORE_COLS = ("core type", "task type", "accelerator core")


def _csv_ai_cpu(lines: List[str]) -> List[Entry]:
    out: List[Entry] = []
    header: Optional[List[str]] = None
    op_i = core_i = count_i = -1
    for i, raw in enumerate(lines):
        cells = [c.strip().strip('"') for c in _CSV_SPLIT_RE.split(raw)]
        low = [c.lower() for c in cells]
        core_cols = [low.index(c) for c in _CSV_CORE_COLS if c in low]
        op_cols = [low.index(c) for c in _CSV_OP_COLS if c in low]
        if core_cols and op_cols:
            header, core_i, op_i = cells, core_cols[0], op_cols[0]
            count_i = low.index("count") if "count" in low else -1
            continue
        if header is None or len(cells) <= max(core_i, op_i):
            continue
        if cells[core_i].upper() != "AI_CPU":
            continue
        cnt = 1
        if count_i >= 0 and count_i < len(cells) and cells[count_i].isdigit():
            cnt = int(cells[count_i])
        out.append(_entry("ascend", "op", cells[op_i], cnt, "AI_CPU", i + 1, 0, raw,
                          source_format="profiler-csv"))
    return out


@parser("fallback_ascend_aicpu")
def parse_ascend_aicpu(text: str) -> List[Entry]:
    """Ascend operators running on the AI CPU instead of the AI Core: torch_npu/op-plugin
    `kernel [Op] ... running on AiCpu` warnings (each op once per log) and CANN profiler CSV
    rows with core/task type AI_CPU (count from a Count column when present)."""
    out: List[Entry] = []
    low = text.lower()
    if "aicpu" not in low and "ai_cpu" not in low:
        return out
    lines = log_lines(text)
    seen = set()
    # lower() may change a line's length, never the number of lines
    for i in candidate_lines(low, ("aicpu",)):
        raw = lines[i]
        if "aicpu" not in raw.lower():
            continue
        m = _AICPU_KERNEL_RE.search(raw)
        if m:
            op = m.group("op")
            if op not in seen:
                seen.add(op)
                out.append(_entry("ascend", "op", op, 1, "AiCpu", i + 1, 0, strip_prefix(raw)))
    if "AI_CPU" in text:
        out.extend(_csv_ai_cpu(lines))
    return out
