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
from typing import Dict, Iterable, List

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


class LineNeedles:
    """`scan(low)`: which needles each line of a chunk holds, in one pass over the chunk.

    `low` is the lower-cased text of a chunk whose lines are joined with "\\n" (no line holds
    a "\\n"); the answer maps the 0-based index of each line that holds a needle to the needles
    it holds (each once, any order). With pyahocorasick one automaton pass finds them all and
    the line of a hit is found by counting newlines since the last hit (a C loop); without it,
    each needle that contains no other needle is searched with str.find (one hit per line is
    enough), and the longer needles are tested only on the lines that hold one they contain.
    Needles holding a "\\n" can never lie inside a line and are left out."""

    def __init__(self, needles: Iterable[str], use_automaton: bool = True) -> None:
        self.needles = sorted({n.lower() for n in needles if n and "\n" not in n})
        self._automaton = None
        if use_automaton and _ahocorasick is not None and self.needles:
            a = _ahocorasick.Automaton()
            for n in self.needles:
                a.add_word(n, n)
            a.make_automaton()
            self._automaton = a
        self._minimal: List[str] = []
        self._sup: Dict[str, List[str]] = {}
        if self._automaton is None:
            # the str.find path's tables (quadratic in the needles: 10+ ms for the shipped
            # catalogs, so not built when the automaton does the scan)
            self._minimal = _minimal(self.needles)
            # for each minimal needle, the needles that contain it (itself first)
            self._sup = {m: [m] + [n for n in self.needles if m in n and n != m] for m in self._minimal}

    def scan(self, low: str) -> Dict[int, List[str]]:
        out: Dict[int, List[str]] = {}
        if not self.needles or not low:
            return out
        if self._automaton is not None:
            count = low.count
            line, pos = 0, 0
            for end, n in self._automaton.iter(low):
                if end > pos:
                    line += count("\n", pos, end)
                    pos = end
                have = out.get(line)
                if have is None:
                    out[line] = [n]
                elif n not in have:
                    have.append(n)
            return out
        found: Dict[int, List[str]] = {}
        find, rfind, size = low.find, low.rfind, len(low)
        for m in self._minimal:
            p = find(m)
            while p >= 0:
                nl = find("\n", p)
                end = size if nl < 0 else nl
                start = rfind("\n", 0, p) + 1
                found.setdefault(start, []).append(m)
                p = find(m, end + 1) if nl >= 0 else -1
        if not found:
            return out
        starts = sorted(found)
        line, pos = 0, 0
        for start in starts:
            line += low.count("\n", pos, start)
            pos = start
            nl = find("\n", start)
            text = low[start:] if nl < 0 else low[start:nl]
            got: List[str] = []
            for m in found[start]:
                for n in self._sup[m]:
                    if n not in got and (n is m or n in text):
                        got.append(n)
            out[line] = got
        return out

    def present(self, low: str) -> List[str]:
        """The needles in one lower-cased line."""
        if self._automaton is not None:
            return list({n: None for _end, n in self._automaton.iter(low)})
        return [n for n in self.needles if n in low]
