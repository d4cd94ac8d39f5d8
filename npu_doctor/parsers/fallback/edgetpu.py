"""Edge TPU compiler: the operation table and its CPU total."""

from __future__ import annotations

from typing import Dict, List, Optional

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate, strip_prefix

# -- Edge TPU compiler ---------------------------------------------------------------------
_ETPU_HEADER_RE = lazy(r"^\s*Operator\s+Count\s+Status\s*$")
_ETPU_ROW_RE = lazy(r"^\s*(?P<op>[A-Za-z][\w\-]*)\s+(?P<n>\d+)\s+(?P<status>[A-Za-z].*?)\s*$")
_ETPU_CPU_TOTAL_RE = lazy(r"Number of operations that will run on CPU:\s*(?P<n>\d+)")
_ETPU_MAPPED = "mapped to edge tpu"
#: what every line the parser acts on holds: the CPU total, or the table header (of whose
#: words "Operator" is the one seldom seen elsewhere in a log; "Status" is in most journals)
_ETPU_ANY = ("will run on CPU", "Operator")


@parser("fallback_edgetpu")
def parse_edgetpu(text: str) -> List[Entry]:
    """Edge TPU compiler summary and operator table.

    Rows whose status is not "Mapped to Edge TPU" become "op" entries (count = the Count
    column, status kept); `Number of operations that will run on CPU: N` (N > 0) becomes the
    "total" of the table that follows it. A table with every row mapped yields nothing.
    """
    out: List[Entry] = []
    if not any(x in text for x in _ETPU_ANY):
        return out
    raw_lines = log_lines(text)
    stripped: Dict[int, str] = {}
    pending_total: Optional[Entry] = None
    i, n = 0, len(raw_lines)
    cands = candidate_lines(text, _ETPU_ANY)

    def at(k: int) -> str:
        # only the lines looked at are stripped (the others of a large log never are)
        got = stripped.get(k)
        if got is None:
            got = stripped[k] = strip_prefix(raw_lines[k])
        return got

    while i < n:
        i = next_candidate(cands, i)
        if i < 0:
            break
        raw = raw_lines[i]
        if _ETPU_ANY[0] not in raw and _ETPU_ANY[1] not in raw:
            i += 1
            continue
        line = at(i)
        m = _ETPU_CPU_TOTAL_RE.search(line)
        if m:
            cnt = int(m.group("n"))
            pending_total = (_entry("edgetpu", "total", None, cnt, "CPU", i + 1, i + 1, line)
                             if cnt > 0 else None)
            if pending_total is not None:
                out.append(pending_total)
            i += 1
            continue
        if _ETPU_HEADER_RE.match(line):
            group = pending_total["group"] if pending_total else i + 1
            j = i + 1
            while j < n and not at(j).strip():
                j += 1
            while j < n:
                rm = _ETPU_ROW_RE.match(at(j))
                if not rm:
                    if at(j).strip():
                        break
                    j += 1
                    continue
                status = rm.group("status")
                if not status.lower().startswith(_ETPU_MAPPED):
                    out.append(_entry("edgetpu", "op", rm.group("op"), int(rm.group("n")), "CPU",
                                      j + 1, group, at(j), status=status))
                j += 1
            pending_total = None
            i = j
            continue
        i += 1
    return out
