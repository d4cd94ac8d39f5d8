"""Catalogs: vendor status codes and log messages as sourced data (`catalogs/*.toml`).

A catalog is one vendor's (or one kernel subsystem's) list of codes and messages, each entry
taken from the vendor's header, documentation or driver source and carrying that URL. The
format is documented in docs/catalogs.md; in short:

```toml
[catalog]
id = "nvidia-xid"                  # unique, kebab-case
title = "NVIDIA Xid errors"
vendor = "nvidia"                  # optional: accelerator vendor the lines belong to
scope = "kernel"                   # kernel (dmesg) | runtime (logs/, --log) | any
source = "https://docs.nvidia.com/deploy/xid-errors/"   # default source of the entries
generic = false                    # true: vendor-neutral class; a vendor entry on the same
                                   # line wins over it
# Patterns that find a code in a line; named group `code` (and/or `mnemonic`) selects the
# entry, other named groups become event fields:
code_patterns = ['NVRM: Xid \\(PCI:(?P<pci_address>[0-9a-fA-F:.]+)\\): (?P<code>\\d+)']
code_aliases = ["Xid"]             # `npu-doctor explain "Xid 79"`

[[entry]]
code = 79                          # and/or pattern = '...' (a regex with named groups)
mnemonic = "GPU_HAS_FALLEN_OFF_THE_BUS"
meaning = "The GPU stopped answering on PCIe"
rule = "device-unresponsive"       # a contract rule id; or benign = true (raises nothing)
severity = "error"                 # default: the rule's
message = "..."                    # optional template over named groups: {group}
subject = "{driver} {device}"      # optional template
facts = {"drivers.nvidia.version" = "{version}"}   # fact path -> template ({g:kib} etc.)
accelerator = true                 # the line names a device: add/enrich accelerators[]
cleared_by = ["other-entry-key"]   # a later line of that entry (same device) makes this benign
fix = {now = "...", persist = "...", doc = "https://..."}
example = ["a message in the vendor's documented format"]  # a test matches each
source = "https://..."             # where the code or message is defined
```

Matching is line by line over the kernel log (`dmesg`, `journalctl -k`) and runtime logs
(snapshot `logs/`, `--log`), whatever wraps the line: dmesg timestamps, syslog and journald
prefixes, rsyslog's `#012` escapes are stripped first (`strip_prefix`). Identical messages
become one event with a `count`. Every regex is prefiltered by the longest literal it needs,
so a line no entry can match costs one scan of a combined needle pattern.
"""

from __future__ import annotations

import errno as _errno
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .datafiles import read_toml
from .errors import ConfigError
from .resources import data_files

try:  # Python 3.11+ keeps the regex parser private; 3.8-3.10 have sre_parse
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse as _sre_parse  # type: ignore[no-redef]

SCOPES = ("kernel", "runtime", "any")
SEVERITIES = ("error", "warning", "info")
CATALOG_KEYS = {"id", "title", "vendor", "scope", "source", "generic", "code_patterns",
                "code_aliases", "description", "drivers"}
ENTRY_KEYS = {"code", "mnemonic", "meaning", "rule", "benign", "severity", "pattern", "flags",
              "facts", "fix", "example", "source", "message", "subject", "accelerator",
              "cleared_by", "scope", "key", "vendor"}
FIX_KINDS = ("now", "persist", "doc")
#: Event fields a named group may not overwrite.
RESERVED = {"signature", "scope", "source", "line_no", "line", "count", "catalog", "entry",
            "code", "mnemonic", "meaning", "rule", "severity", "message", "subject",
            "fix_now", "fix_persist", "fix_doc", "source_url", "benign", "facts", "vendor"}
MAX_LINE = 400
MAX_SCAN_LINE = 4096
MAX_EVENTS_PER_ENTRY = 50
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TEMPLATE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?\}")

#: Log prefixes stripped before matching and counting: dmesg `[  12.345678]`, `dmesg -T`
#: `[Mon Mar  4 10:00:00 2024]`, syslog `Mar  4 10:00:00 host kernel:`, ISO/journal
#: short-iso `2024-03-04T10:00:00+0100 host kernel:`, journalctl short-monotonic.
_PREFIX_RES = [
    re.compile(r"^<\d>"),
    re.compile(r"^[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S+ (?:kernel|[\w.\-/]+(?:\[\d+\])?): "),
    re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? \S+ "
               r"(?:kernel|[\w.\-/]+(?:\[\d+\])?): "),
    re.compile(r"^\[ *\d+\.\d+\] (?:\S+ kernel: )?"),
    re.compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\] "),
    re.compile(r"^kernel: "),
]


def strip_prefix(line: str) -> str:
    """The message of a log line without its dmesg/syslog/journald prefix(es)."""
    s = line.strip()
    for _ in range(3):  # syslog around dmesg: `Mar 4 ... kernel: [  1.2] msg`
        before = s
        for rx in _PREFIX_RES:
            m = rx.match(s)
            if m:
                s = s[m.end():]
        if s == before:
            break
    return s.strip()


def split_lines(text: str) -> List[str]:
    """Log lines, with rsyslog's `#012` (newline) escapes split and `#011` (tab) undone, and a
    message that a paste wrapped after a colon joined with its lower-case continuation."""
    if "#01" in text:
        text = text.replace("#012", "\n").replace("#011", "\t")
    lines = text.splitlines()
    out: List[str] = []
    for line in lines:
        if out and out[-1].rstrip().endswith(":") and line[:1].islower() \
                and strip_prefix(line) == line.strip():
            out[-1] = out[-1].rstrip() + " " + line.strip()
            out.append("")  # keep line numbers: the continuation's line stays, empty
            continue
        out.append(line)
    return out


def literal_needles(pattern: str, flags: int = 0) -> Optional[List[str]]:
    """Literal strings (lower-cased) of which every match of `pattern` contains at least one,
    or None when no such set of 4+ character strings is found. Used to skip lines that
    cannot match: a run of literals, or one literal per branch of an alternation."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except Exception:
        return None

    def best_of(seq) -> Optional[List[str]]:
        best: Optional[List[str]] = None
        run = ""

        def offer(cand: Optional[List[str]]) -> None:
            nonlocal best
            if cand and min(map(len, cand)) > (min(map(len, best)) if best else 0):
                best = cand

        for op, av in seq:
            name = str(op)
            if name == "LITERAL":
                run += chr(av)
                continue
            offer([run] if run else None)
            run = ""
            if name == "SUBPATTERN":
                offer(best_of(av[-1]))
            elif name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] >= 1:
                offer(best_of(av[2]))
            elif name == "BRANCH":
                subs = [best_of(branch) for branch in av[1]]
                if all(subs):
                    offer(sorted({n for sub in subs for n in sub}))  # type: ignore[union-attr]
        offer([run] if run else None)
        return best

    got = best_of(parsed)
    if not got or min(map(len, got)) < 4:
        return None
    return sorted({n.lower() for n in got})


@dataclass
class Entry:
    """One code or message of a catalog."""

    catalog: str
    key: str
    code: Optional[str]
    mnemonic: str
    meaning: str
    rule: Optional[str]
    benign: bool
    severity: Optional[str]
    scope: str
    pattern: Optional["re.Pattern[str]"]
    facts: Dict[str, str]
    fix: Dict[str, str]
    examples: List[str]
    source: str
    message: str = ""
    subject: str = ""
    accelerator: bool = False
    vendor: str = ""
    cleared_by: List[str] = field(default_factory=list)
    generic: bool = False

    def describe(self) -> Dict[str, Any]:
        """The entry as `explain --format json` prints it."""
        d: Dict[str, Any] = {"catalog": self.catalog, "key": self.key, "code": self.code,
                             "mnemonic": self.mnemonic, "meaning": self.meaning,
                             "rule": self.rule, "benign": self.benign,
                             "severity": self.severity, "source": self.source,
                             "fix": dict(self.fix), "examples": list(self.examples)}
        if self.pattern is not None:
            d["pattern"] = self.pattern.pattern
        return d


@dataclass
class Catalog:
    id: str
    title: str
    vendor: str
    scope: str
    source: str
    generic: bool
    code_patterns: List["re.Pattern[str]"]
    code_aliases: List[str]
    entries: List[Entry]
    drivers: Dict[str, str]
    file: str = ""

    def by_code(self, code: str) -> Optional[Entry]:
        for e in self.entries:
            if e.code is not None and e.code == code:
                return e
        return None

    def by_mnemonic(self, name: str) -> Optional[Entry]:
        up = name.upper()
        for e in self.entries:
            if e.mnemonic and e.mnemonic.upper() == up:
                return e
        return None


def _str_code(v: Any) -> Optional[str]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError("code must be an integer or a string")
    return str(v)


def _compile(rx: Any, flags: int, where: str) -> "re.Pattern[str]":
    if not isinstance(rx, str) or not rx:
        raise ConfigError(f"{where}: pattern must be a non-empty string")
    try:
        return re.compile(rx, flags)
    except re.error as e:
        raise ConfigError(f"{where}: bad regex ({e})") from None


def _load_entry(raw: Any, cat: Catalog, n: int, path: str) -> Entry:
    where = f"{path}: catalog {cat.id}: entry #{n + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    try:
        code = _str_code(raw.get("code"))
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    mnemonic = raw.get("mnemonic", "")
    key = raw.get("key") or (code if code is not None else mnemonic)
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{where}: needs code, mnemonic or key")
    where = f"{path}: catalog {cat.id}: entry {key}"
    for k in ("mnemonic", "meaning", "message", "subject", "source", "vendor"):
        if not isinstance(raw.get(k, ""), str):
            raise ConfigError(f"{where}: {k} must be a string")
    if not raw.get("meaning"):
        raise ConfigError(f"{where}: missing meaning")
    rule, benign = raw.get("rule"), raw.get("benign", False)
    if not isinstance(benign, bool):
        raise ConfigError(f"{where}: benign must be true or false")
    if rule is not None and (not isinstance(rule, str) or not _ID_RE.match(rule)):
        raise ConfigError(f"{where}: rule must be a kebab-case rule id")
    if bool(rule) == benign:
        raise ConfigError(f"{where}: needs exactly one of rule = \"<id>\" or benign = true")
    sev = raw.get("severity")
    if sev is not None and sev not in SEVERITIES:
        raise ConfigError(f"{where}: severity must be one of {', '.join(SEVERITIES)}")
    scope = raw.get("scope", cat.scope)
    if scope not in SCOPES:
        raise ConfigError(f"{where}: scope must be kernel, runtime or any")
    flags = re.IGNORECASE if "i" in str(raw.get("flags", "")) else 0
    pattern = _compile(raw["pattern"], flags, where) if "pattern" in raw else None
    if pattern is None and (code is None or not cat.code_patterns) and not mnemonic:
        raise ConfigError(f"{where}: needs a pattern, or a code the catalog's code_patterns find")
    facts = raw.get("facts", {})
    if not isinstance(facts, dict) or not all(isinstance(v, str) for v in facts.values()):
        raise ConfigError(f"{where}: facts must be a table of fact path = \"template\"")
    fix = raw.get("fix", {})
    if not isinstance(fix, dict) or set(fix) - set(FIX_KINDS) or \
            not all(isinstance(v, str) for v in fix.values()):
        raise ConfigError(f"{where}: fix must be a table with now/persist/doc strings")
    examples = raw.get("example", [])
    if isinstance(examples, str):
        examples = [examples]
    if not isinstance(examples, list) or not all(isinstance(x, str) for x in examples):
        raise ConfigError(f"{where}: example must be a string or a list of strings")
    source = raw.get("source") or cat.source
    if not source:
        raise ConfigError(f"{where}: missing source (URL of the header, doc or driver source)")
    cleared = raw.get("cleared_by", [])
    if not isinstance(cleared, list) or not all(isinstance(x, str) for x in cleared):
        raise ConfigError(f"{where}: cleared_by must be a list of entry keys")
    if not isinstance(raw.get("accelerator", False), bool):
        raise ConfigError(f"{where}: accelerator must be true or false")
    return Entry(cat.id, key, code, mnemonic, raw["meaning"], rule or None, benign, sev, scope,
                 pattern, dict(facts), dict(fix), examples, source, raw.get("message", ""),
                 raw.get("subject", ""), bool(raw.get("accelerator", False)),
                 raw.get("vendor") or cat.vendor, list(cleared), cat.generic)


def load_catalog_file(path: str) -> Catalog:
    """One catalog file. Raises ConfigError naming file, entry and what is wrong."""
    data = read_toml(path)
    unknown = set(data) - {"catalog", "entry"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r} (expected [catalog], [[entry]])")
    head = data.get("catalog")
    if not isinstance(head, dict):
        raise ConfigError(f"{path}: missing [catalog] table")
    bad = set(head) - CATALOG_KEYS
    if bad:
        raise ConfigError(f"{path}: [catalog]: unknown key {sorted(bad)[0]!r}")
    cid = head.get("id")
    if not isinstance(cid, str) or not _ID_RE.match(cid):
        raise ConfigError(f"{path}: [catalog] id must be kebab-case")
    scope = head.get("scope", "any")
    if scope not in SCOPES:
        raise ConfigError(f"{path}: catalog {cid}: scope must be kernel, runtime or any")
    pats = head.get("code_patterns", [])
    aliases = head.get("code_aliases", [])
    drivers = head.get("drivers", {})
    if not isinstance(pats, list) or not isinstance(aliases, list) or not isinstance(drivers, dict):
        raise ConfigError(f"{path}: catalog {cid}: code_patterns/code_aliases must be lists, drivers a table")
    cat = Catalog(cid, str(head.get("title", cid)), str(head.get("vendor", "")), scope,
                  str(head.get("source", "")), bool(head.get("generic", False)),
                  [_compile(p, 0, f"{path}: catalog {cid}: code_patterns") for p in pats],
                  [str(a) for a in aliases], [], {str(k): str(v) for k, v in drivers.items()}, path)
    for p in cat.code_patterns:
        if "code" not in p.groupindex and "mnemonic" not in p.groupindex:
            raise ConfigError(f"{path}: catalog {cid}: code pattern {p.pattern!r} has no (?P<code>) or (?P<mnemonic>) group")
    entries = data.get("entry", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: `entry` must be an array of tables ([[entry]])")
    seen: Dict[str, int] = {}
    for n, raw in enumerate(entries):
        e = _load_entry(raw, cat, n, path)
        if e.key in seen:
            raise ConfigError(f"{path}: catalog {cid}: entry {e.key} defined twice")
        seen[e.key] = n
        cat.entries.append(e)
    for e in cat.entries:
        for k in e.cleared_by:
            if k not in seen:
                raise ConfigError(f"{path}: catalog {cid}: entry {e.key}: cleared_by names unknown entry {k!r}")
    return cat


_CACHE: Dict[Tuple[str, ...], "CatalogSet"] = {}


def load_catalogs(extra_dirs: Iterable[str] = ()) -> "CatalogSet":
    """Every shipped catalog, then those of extra dirs. Raises ConfigError (also for an id
    defined twice)."""
    files = tuple(data_files("catalogs", extra_dirs))
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
@dataclass
class _Matcher:
    """One regex to try on a line: an entry's own pattern, or a catalog's code pattern."""

    rx: "re.Pattern[str]"
    needles: Optional[List[str]]
    scope: str
    catalog: Catalog
    entry: Optional[Entry]  # None: a code pattern (entry chosen by the code it finds)
    generic: bool


class CatalogSet:
    """All loaded catalogs, with the matchers built once."""

    def __init__(self, catalogs: List[Catalog]) -> None:
        self.catalogs = catalogs
        self.matchers: List[_Matcher] = []
        self.drivers: Dict[str, str] = {}
        self._cleared: Dict[Tuple[str, str], List[str]] = {}
        for cat in catalogs:
            for e in cat.entries:
                if e.cleared_by:
                    self._cleared[(cat.id, e.key)] = e.cleared_by
            self.drivers.update(cat.drivers)
            for p in cat.code_patterns:
                self.matchers.append(_Matcher(p, literal_needles(p.pattern, p.flags), cat.scope,
                                              cat, None, cat.generic))
            for e in cat.entries:
                if e.pattern is not None:
                    self.matchers.append(_Matcher(e.pattern, literal_needles(e.pattern.pattern, e.pattern.flags),
                                                  e.scope, cat, e, cat.generic))
        self._order = {id(m): i for i, m in enumerate(self.matchers)}
        needles = sorted({n for m in self.matchers for n in m.needles or ()}, key=len, reverse=True)
        self._always = [m for m in self.matchers if not m.needles]
        self._needle_rx = re.compile("|".join(re.escape(n) for n in needles), re.IGNORECASE) \
            if needles else None
        self._by_needle: Dict[str, List[_Matcher]] = {}
        for m in self.matchers:
            for n in m.needles or ():
                self._by_needle.setdefault(n, []).append(m)

    def _accelerator_driver(self, groups: Dict[str, str]) -> bool:
        return any(groups.get(k) in self.drivers for k in ("driver", "module"))

    def entries(self) -> List[Entry]:
        return [e for c in self.catalogs for e in c.entries]

    def _candidates(self, line: str) -> List[_Matcher]:
        """Matchers whose needle is in the line, in catalog and entry order."""
        low = line.lower()
        out = {id(m): m for m in self._always}
        for needle, ms in self._by_needle.items():
            if needle in low:
                for m in ms:
                    out[id(m)] = m
        return sorted(out.values(), key=lambda m: self._order[id(m)])

    def match_line(self, line: str, scopes: Iterable[str]) -> List[Tuple[Entry, Dict[str, str]]]:
        """(entry, named groups) for every entry that matches one message (prefix stripped).

        A vendor entry on the line hides the generic classes that also match it."""
        scopes = set(scopes)
        hits: List[Tuple[Entry, Dict[str, str]]] = []
        for m in self._candidates(line):
            if m.scope not in scopes and m.scope != "any":
                continue
            found = m.rx.search(line)
            if not found:
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            entry = m.entry
            if entry is None:
                if "code" in groups:
                    entry = m.catalog.by_code(_norm_code(groups["code"]))
                if entry is None and "mnemonic" in groups:
                    entry = m.catalog.by_mnemonic(groups["mnemonic"])
                if entry is None:
                    continue
            if entry.scope not in scopes and entry.scope != "any":
                continue
            if entry.generic and not self._accelerator_driver(groups):
                continue  # a vendor-neutral class speaks only of accelerator drivers
            if any(h[0] is entry or (h[0].catalog == entry.catalog and h[0].rule and entry.rule)
                   for h in hits):
                continue  # one finding per catalog and line: the first (most specific) entry
            hits.append((entry, groups))
        if any(not e.generic for e, _ in hits):
            hits = [h for h in hits if not h[0].generic]
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
                got = cat.by_code(_norm_code(groups["code"])) if "code" in groups else None
                if got is None and "mnemonic" in groups:
                    got = cat.by_mnemonic(groups["mnemonic"])
                if got is not entry:
                    continue
            if entry.generic and not self._accelerator_driver(groups):
                continue
            return groups
        return None

    def candidate_lines(self, lines: List[str]) -> List[int]:
        """Indices of lines that a needle (or a needle-less matcher) could match."""
        if self._always:
            return list(range(len(lines)))
        if self._needle_rx is None:
            return []
        rx = self._needle_rx
        return [i for i, line in enumerate(lines) if line and rx.search(line)]

    def match_text(self, text: str, source: str, scopes: Iterable[str],
                   log_scope: str) -> List[Dict[str, Any]]:
        """log_events for every catalog entry that matches a line of text.

        Identical messages (prefix stripped) are one event with `count`; a failure that a
        `cleared_by` entry of the same device later clears is marked benign."""
        scopes = tuple(scopes)
        lines = split_lines(text)
        events: List[Dict[str, Any]] = []
        by_key: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        per_entry: Dict[Tuple[str, str], int] = {}
        for i in self.candidate_lines(lines):
            raw = lines[i]
            if len(raw) > MAX_SCAN_LINE:
                raw = raw[:MAX_SCAN_LINE]
            msg = strip_prefix(raw)
            for entry, groups in self.match_line(msg, scopes):
                k = (entry.catalog, entry.key, msg)
                if k in by_key:
                    by_key[k]["count"] += 1
                    continue
                ek = (entry.catalog, entry.key)
                if per_entry.get(ek, 0) >= MAX_EVENTS_PER_ENTRY:
                    continue
                per_entry[ek] = per_entry.get(ek, 0) + 1
                ev = self._event(entry, groups, source, i + 1, raw, log_scope)
                by_key[k] = ev
                events.append(ev)
        _apply_cleared(events, self._cleared)
        _group_by_subject(events)
        for ev in events:
            if ev["count"] > 1:
                ev["message"] += f" ({ev['count']} times)"
        return events

    def enrich(self, e: Entry, groups: Dict[str, str]) -> Dict[str, str]:
        """Named groups plus what they imply: `errno_name` for `errno`, `vendor` from the
        driver table or the catalog."""
        g = dict(groups)
        if "errno" in g:
            g["errno_name"] = errno_name(g["errno"])
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
        text = fill(e.message, g) if e.message else meaning
        code = e.code if e.code is not None else g.get("code")
        label = " ".join(x for x in (e.mnemonic, f"({code})" if code and e.mnemonic else code) if x)
        ev.update({
            "signature": f"catalog:{e.catalog}/{e.key}", "scope": scope, "source": source,
            "line_no": line_no, "line": line.strip()[:MAX_LINE], "count": 1,
            "catalog": e.catalog, "entry": e.key, "code": code, "mnemonic": e.mnemonic or None,
            "meaning": meaning, "rule": e.rule, "benign": e.benign,
            "severity": e.severity, "source_url": e.source,
            "message": f"{where}: {text}" + (f" [{label}]" if label else ""),
            "subject": fill(e.subject, g) if e.subject else _default_subject(g, e),
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
        return {k: v for k, v in ev.items() if v is not None}

    def lookup(self, query: str) -> List[Tuple[Entry, Dict[str, str]]]:
        """Entries a code (`Xid 79`, `-8005`, `62`), a mnemonic (`HAILO_TIMEOUT`) or a pasted
        log line stands for; line matches first."""
        q = query.strip()
        hits = self.match_line(strip_prefix(q), SCOPES)
        if hits:
            return [(e, self.enrich(e, g)) for e, g in hits]
        out: List[Tuple[Entry, Dict[str, str]]] = []
        alias, code = _split_alias(q)
        for cat in self.catalogs:
            if alias and not any(a.lower() == alias.lower() for a in cat.code_aliases):
                continue
            e = cat.by_code(_norm_code(code)) or cat.by_mnemonic(code)
            if e is not None:
                out.append((e, {}))
        if not out and len(q) >= 6:
            # a fragment of a message: the entries whose examples or meaning contain it
            low = q.lower()
            out = [(e, {}) for e in self.entries()
                   if any(low in x.lower() for x in e.examples) or low in e.meaning.lower()]
        return out


def _split_alias(q: str) -> Tuple[str, str]:
    m = re.match(r"^([A-Za-z][\w ]*?)[ :#]+(-?\w+)$", q)
    if m and not re.match(r"^[A-Z0-9_]+$", q):
        return m.group(1), m.group(2)
    return "", q


def _norm_code(code: str) -> str:
    c = code.strip()
    if re.match(r"^[+-]?\d+$", c):
        return str(int(c))
    if re.match(r"^0x[0-9a-fA-F]+$", c):
        return str(int(c, 16))
    return c


def _default_subject(g: Dict[str, str], e: Entry) -> str:
    parts = [g.get("driver") or g.get("module") or e.vendor or e.catalog,
             g.get("device") or g.get("pci_address") or ""]
    return " ".join(p for p in parts if p)


def _apply_cleared(events: List[Dict[str, Any]], cleared: Dict[Tuple[str, str], List[str]]) -> None:
    """A failure followed by a line of one of its `cleared_by` entries (same device, when the
    lines name one) is benign: e.g. a firmware file missing, then a fallback name loaded."""
    for ev in events:
        keys = cleared.get((ev["catalog"], ev["entry"]))
        if not keys:
            continue
        for later in events:
            if later["catalog"] == ev["catalog"] and later["entry"] in keys \
                    and later["source"] == ev["source"] and later["line_no"] > ev["line_no"] \
                    and later.get("device") == ev.get("device"):
                ev["benign"] = True
                ev["cleared_by_line"] = f"{later['source']}:{later['line_no']}"
                ev.pop("rule", None)
                break


def _group_by_subject(events: List[Dict[str, Any]]) -> None:
    """Several lines that raise one rule for one device are one finding: the first line (the
    cause, usually) keeps the rule and lists the others under `also`."""
    first: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for ev in events:
        if not ev.get("rule") or not ev.get("subject"):
            continue
        k = (ev["rule"], ev["subject"])
        if k not in first:
            first[k] = ev
            continue
        first[k].setdefault("also", []).append(ev["message"])
        ev["grouped_into"] = f"{first[k]['source']}:{first[k]['line_no']}"
        ev.pop("rule")


def errno_name(value: str) -> str:
    """`-22` -> `EINVAL`; the number itself when unknown."""
    try:
        n = abs(int(value))
    except ValueError:
        return value
    return _errno.errorcode.get(n, str(n))


def fill(template: str, groups: Dict[str, str]) -> str:
    """`{group}` placeholders filled from named groups; an unknown one stays `?`."""
    return _TEMPLATE_RE.sub(lambda m: str(_convert(groups.get(m.group(1)), m.group(2)) or "?"), template)


def fill_value(template: str, groups: Dict[str, str]) -> Any:
    """A fact value from a template: a lone `{g:int}`/`{g:kib}`/`{g:mib}` gives a number
    (KiB/MiB converted to bytes), otherwise a string; None when a group is missing."""
    m = _TEMPLATE_RE.fullmatch(template)
    if m:
        return _convert(groups.get(m.group(1)), m.group(2))
    if any(groups.get(x.group(1)) is None for x in _TEMPLATE_RE.finditer(template)):
        return None
    return fill(template, groups)


_UNITS = {"int": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


def _convert(value: Optional[str], conv: Optional[str]) -> Any:
    if value is None:
        return None
    if not conv:
        return value
    if conv in _UNITS:
        try:
            n = int(str(value).strip())
        except ValueError:
            return None
        if len(str(n)) > 30:
            return None
        return n * _UNITS[conv]
    if conv == "lower":
        return value.lower()
    return value
