"""Which lines of a block contain one of many literal needles (case-insensitive).

The prefilter in front of the log regexes (catalogs and `[[signature]]` tables): a line
with none of a pattern's literal needles (`logtext.literal_needles`) cannot match it. With
`pyahocorasick` installed (the `fast` extra) one Aho-Corasick pass over the lower-cased block
finds every needle at once (~40 MB/s on the shipped catalogs' ~370 needles); without it each
needle is searched with str.find over the block (~7 MB/s), after dropping the needles that
contain another needle (a line holding the longer one holds the shorter one too).

A large log (LineNeedles past HYPERSCAN_AFTER_CHARS) is scanned with Hyperscan when the
`hyperscan` extra is installed (x86-64 and aarch64 Linux wheels): one SIMD pass over the
UTF-8 bytes, ~6x pyahocorasick's speed on the ~1400 needles logscan shares. Every path gives
the same lines and needles (tests/test_logchunks.py runs each on the same texts).
"""

from __future__ import annotations

import bisect
import re
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

try:  # optional accelerator; the pure-Python path gives the same lines
    import ahocorasick as _ahocorasick  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the install
    _ahocorasick = None


#: Characters a LineNeedles scans with pyahocorasick before it builds a Hyperscan database:
#: importing hyperscan (~20 ms) and compiling ~1400 literals (~30 ms) pay off after a few MB,
#: and a short log (a live check's journal) never pays them.
HYPERSCAN_AFTER_CHARS = 4 << 20

_HS_STATE: List[Any] = []  # [module or None], filled on first need


def _hyperscan() -> Any:
    """The hyperscan module, or None when it is not installed (imported once, on first need)."""
    if not _HS_STATE:
        try:
            import hyperscan  # type: ignore[import-not-found]
        except ImportError:  # pragma: no cover - depends on the install
            hyperscan = None
        _HS_STATE.append(hyperscan)
    return _HS_STATE[0]


class _HyperscanNeedles:
    """One Hyperscan block-mode database of literal needles: `hits(data)` gives (end offset,
    needle index) of every occurrence in the bytes, sorted by end offset. Raises whatever
    hyperscan raises when the database cannot be built (the caller falls back)."""

    def __init__(self, hs: Any, needles: List[bytes]) -> None:
        db = hs.Database(mode=hs.HS_MODE_BLOCK)
        ids = list(range(len(needles)))
        try:
            db.compile(expressions=needles, ids=ids, elements=len(needles), literal=True)
        except TypeError:  # python-hyperscan before hs_compile_lit_multi (Hyperscan 5.2)
            db.compile(expressions=[re.escape(n) for n in needles], ids=ids, elements=len(needles))
        self.db = db
        # a database's scratch serves one scan at a time; logs may be scanned from threads
        self.lock = threading.Lock()

    def hits(self, data: bytes) -> List[Any]:
        out: List[Any] = []
        add = out.append

        def on(i: int, _start: int, end: int, _flags: int, _ctx: Any) -> None:
            add((end, i))

        with self.lock:
            self.db.scan(data, match_event_handler=on)
        out.sort()
        return out


def _by_line(hits: Iterable[Tuple[int, str]], count: Any, newline: Any) -> Dict[int, List[str]]:
    """{0-based line: needles (each once)} from (end offset, needle) hits in ascending offset
    order; `count` is the scanned text's count method, `newline` its line break ("\\n" or
    b"\\n"): the line of a hit is the breaks counted since the last hit (a C loop)."""
    out: Dict[int, List[str]] = {}
    line, pos = 0, 0
    for end, n in hits:
        if end > pos:
            line += count(newline, pos, end)
            pos = end
        have = out.get(line)
        if have is None:
            out[line] = [n]
        elif n not in have:
            have.append(n)
    return out


def minimal_needles(needles: Iterable[str]) -> List[str]:
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
        self.needles = minimal_needles(n.lower() for n in needles if n)
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
    Needles holding a "\\n" can never lie inside a line and are left out. Past
    HYPERSCAN_AFTER_CHARS scanned (any number of chunks), Hyperscan takes over when installed
    (`engine="hyperscan"`: from the first chunk; `use_automaton=False`: str.find only)."""

    def __init__(self, needles: Iterable[str], use_automaton: bool = True, engine: str = "auto") -> None:
        self.needles = sorted({n.lower() for n in needles if n and "\n" not in n})
        self._automaton = None
        self._scanned = 0
        #: None: not tried yet; False: not available (or not to be used)
        self._hs: Any = None if use_automaton and engine in ("auto", "hyperscan") else False
        self._hs_after = 0 if engine == "hyperscan" else HYPERSCAN_AFTER_CHARS
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
            self._minimal = minimal_needles(self.needles)
            # for each minimal needle, the needles that contain it (itself first)
            self._sup = {m: [m] + [n for n in self.needles if m in n and n != m] for m in self._minimal}

    def __getstate__(self) -> Dict[str, Any]:
        # a Hyperscan database (and its lock) is not pickled: read back, the automaton scans
        # until HYPERSCAN_AFTER_CHARS again
        state = dict(self.__dict__)
        if isinstance(state["_hs"], _HyperscanNeedles):
            state["_hs"] = None
        state["_scanned"] = 0
        return state

    def _hyperscan_db(self) -> Optional[_HyperscanNeedles]:
        if self._hs is None:
            hs = _hyperscan()
            try:
                self._hs = _HyperscanNeedles(hs, [n.encode("utf-8", "surrogatepass") for n in self.needles]) \
                    if hs is not None else False
            except Exception:  # noqa: BLE001 - any failure to build: the automaton scans on
                self._hs = False
        return self._hs if isinstance(self._hs, _HyperscanNeedles) else None

    def scan(self, low: str) -> Dict[int, List[str]]:
        out: Dict[int, List[str]] = {}
        if not self.needles or not low:
            return out
        if self._hs is not False:
            self._scanned += len(low)
            db = self._hyperscan_db() if self._scanned > self._hs_after else None
            if db is not None:
                return self._scan_bytes(db, low.encode("utf-8", "surrogatepass"))
        if self._automaton is not None:
            return _by_line(self._automaton.iter(low), low.count, "\n")
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

    def _scan_bytes(self, db: _HyperscanNeedles, data: bytes) -> Dict[int, List[str]]:
        needles = self.needles
        return _by_line(((end, needles[i]) for end, i in db.hits(data)), data.count, b"\n")

    def present(self, low: str) -> List[str]:
        """The needles in one lower-cased line."""
        if self._automaton is not None:
            return list({n: None for _end, n in self._automaton.iter(low)})
        return [n for n in self.needles if n in low]
