"""Tool output pasted into a log, kept during the one pass over it (collectors.logscan): the
last `nvidia-smi -q` report, the last `nvidia-smi` default table and the last
`/proc/driver/nvidia/version` line, for a snapshot that has the log but not the command or
the file (collectors.nvidia reads them then)."""

from __future__ import annotations

import re
from typing import List, Optional

from ..lazyregex import lazy
from ..parsers.nvidia_clocks import REASON_SECTIONS

#: The banner line of an `nvidia-smi -q` report (`==============NVSMI LOG==============`).
NVSMI_BANNER = "NVSMI LOG=="
#: Characters of a pasted `nvidia-smi -q` report kept (a report is ~7 KB per GPU).
NVSMI_REPORT_CHARS = 1 << 20
NVSMI_TABLE_HEADER = "NVIDIA-SMI "
#: Section headers of one GPU's `nvidia-smi -q` report that reports paste on their own, without
#: the banner (`nvidia-smi -q | grep -A8 'Clocks Throttle'`, the block copied out of `-a`):
#: "Clocks Throttle Reasons" up to R530, "Clocks Event Reasons" from R535 (nvidia_clocks). With
#: no banner in the log, the last such block is kept as a one-GPU fragment of a report.
NVSMI_FRAGMENT_HEADERS = REASON_SECTIONS
#: A line of the table: "|" after blanks, to the end of the line ("\n"-joined chunk text).
_TABLE_LINE = lazy(r"^[^\S\n]*(\|[^\n]*)", re.MULTILINE)


class PastedReport:
    """The lines from the last `nvidia-smi -q` banner on (the next banner starts again)."""

    def __init__(self) -> None:
        self.parts: List[str] = []
        self.chars = 0
        self.found = False
        #: what is kept is a banner-less block (NVSMI_FRAGMENT_HEADERS), not a whole report
        self.fragment = False

    def feed(self, lines: List[str], text: str) -> None:
        if NVSMI_BANNER in text:
            at = max(i for i, line in enumerate(lines) if NVSMI_BANNER in line)
            self.parts, self.chars, self.found, self.fragment = [], 0, True, False
            lines = lines[at:]
            text = "\n".join(lines)
        elif (not self.found or self.fragment) and " Reasons" in text:
            # a block pasted without the banner: from its last header in this chunk on
            heads = [i for i, line in enumerate(lines) if line.strip() in NVSMI_FRAGMENT_HEADERS]
            if not heads:
                if not self.found or self.chars >= NVSMI_REPORT_CHARS:
                    return
            else:
                self.parts, self.chars, self.found, self.fragment = [], 0, True, True
                lines = lines[heads[-1]:]
                text = "\n".join(lines)
        elif not self.found or self.chars >= NVSMI_REPORT_CHARS:
            return
        self.parts.append(text[:NVSMI_REPORT_CHARS - self.chars])
        self.chars += len(self.parts[-1]) + 1

    def text(self) -> Optional[str]:
        return "\n".join(self.parts) if self.found else None


#: A `--query-gpu` CSV header cell: a field name, with its unit in brackets under `csv`.
_QUERY_CELL = lazy(r"^[A-Za-z_][A-Za-z0-9_.]*(?: \[[^\]]*\])?$")


class PastedQuery:
    """The last `nvidia-smi --query-gpu=... --format=csv` output that asks for clock
    event/throttle reasons (parsers.nvidia_query): its header line and the rows after it that
    have as many ", "-separated cells."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self.cells = 0
        self.open = False

    def feed(self, lines: List[str], text: str) -> None:
        if not self.open and "_reasons." not in text:
            return
        for line in lines:
            s = line.strip()
            cells = s.split(", ")
            if "_reasons." in s and len(cells) > 1 and all(_QUERY_CELL.match(c) for c in cells):
                self.lines, self.cells, self.open = [s], len(cells), True
            elif self.open and len(cells) == self.cells and len(self.lines) < 256:
                self.lines.append(s)
            else:
                self.open = False

    def text(self) -> Optional[str]:
        return "\n".join(self.lines) if len(self.lines) > 1 else None


class PastedTable:
    """The lines of nvidia-smi's default table (they start with `|`), from its last header on;
    rows without any header (a paste of a few rows) are kept too."""

    def __init__(self) -> None:
        self.parts: List[str] = []
        self.chars = 0

    def feed(self, lines: List[str], text: str) -> None:
        if "|" not in text:
            return
        # only the lines that start with "|" are looked at (a "|" anywhere in a chunk is
        # common: a line loop over every chunk holding one cost ~1 ms a chunk)
        for m in _TABLE_LINE.finditer(text):
            s = m.group(1)
            if NVSMI_TABLE_HEADER in s and "Driver Version" in s:
                self.parts, self.chars = [], 0
            if self.chars >= NVSMI_REPORT_CHARS:
                continue
            self.parts.append(s[:NVSMI_REPORT_CHARS - self.chars])
            self.chars += len(self.parts[-1]) + 1

    def text(self) -> Optional[str]:
        return "\n".join(self.parts) if self.parts else None


#: The first line of /proc/driver/nvidia/version, which tools print as is (cuda_memtest
#: "[date][host][0]:NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.86  Tue Oct 26 ...",
#: `cat /proc/driver/nvidia/version`, nvidia-bug-report.log).
NVRM_VERSION = "NVRM version:"


class PastedProcVersion:
    """The last line holding "NVRM version:" (parsers.nvidia_versions reads it), so that the
    kernel module's version is known from a log when /proc/driver/nvidia/version is not."""

    def __init__(self) -> None:
        self.line: Optional[str] = None

    def feed(self, lines: List[str], text: str) -> None:
        if NVRM_VERSION in text:
            self.line = next(line for line in reversed(lines) if NVRM_VERSION in line)[:400]
