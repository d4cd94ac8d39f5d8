"""What every fallback-log parser shares: the entry shape and line cleaning (ANSI colour,
carriage-return progress, timestamps, `[rankN]:` prefixes)."""

from __future__ import annotations

import bisect
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ...lazyregex import lazy

Entry = Dict[str, Any]

MAX_LINE = 300

# -- cleaning ------------------------------------------------------------------------------
_ANSI_RE = lazy(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")
_PREFIX_RES = [
    lazy(r"^\s*\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*"),                 # ray worker
    lazy(r"^\s*\[?rank\d+\]?:\s*"),                                    # torch.distributed
    lazy(r"^\s*[IVWED]/[\w.]+(?:\(\s*\d+\))?:\s*"),                    # android logcat
    # logcat threadtime (default of `adb logcat`): `11-30 10:00:00.123  1234  1234 E RKNN    : `
    lazy(r"^\s*(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? +(?:[a-z_]\w* +)?\d+ +\d+ [VDIWEF] "
         r"(?:[^\s:]+ *:\s*)?"),
    # Android Studio's Logcat window before Dolphin (2022.1): `2022-02-28 15:00:36.365
    # 31407-31507/com.example.app I/tflite: ` (pid-tid/package, then priority/tag); `?` for a
    # package it could not name. The date-time is stripped first by the ISO rule below.
    lazy(r"^\s*\d+-\d+/[\w.:$?\-]+ [VDIWEFA]/[^\s:]+(?:\(\s*\d+\))?:\s*"),
    # Kubernetes CRI log file: `2024-03-04T10:00:00.123456789Z stdout F `
    lazy(r"^\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [FP] "),
    lazy(r"^\s*\[?\d{2,4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
         r"(?:Z|[+-]\d{2}:?\d{2})?\]?\s*"),                            # ISO date-time
    lazy(r"^\s*[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [^\s:]+(?:\[\d+\])?:\s*"),  # syslog
    lazy(r"^\s*\[\s*\d+\.\d+\]\s*"),                                   # dmesg
    lazy(r"^\s*\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+"),               # bare time
    lazy(r"^\s*[DIWEF] RKNN(?:API)?:\s*(?:\[\d{2}:\d{2}:\d{2}(?:\.\d+)?\]\s*)?"),  # RKNN
]


def clean_line(line: str) -> str:
    """A log line without ANSI escapes, carriage-return overwrites and trailing blanks."""
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line.rstrip()


#: what clean_line removes: a line holding one may hold a needle only once cleaned
ESCAPES = ("\x1b", "\r")
#: the last text log_lines cleaned and its lines: parse_fallback_logs hands one log window to
#: every parser, and each parser asks for its lines
_last: Tuple[Optional[str], List[str]] = (None, [])


def _normal(text: str) -> str:
    return text.replace("\r\n", "\n") if "\r" in text else text


def log_lines(text: str) -> List[str]:
    """Cleaned lines of a log; index i is line number i + 1. The list is shared by the
    callers of one text: read it, never change it."""
    global _last
    last = _last
    if last[0] is text:
        return last[1]
    norm = _normal(text)
    if "\x1b" in norm or "\r" in norm:
        lines = [clean_line(x) for x in norm.split("\n")]
    else:  # what clean_line does to a line without escapes or carriage returns
        lines = [x.rstrip() for x in norm.split("\n")]
    _last = (text, lines)
    return lines


def forget() -> None:
    """Drop the last window's lines (log_lines): a daemon does not keep a 2 MiB log window
    between checks."""
    global _last
    _last = (None, [])


def lines_holding(text: str, needles: Sequence[str]) -> Iterator[Tuple[int, int, int]]:
    """(0-based index, start, end) of each "\n"-separated line of text that holds one of
    needles (needles hold no "\n"), ascending; the line is text[start:end]. One str.find walk
    per needle over the whole text: a log window is searched at memory speed, not line by line
    in Python."""
    starts = set()
    find, rfind = text.find, text.rfind
    for nd in needles:
        p = find(nd)
        while p >= 0:
            starts.add(rfind("\n", 0, p) + 1)
            e = find("\n", p + len(nd))
            if e < 0:
                break
            p = find(nd, e + 1)
    line = pos = 0
    count = text.count
    for s in sorted(starts):
        line += count("\n", pos, s)
        pos = s
        e = find("\n", s)
        yield line, s, (len(text) if e < 0 else e)


def lines_with(text: str, needles: Sequence[str]) -> List[int]:
    """0-based indices, ascending, of the lines of text that hold one of needles
    (lines_holding)."""
    return [i for i, _s, _e in lines_holding(text, needles)]


def candidate_lines(text: str, needles: Sequence[str]) -> List[int]:
    """Indices, ascending, of the lines of log_lines(text) that may hold one of needles once
    cleaned: the raw lines that hold one, and those clean_line changes by more than trailing
    blanks (an ANSI escape or a carriage return inside a needle). A parser's line loop jumps
    from one to the next instead of testing every line."""
    return lines_with(_normal(text), tuple(needles) + ESCAPES)


def next_candidate(cands: List[int], i: int) -> int:
    """The first index in cands at or after line index i; -1 when none is left."""
    k = bisect.bisect_left(cands, i)
    return cands[k] if k < len(cands) else -1


def strip_prefix(line: str) -> str:
    """The message part of a line: timestamps, `[rankN]:`, syslog and RKNN prefixes removed."""
    prev = None
    while prev != line:
        prev = line
        for rx in _PREFIX_RES:
            line = rx.sub("", line, count=1)
    return line


def _entry(runtime: str, kind: str, op: Optional[str], count: Optional[int], target: str,
           line_no: int, group: int, line: str, **extra: Any) -> Entry:
    e: Entry = {"runtime": runtime, "kind": kind, "op": op, "count": count, "target": target,
                "line_no": line_no, "group": group, "line": line.strip()[:MAX_LINE]}
    e.update({k: v for k, v in extra.items() if v is not None})
    return e
