"""Regexes from data files (catalog patterns, log signatures), checked at load and compiled
on first use.

A check loads several hundred patterns and a log line reaches the few whose literal needles it
contains, so most are never compiled in a run. Whether a text compiles, and whether its shape
could backtrack catastrophically, is known at load time and remembered between runs
(npu_doctor.regexmemo), so a bad pattern is still a ConfigError before anything runs.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, List, Optional, cast

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

    def __getstate__(self) -> Any:
        return (self.pattern, self.flags)  # not the compiled form: compiled again on use

    def __setstate__(self, state: Any) -> None:
        self.pattern, self.flags = state
        self._rx = None

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


class _Deferred:
    """re.compile(pattern, flags) done at the first attribute asked for; the compiled
    pattern's attributes are then kept in the instance, so later calls cost what a plain
    re.Pattern's do."""

    _KEEP = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
             "pattern", "flags", "groups", "groupindex", "scanner")

    def __init__(self, pattern: Any, flags: int) -> None:
        self.__dict__["_args"] = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        rx = re.compile(*self.__dict__["_args"])
        for k in self._KEEP:
            self.__dict__[k] = getattr(rx, k)
        return getattr(rx, name)

    def __repr__(self) -> str:
        return "lazy(%r, %r)" % self.__dict__["_args"]


def lazy(pattern: AnyStr, flags: int = 0) -> "re.Pattern[AnyStr]":
    """A module-level regex compiled on first use, with re.Pattern's methods.

    A check imports every parser and collector, but a board uses the patterns of its own
    vendor only: compiling all ~150 module-level patterns at import was the largest single
    cost of start-up. Not for re.sub(pattern_obj, ...) or isinstance checks (use
    `.sub` / `.search` on the object)."""
    return cast("re.Pattern[AnyStr]", _Deferred(pattern, flags))


def _compile_error(rx: str, flags: int) -> Optional[str]:
    try:
        re.compile(rx, flags)
    except re.error as e:
        return str(e)
    return None


def group_names(pattern: str, flags: int) -> List[str]:
    """The named groups of a pattern that compiles, remembered between runs (a check need
    not compile a pattern to validate its groups)."""
    return remembered("groups", pattern, flags,  # type: ignore[no-any-return]
                      lambda: sorted(re.compile(pattern, flags).groupindex))


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
