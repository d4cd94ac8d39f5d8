"""What is derived from a regex's text, remembered between runs: its literal needles and
whether its shape can backtrack catastrophically. Both walk the parsed pattern (re's own
parser), which for the ~300 shipped catalog patterns costs more than everything else npu-doctor
does at start-up; the answer depends only on the pattern text, its flags and the Python
version (the parser's), so it is kept in the user cache (npu_doctor.usercache) under that key.
"""

from __future__ import annotations

import os
import sys
import threading
import zlib
from typing import Any, Callable, Dict, Optional

#: One file per Python version and installation: the file keeps only the entries its run used,
#: so two installations (a venv and a checkout, two versions) sharing one file evicted each
#: other's entries at every run.
_NAME = "regex-facts-py%d%d-%s.json" % (sys.version_info[:2] + (format(zlib.crc32(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))).encode()), "08x"),))
_LOCK = threading.Lock()
_STATE: Dict[str, Any] = {"memo": None, "used": set(), "dirty": False}


def remembered(kind: str, pattern: str, flags: int, compute: Callable[[], Any]) -> Any:
    """compute() for (kind, pattern, flags), from the cache when an earlier run knew it. The
    value must be JSON (None, a string, a list of strings)."""
    key = f"{kind}\x00{flags}\x00{pattern}"
    with _LOCK:
        memo = _STATE["memo"]
        if memo is None:
            from . import usercache

            data = usercache.load_json(_NAME)
            memo = _STATE["memo"] = data if isinstance(data, dict) else {}
        _STATE["used"].add(key)
        if key in memo:
            return memo[key]
    value = compute()
    with _LOCK:
        memo[key] = value
        _STATE["dirty"] = True
    return value


def save() -> None:
    """Write what this run derived (only the entries in use, so the file does not grow with
    every pattern ever seen). Never raises."""
    with _LOCK:
        memo: Optional[Dict[str, Any]] = _STATE["memo"]
        if memo is None or not _STATE["dirty"]:
            return
        keep = {k: v for k, v in memo.items() if k in _STATE["used"]}
        _STATE["dirty"] = False
    from . import usercache

    usercache.save_json(_NAME, keep)
