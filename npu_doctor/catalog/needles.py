"""Which lines of a block contain one of many literal needles (case-insensitive).

The prefilter in front of the log regexes (catalogs and `[[signature]]` tables): a line
with none of a pattern's literal needles (`logtext.literal_needles`) cannot match it. With
`pyahocorasick` installed (the `fast` extra) one Aho-Corasick pass over the lower-cased block
finds every needle at once (~40 MB/s on the shipped catalogs' ~370 needles); without it each
needle is searched with str.find over the block (~7 MB/s), after dropping the needles that
contain another needle (a line holding the longer one holds the shorter one too).
"""

from __future__ import annotations

import bisect
from typing import Iterable, List

try:  # optional accelerator; the pure-Python path gives the same lines
    import ahocorasick as _ahocorasick  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the install
    _ahocorasick = None


def _minimal(needles: Iterable[str]) -> List[str]:
    """The needles that contain no other needle (same lines, fewer searches)."""
    uniq = sorted(set(needles), key=len)
    keep: List[str] = []
    for n in uniq:
        if not any(k in n for k in keep):
            keep.append(n)
    return keep


class LineFilter:
    """`hits(block)`: indices of the lines of block that contain a needle (lower-cased)."""

    def __init__(self, needles: Iterable[str], use_automaton: bool = True) -> None:
        self.needles = _minimal(n.lower() for n in needles if n)
        self._automaton = None
        if use_automaton and _ahocorasick is not None and self.needles:
            a = _ahocorasick.Automaton()
            for n in self.needles:
                a.add_word(n, len(n))
            a.make_automaton()
            self._automaton = a

    def hits(self, block: List[str]) -> List[int]:
        if not self.needles or not block:
            return []
        text = "\n".join(block).lower()
        if len(text) != sum(map(len, block)) + len(block) - 1:
            # lower() changed a length (some non-ASCII letters do): judge line by line
            return [i for i, line in enumerate(block)
                    if any(nd in line.lower() for nd in self.needles)]
        offsets = [0]
        for line in block:
            offsets.append(offsets[-1] + len(line) + 1)
        found = set()
        if self._automaton is not None:
            for end, _n in self._automaton.iter(text):
                found.add(bisect.bisect_right(offsets, end) - 1)
            return sorted(found)
        last = len(offsets) - 1
        for nd in self.needles:
            pos = text.find(nd)
            while pos >= 0:
                i = bisect.bisect_right(offsets, pos) - 1
                found.add(i)
                pos = text.find(nd, offsets[i + 1]) if i + 1 < last else -1
        return sorted(found)


class NeedleSet:
    """`present(text)`: the needles (from a fixed set, lower-case) that occur in text."""

    def __init__(self, needles: Iterable[str]) -> None:
        self.needles = sorted(set(needles))
        self._automaton = None
        if _ahocorasick is not None and self.needles:
            a = _ahocorasick.Automaton()
            for n in self.needles:
                a.add_word(n, n)
            a.make_automaton()
            self._automaton = a

    def present(self, low: str) -> List[str]:
        if self._automaton is not None:
            return list({n: None for _end, n in self._automaton.iter(low)})
        return [n for n in self.needles if n in low]
