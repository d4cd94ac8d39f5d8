"""Matching log lines against the loaded catalogs: events, facts, counts, lookups.

`CatalogSet.match_lines` streams a log and returns `log_events[]` entries: one per entry and
distinct message, with `count`, the rule it raises (or benign), its message, fixes and facts.
`CatalogSet.lookup` answers `npu-doctor explain`.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from ..errors import ConfigError
from ..resources import data_files
from .events import complete, errno_name, fill, fill_value, full_bdf
from .lookup import _norm_code, lookup
from .logtext import BLOCK_LINES, literal_needle_sets, literal_needles, strip_prefix
from .needles import NeedleSet
from .schema import FIX_KINDS, MAX_LINE, RESERVED, Catalog, Entry, LazyRegex, load_catalog_file

_CACHE: Dict[Tuple[str, ...], "CatalogSet"] = {}


def load_catalogs(extra_dirs: Iterable[str] = ()) -> "CatalogSet":
    """Every shipped catalog, then the site catalogs in extra dirs (the `--rules DIR`s: their
    files with a `[catalog]` table; the others are rules files). Raises ConfigError (also for
    an id defined twice)."""
    from ..datafiles import read_toml

    shipped = data_files("catalogs")
    extra = [p for p in data_files("catalogs", extra_dirs)[len(shipped):] if "catalog" in read_toml(p)]
    files = tuple(shipped + extra)
    hit = _CACHE.get(files)
    if hit is not None:
        return hit
    cats: List[Catalog] = []
    ids: Dict[str, str] = {}
    for path in files:
        cat = load_catalog_file(path)
        if cat.id in ids:
            raise ConfigError(f"{path}: catalog {cat.id}: already defined in {ids[cat.id]}")
        ids[cat.id] = path
        cats.append(cat)
    cs = CatalogSet(cats)
    _CACHE[files] = cs
    return cs


# -- matching ------------------------------------------------------------------------------
class _Matcher:
    """One regex to try on a line: an entry's own pattern, or a catalog's code pattern.

    It names its catalog and entry by position in its CatalogSet (`catalog`, `entry` look them
    up), so a set read back from the configuration cache unpickles a catalog's entries only
    when one of its regexes matches."""

    __slots__ = ("rx", "needles", "scope", "generic", "extra", "_owner", "_ci", "_ei")

    def __init__(self, rx: "LazyRegex", needles: Optional[List[str]], scope: str, owner: "CatalogSet",
                 ci: int, ei: int, generic: bool, extra: Optional[List[List[str]]] = None) -> None:
        self.rx, self.needles, self.scope, self.generic = rx, needles, scope, generic
        self._owner, self._ci, self._ei = owner, ci, ei  # ei < 0: a code pattern
        if extra is None:
            # needle sets (logtext.literal_needle_sets) a line must also hold, beyond one of
            # `needles`, to be worth the regex; found at load, so a cached configuration has them
            extra = [s for s in literal_needle_sets(rx.pattern, rx.flags)
                     if not all(any(x in n for x in s) for n in needles)] if needles else []
        self.extra = extra

    @property
    def catalog(self) -> Catalog:
        return self._owner.catalog_at(self._ci)

    @property
    def entry(self) -> Optional[Entry]:
        """The entry whose pattern this is; None: a code pattern (entry chosen by the code it
        finds)."""
        return None if self._ei < 0 else self._owner.catalog_at(self._ci).entries[self._ei]

    def __reduce__(self) -> Any:
        return (_Matcher, (self.rx, self.needles, self.scope, self._owner, self._ci, self._ei,
                           self.generic, self.extra))


class CatalogSet:
    """All loaded catalogs, with the matchers built once.

    Pickled (the configuration cache), each catalog is a blob of its own, read back by
    catalog_at on first use: a log matches a few catalogs' regexes, and the entries (their
    meanings, fixes, examples) are most of the bytes."""

    def __init__(self, catalogs: List[Catalog]) -> None:
        self._cats: List[Any] = list(catalogs)  # Catalog, or its pickle until first use
        self._lock = threading.Lock()
        self.matchers: List[_Matcher] = []
        self.drivers: Dict[str, str] = {}
        self._cleared: Dict[Tuple[str, str], List[str]] = {}
        for ci, cat in enumerate(catalogs):
            for e in cat.entries:
                if e.cleared_by:
                    self._cleared[(cat.id, e.key)] = e.cleared_by
            self.drivers.update(cat.drivers)
            for p in cat.code_patterns:
                self.matchers.append(_Matcher(p, literal_needles(p.pattern, p.flags), cat.scope,
                                              self, ci, -1, cat.generic))
            for ei, e in enumerate(cat.entries):
                if e.pattern is not None:
                    self.matchers.append(_Matcher(e.pattern, literal_needles(e.pattern.pattern, e.pattern.flags),
                                                  e.scope, self, ci, ei, cat.generic))
        self._order = {id(m): i for i, m in enumerate(self.matchers)}
        self._always = [m for m in self.matchers if not m.needles]
        #: needle -> matchers, and the automaton over all needles (`_candidates`: one line at
        #: a time, `explain`); built on first use, never pickled: a check matches logs in
        #: chunks through the per-scope indexes below
        self._line_index: Optional[Tuple[Dict[str, List[_Matcher]], NeedleSet]] = None
        self._chunk_index: Dict[Tuple[str, ...], Any] = {}  # chunkmatch._Index per scopes
        #: the pickled indexes of chunkmatch.STANDARD_SCOPES (a set read back from the cache)
        self._chunk_blobs: Dict[Tuple[str, ...], bytes] = {}

    @property
    def catalogs(self) -> List[Catalog]:
        """Every catalog, in load order (all read back now if they were pickled)."""
        return [self.catalog_at(i) for i in range(len(self._cats))]

    def catalog_at(self, i: int) -> Catalog:
        """The i-th catalog (unpickled now if it was not yet; thread-safe: probes run in
        parallel)."""
        cat = self._cats[i]
        if isinstance(cat, bytes):
            with self._lock:
                cat = self._cats[i]
                if isinstance(cat, bytes):
                    cat = self._cats[i] = pickle.loads(cat)
        return cat  # type: ignore[no-any-return]

    def __setstate__(self, state: Dict[str, Any]) -> None:
        # read back from the configuration cache (npu_doctor.configcache): the matchers are
        # new objects, so the order keyed by id() is rebuilt
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._order = {id(m): i for i, m in enumerate(self.matchers)}
        self._line_index = None

    def __getstate__(self) -> Dict[str, Any]:
        # The chunk indexes of the scopes a check asks for go into the pickle, built now if
        # no log was matched yet, each a blob of its own read back on first use: a live check
        # matches only the kernel log (reading its index back: ~1 ms; building it: ~4 ms;
        # the kernel+runtime one: ~4 ms against ~15 ms). The one-line index is left out:
        # unpickling its automaton cost more than building it for `explain`.
        from .chunkmatch import STANDARD_SCOPES

        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_line_index")}
        state["_chunk_index"] = {}
        state["_chunk_blobs"] = {
            k: self._chunk_blobs.get(k) or pickle.dumps(self.chunk_index(k), protocol=pickle.HIGHEST_PROTOCOL)
            for k in STANDARD_SCOPES}
        state["_cats"] = [c if isinstance(c, bytes) else pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL)
                          for c in self._cats]
        return state

    def chunk_index(self, scopes: Tuple[str, ...]) -> Any:
        """The chunkmatch._Index of these (sorted) scopes: read back, or built now (once;
        thread-safe)."""
        got = self._chunk_index.get(scopes)
        if got is None:
            from .chunkmatch import _Index

            with self._lock:
                got = self._chunk_index.get(scopes)
                if got is None:
                    blob = self._chunk_blobs.get(scopes)
                    got = pickle.loads(blob).attach(self.matchers) if blob else _Index(self, scopes)
                    self._chunk_index[scopes] = got
        return got

    def _needles_of_lines(self) -> Tuple[Dict[str, List[_Matcher]], NeedleSet]:
        got = self._line_index
        if got is None:
            with self._lock:
                got = self._line_index
                if got is None:
                    by_needle: Dict[str, List[_Matcher]] = {}
                    for m in self.matchers:
                        for n in m.needles or ():
                            by_needle.setdefault(n, []).append(m)
                    got = self._line_index = (by_needle, NeedleSet(by_needle))
        return got

    def _accelerator_driver(self, groups: Dict[str, str]) -> bool:
        return any(groups.get(k) in self.drivers for k in ("driver", "module"))

    def pending_device(self, entry: Entry, groups: Dict[str, str]) -> Optional[str]:
        """The device (full PCI address) a `by_device` line waits for: the line counts once an
        accelerator driver's line of the same log names that device. None: not such a line."""
        if not entry.by_device or self._accelerator_driver(groups):
            return None
        return full_bdf(groups.get("device", ""))

    def entries(self) -> List[Entry]:
        return [e for c in self.catalogs for e in c.entries]

    def _candidates(self, line: str) -> List[_Matcher]:
        """Matchers whose needle is in the line, in catalog and entry order."""
        low = line.lower()
        out = {id(m): m for m in self._always}
        by_needle, needle_set = self._needles_of_lines()
        for needle in needle_set.present(low):
            for m in by_needle[needle]:
                out[id(m)] = m
        return sorted(out.values(), key=lambda m: self._order[id(m)])

    def match_line(self, line: str, scopes: Iterable[str]) -> List[Tuple[Entry, Dict[str, str]]]:
        """(entry, named groups) for every entry that matches one message (prefix stripped).

        A vendor entry on the line hides the generic classes that also match it."""
        return self._match(line, set(scopes), self._candidates(line))

    def _match(self, line: str, scopes: Set[str], candidates: List[_Matcher]) -> List[Tuple[Entry, Dict[str, str]]]:
        """match_line with the candidate matchers (in catalog and entry order) given."""
        hits: List[Tuple[Entry, Dict[str, str]]] = []
        spans: Dict[int, Tuple[int, int]] = {}  # id(groups) -> span of the match
        for m in candidates:
            if m.scope not in scopes and m.scope != "any":
                continue
            found = m.rx.search(line)
            if not found:
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            entry = m.entry
            if entry is None:
                if "code" in groups or "hexcode" in groups:
                    entry = m.catalog.by_code(_group_code(groups))
                if entry is None and "mnemonic" in groups:
                    entry = m.catalog.by_mnemonic(groups["mnemonic"])
                if entry is None:
                    continue
            if entry.scope not in scopes and entry.scope != "any":
                continue
            if entry.generic and not self._accelerator_driver(groups) and not entry.by_device:
                continue  # a vendor-neutral class speaks only of accelerator drivers
            if m.entry is not None and entry.rule and "code" in groups:
                # an entry whose own pattern captures a code is more specific than its catalog's
                # plain lookup of that same code on the line (aclInit failing with 507008 is not
                # 507008 anywhere)
                code = _group_code(groups)
                hits = [h for h in hits if not (
                    h[0].catalog == entry.catalog and h[0].rule and h[0].pattern is None
                    and ("code" in h[1] or "hexcode" in h[1]) and _group_code(h[1]) == code)]
            if any(h[0] is entry or (h[0].catalog == entry.catalog and h[0].rule and entry.rule)
                   for h in hits):
                continue  # one finding per catalog and line: the first (most specific) entry
            hits.append((entry, groups))
            spans[id(groups)] = found.span()
        if any(not e.generic for e, _ in hits):
            hits = [h for h in hits if not h[0].generic]
        # a benign entry with its own pattern (a code seen in a known context: a workload
        # limit, a consequence) hides its catalog's plain code lookup of a code inside its match
        quiet = [(e.catalog, spans[id(g)]) for e, g in hits if e.benign and e.pattern is not None]
        if quiet:
            hits = [h for h in hits if h[0].pattern is not None or not any(
                c == h[0].catalog and a <= spans[id(h[1])][0] and spans[id(h[1])][1] <= b
                for c, (a, b) in quiet)]
        return hits

    def entry_matches(self, entry: Entry, line: str) -> Optional[Dict[str, str]]:
        """Named groups when this one entry (alone, other entries not considered) matches a
        message, else None. What the catalog test runs on every example."""
        msg = strip_prefix(line)
        pats = [entry.pattern] if entry.pattern is not None else \
            [m.rx for m in self.matchers if m.catalog.id == entry.catalog and m.entry is None]
        for rx in pats:
            found = rx.search(msg)
            if not found:
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            if entry.pattern is None:
                cat = next(c for c in self.catalogs if c.id == entry.catalog)
                got = cat.by_code(_group_code(groups)) \
                    if "code" in groups or "hexcode" in groups else None
                if got is None and "mnemonic" in groups:
                    got = cat.by_mnemonic(groups["mnemonic"])
                if got is not entry:
                    continue
            if entry.generic and not self._accelerator_driver(groups) and not entry.by_device:
                continue
            return groups
        return None

    def match_text(self, text: str, source: str, scopes: Iterable[str],
                   log_scope: str) -> List[Dict[str, Any]]:
        """log_events for every catalog entry that matches a line of text (`match_lines`)."""
        return self.match_lines(text.splitlines(), source, scopes, log_scope)

    def match_lines(self, lines: Iterable[str], source: str, scopes: Iterable[str],
                    log_scope: str) -> List[Dict[str, Any]]:
        """log_events for every catalog entry that matches a line, streaming (a file object
        works: a block of BLOCK_LINES lines is held at a time; catalog.chunkmatch).

        Identical messages (prefix stripped) are one event with `count`; a failure that a
        `cleared_by` entry of the same device later clears is marked benign; several lines
        raising one rule for one device are one event (`also`)."""
        from .chunkmatch import LogClassifier

        run = LogClassifier(self, source, scopes, log_scope)
        block: List[str] = []
        for line in lines:
            block.append(line.rstrip("\r\n"))
            if len(block) >= BLOCK_LINES:
                run.feed(block)
                block = []
        run.feed(block)
        return run.finish()

    def enrich(self, e: Entry, groups: Dict[str, str]) -> Dict[str, str]:
        """Named groups plus what they imply: `errno_name` for `errno`, `vendor` from the
        driver table or the catalog."""
        g = dict(groups)
        if "errno" in g:
            g["errno_name"] = errno_name(g["errno"])
        if g.get("symbol"):  # a C++ symbol's qualified name names whose it is (std::, c10::)
            from ..linker.demangle import symbol_groups  # imported only for such lines
            g.update(symbol_groups(g["symbol"]))
        for k in ("pci_address", "device"):
            if k in g:
                g[k] = full_bdf(g[k])
        if ("driver" in g or "module" in g) and "vendor" not in g:
            vendor = self.drivers.get(g.get("driver", "")) or self.drivers.get(g.get("module", "")) \
                or e.vendor
            if vendor:
                g["vendor"] = vendor
        elif e.vendor:
            g.setdefault("vendor", e.vendor)
        return g

    def _event(self, e: Entry, groups: Dict[str, str], source: str, line_no: int, line: str,
               scope: str) -> Dict[str, Any]:
        g = self.enrich(e, groups)
        ev: Dict[str, Any] = {k: v for k, v in g.items() if k not in RESERVED}
        where = f"{source}:{line_no}"
        meaning = e.meaning
        # a template whose groups the line lacks (a pasted line without its driver prefix)
        # says the entry's meaning rather than "?"
        text = fill(e.message, g) if e.message and complete(e.message, g) else meaning
        code = e.code if e.code is not None else g.get("code")
        label = " ".join(x for x in (e.mnemonic, f"({code})" if code and e.mnemonic else code) if x)
        ev.update({
            "signature": f"catalog:{e.catalog}/{e.key}", "scope": scope, "source": source,
            "line_no": line_no, "line": line.strip()[:MAX_LINE], "count": 1,
            "catalog": e.catalog, "entry": e.key, "code": code, "mnemonic": e.mnemonic or None,
            "meaning": meaning, "rule": e.rule, "benign": e.benign,
            "severity": e.severity, "source_url": e.source,
            "message": f"{where}: {text}" + (f" [{label}]" if label else ""),
            "subject": fill(e.subject, g) if e.subject and complete(e.subject, g) else _default_subject(g, e),
            "vendor": g.get("vendor") or None,
        })
        for kind in FIX_KINDS:
            if e.fix.get(kind):
                ev[f"fix_{kind}"] = fill(e.fix[kind], g)
        facts = {}
        for path, tmpl in e.facts.items():
            val = fill_value(tmpl, g)
            if val is not None:
                facts[fill(path, g)] = val
        if facts:
            ev["facts"] = facts
        if e.accelerator:
            ev["accelerator"] = True
        if e.consequence_of:
            ev["consequence_of"] = list(e.consequence_of)  # events.apply_consequences reads it
        return {k: v for k, v in ev.items() if v is not None}

    def lookup(self, query: str) -> List[Tuple[Entry, Dict[str, str]]]:
        """Entries a code, a mnemonic or a pasted log line stands for (catalog.lookup)."""
        return lookup(self, query)


def _group_code(groups: Dict[str, str]) -> str:
    """The code a code pattern found: group `code` (decimal, or hex with 0x), or group
    `hexcode` (bare hex digits, e.g. the low byte of HCCL's `errNo[0x000000000500000b]`)."""
    if "code" in groups:
        return _norm_code(groups["code"])
    try:
        return str(int(groups["hexcode"], 16))
    except ValueError:
        return groups["hexcode"]


def _default_subject(g: Dict[str, str], e: Entry) -> str:
    parts = [g.get("driver") or g.get("module") or e.vendor or e.catalog,
             g.get("device") or g.get("pci_address") or ""]
    return " ".join(p for p in parts if p)
