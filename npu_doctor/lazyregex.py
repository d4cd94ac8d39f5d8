"""Regexes from data files (catalog patterns, log signatures), checked at load and compiled
on first use.

A check loads several hundred patterns and a log line reaches the few whose literal needles it
contains, so most are never compiled in a run. Whether a text compiles, and whether its shape
could backtrack catastrophically, is known at load time and remembered between runs
(npu_doctor.regexmemo), so a bad pattern is still a ConfigError before anything runs.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from .errors import ConfigError
from .regexcheck import why_catastrophic
from .regexmemo import remembered


class LazyRegex:
    """A catalog pattern compiled on first use: a check reads ~300 patterns, and a log line
    reaches the few whose needles it contains, so most are never compiled in a run. Whether
    the text compiles is known at load time (remembered between runs, npu_doctor.regexmemo).
    Offers what the matcher uses of re.Pattern: pattern, flags, groupindex, search, match."""

    __slots__ = ("pattern", "flags", "_rx")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags
        self._rx: Optional["re.Pattern[str]"] = None

    def compiled(self) -> "re.Pattern[str]":
        if self._rx is None:
            self._rx = re.compile(self.pattern, self.flags)
        return self._rx

    @property
    def groupindex(self) -> Any:
        return self.compiled().groupindex

    def search(self, text: str) -> Optional["re.Match[str]"]:
        return self.compiled().search(text)

    def match(self, text: str) -> Optional["re.Match[str]"]:
        return self.compiled().match(text)


def _compile_error(rx: str, flags: int) -> Optional[str]:
    try:
        re.compile(rx, flags)
    except re.error as e:
        return str(e)
    return None


def compile_checked(rx: Any, flags: int, where: str) -> LazyRegex:
    """A LazyRegex of a valid, linear pattern. Raises ConfigError naming `where`."""
    if not isinstance(rx, str) or not rx:
        raise ConfigError(f"{where}: pattern must be a non-empty string")
    err = remembered("compile-error", rx, flags, lambda: _compile_error(rx, flags))
    if err:
        raise ConfigError(f"{where}: bad regex ({err})")
    why = why_catastrophic(rx, flags)
    if why:
        raise ConfigError(f"{where}: regex {rx!r} would backtrack catastrophically ({why})")
    return LazyRegex(rx, flags)
