"""What every fallback-log parser shares: the entry shape and line cleaning (ANSI colour,
carriage-return progress, timestamps, `[rankN]:` prefixes)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

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
    line = _ANSI_RE.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line.rstrip()


def log_lines(text: str) -> List[str]:
    """Cleaned lines of a log; index i is line number i + 1."""
    return [clean_line(x) for x in text.replace("\r\n", "\n").split("\n")]


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
