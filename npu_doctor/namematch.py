"""Shell-style name patterns (`nvidia-*`, `libcuda.so*`, `onnxruntime`) matched many times.

fnmatch compiles a regex per pattern and runs it per name: selecting the NPU-related
packages of a desktop's 3 000 dpkg packages against ~40 patterns was 14 000 fnmatch calls
and ~80 regex compiles per check. Nearly every pattern is a plain name or has only `*`
wildcards; those are a set lookup, str.startswith/endswith over all of them at once, or an
ordered substring search. Anything else (`?`, `[..]`) goes to fnmatch.fnmatchcase, so the
answer is always fnmatch's.
"""

from __future__ import annotations

import bisect
import fnmatch
from functools import lru_cache
from typing import FrozenSet, Iterable, List, Tuple


def star_match(segments: Tuple[str, ...], name: str) -> bool:
    """fnmatch.fnmatchcase for a pattern whose only wildcard is `*`, given as
    `pattern.split("*")` (at least two segments): the first segment starts the name, the
    last ends it, the middle ones occur in order between (leftmost, as `*` allows)."""
    head, tail = segments[0], segments[-1]
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    pos, end = len(head), len(name) - len(tail)
    for mid in segments[1:-1]:
        i = name.find(mid, pos, end)
        if i < 0:
            return False
        pos = i + len(mid)
    return True


def filter_names(names: List[str], pattern: str, presorted: bool = False) -> List[str]:
    """fnmatch.filter (POSIX: case-sensitive), without a regex for `*`-only patterns. Names
    in sorted order (as Host.listdir gives them) are narrowed to the pattern's literal prefix
    by bisection first: `libze_*.so*` looks at a handful of a library directory's names.
    `presorted`: the caller guarantees the order (else it is checked, in O(n))."""
    if "*" in pattern and not any(c in pattern for c in "?[\\"):
        segs = tuple(pattern.split("*"))
        head = segs[0]
        if head and (presorted or all(a <= b for a, b in zip(names, names[1:]))):
            lo = bisect.bisect_left(names, head)
            hi = bisect.bisect_left(names, head[:-1] + chr(ord(head[-1]) + 1), lo)
            names = names[lo:hi]
        return [n for n in names if star_match(segs, n)]
    return fnmatch.filter(names, pattern)


class NamePatterns:
    """`match(name)`: whether any pattern matches name, exactly as fnmatch.fnmatchcase."""

    __slots__ = ("exact", "prefixes", "suffixes", "affixes", "stars", "rest")

    def __init__(self, patterns: Iterable[str]) -> None:
        exact, prefixes, suffixes, affixes, stars, rest = set(), [], [], [], [], []
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
            elif not any(c in p for c in "?["):
                stars.append(tuple(p.split("*")))
            else:
                rest.append(p)
        self.exact: FrozenSet[str] = frozenset(exact)
        self.prefixes: Tuple[str, ...] = tuple(prefixes)
        self.suffixes: Tuple[str, ...] = tuple(suffixes)
        self.affixes = tuple(affixes)
        self.stars = tuple(stars)
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
        if any(star_match(segs, name) for segs in self.stars):
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
