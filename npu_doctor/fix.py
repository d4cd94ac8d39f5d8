"""`npu-doctor fix`: the structured sysfs writes of current findings, shown, then applied.

Only fixes with a `sysfs_write` (e.g. power/control = on) are applied, only under /sys, only
as root, only on a live host. The daemon never writes; this command does, when asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional

from .check import CheckResult


@dataclass
class Write:
    rule: str
    subject: str
    path: str
    value: str
    current: Optional[str] = None
    result: str = ""


def planned_writes(result: CheckResult) -> List[Write]:
    """Every sysfs_write of the findings, de-duplicated, with the value there now."""
    out: List[Write] = []
    seen = set()
    for f in result.findings:
        for fx in f.fixes:
            sw = fx.get("sysfs_write")
            if not sw:
                continue
            key = (sw["path"], sw["value"])
            if key in seen:
                continue
            seen.add(key)
            out.append(Write(f.id, f.subject, sw["path"], sw["value"],
                             result.host.read_attr(sw["path"])))
    return out


def apply(writes: List[Write]) -> int:
    """Write each value; returns the number that failed. Each Write.result says what happened."""
    failed = 0
    for w in writes:
        real = os.path.realpath(w.path)
        if not real.startswith("/sys/"):
            w.result, failed = "refused: not under /sys", failed + 1
            continue
        try:
            with open(w.path, "w") as f:
                f.write(w.value)
            w.result = "written"
        except OSError as e:
            w.result, failed = f"failed: {e.strerror or e}", failed + 1
    return failed
