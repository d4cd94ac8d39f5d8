"""Telling a vendor tool that timed out from one that failed: a run whose output only says it
timed out (`Timeout`, `timed out waiting for ...`, `ETIMEDOUT`) is not evidence that the
runtime could not initialise the device (runtime-init-failed); the device or tool hung."""

from __future__ import annotations

import re

from ..lazyregex import lazy

_TIMEOUT_RE = lazy(r"\btime[ds]?[ -]?out\b|\btimed out\b|\betimedout\b", re.IGNORECASE)
_OTHER_ERROR_RE = lazy(r"\b(?:error code|errno|dcmi|not found|permission|denied|invalid|"
                       r"mismatch|no such|failed to (?:open|init)|init(?:ialise|ialize)? failed)\b",
                       re.IGNORECASE)


def says_only_timed_out(text: str) -> bool:
    """True when the text mentions a timeout and no other cause (bounded: the last 64 KiB)."""
    tail = text[-65536:]
    return bool(_TIMEOUT_RE.search(tail)) and not _OTHER_ERROR_RE.search(tail)
