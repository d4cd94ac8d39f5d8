"""Shell-style name patterns (`nvidia-*`, `libcuda.so*`, `onnxruntime`) matched many times.

fnmatch compiles a regex per pattern and runs it per name: selecting the NPU-related
packages of a desktop's 3 000 dpkg packages against ~40 patterns was 14 000 fnmatch calls
and ~80 regex compiles per check. Nearly every pattern is a plain name or has a single `*`;
those are a set lookup and str.startswith/endswith over all of them at once. Anything else
(`?`, `[..]`, several `*`) goes to fnmatch.fnmatchcase, so the answer is always fnmatch's.
"""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import FrozenSet, Iterable, Tuple


class NamePatterns:
    """`match(name)`: whether any pattern matches name, exactly as fnmatch.fnmatchcase."""

    __slots__ = ("exact", "prefixes", "suffixes", "affixes", "rest")

    def __init__(self, patterns: Iterable[str]) -> None:
        exact, prefixes, suffixes, affixes, rest = set(), [], [], [], []
        for p in patterns:
            if not any(c in p for c in "*?["):
                exact.add(p)
            elif p.count("*") == 1 and not any(c in p for c in "?["):
                head, _, tail = p.partition("*")
                if not tail:
                    prefixes.append(head)
                elif not head:
                    suffixes.append(tail)
                else:
                    affixes.append((head, tail))
            else:
                rest.append(p)
        self.exact: FrozenSet[str] = frozenset(exact)
        self.prefixes: Tuple[str, ...] = tuple(prefixes)
        self.suffixes: Tuple[str, ...] = tuple(suffixes)
        self.affixes = tuple(affixes)
        self.rest = tuple(rest)

    def match(self, name: str) -> bool:
        if name in self.exact:
            return True
        if self.prefixes and name.startswith(self.prefixes):
            return True
        if self.suffixes and name.endswith(self.suffixes):
            return True
        for head, tail in self.affixes:
            if len(name) >= len(head) + len(tail) and name.startswith(head) and name.endswith(tail):
                return True
        return any(fnmatch.fnmatchcase(name, p) for p in self.rest)


@lru_cache(maxsize=256)
def _cached(patterns: Tuple[str, ...]) -> NamePatterns:
    return NamePatterns(patterns)


def name_patterns(patterns: Iterable[str]) -> NamePatterns:
    """The NamePatterns of a pattern list (built once per distinct list)."""
    return _cached(tuple(patterns))


def any_match(name: str, patterns: Iterable[str]) -> bool:
    """`any(fnmatch.fnmatchcase(name, p) for p in patterns)`, fast."""
    return name_patterns(patterns).match(name)
