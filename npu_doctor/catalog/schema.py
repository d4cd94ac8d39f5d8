"""The catalog file format (catalogs/*.toml): entries and catalogs, loaded and validated.

See docs/catalogs.md for the format. Every error is a ConfigError naming file, catalog, entry
and what is wrong; nothing of a bad file is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..errors import ConfigError
from ..lazyregex import LazyRegex, compile_checked, group_names, lazy

SCOPES = ("kernel", "runtime", "any")
SEVERITIES = ("error", "warning", "info")
CATALOG_KEYS = {"id", "title", "vendor", "scope", "source", "generic", "code_patterns",
                "code_aliases", "description", "drivers", "consequence_of", "mnemonic_prefix"}
ENTRY_KEYS = {"code", "mnemonic", "meaning", "rule", "benign", "severity", "pattern", "flags",
              "facts", "fix", "example", "source", "message", "subject", "accelerator",
              "cleared_by", "scope", "key", "vendor", "consequence_of", "by_device"}
FIX_KINDS = ("now", "persist", "doc")
#: Event fields a named group may not overwrite.
RESERVED = {"signature", "scope", "source", "line_no", "line", "count", "catalog", "entry",
            "code", "mnemonic", "meaning", "rule", "severity", "message", "subject",
            "fix_now", "fix_persist", "fix_doc", "source_url", "benign", "facts", "vendor",
            "consequence_of"}
#: In a pattern: any driver of the catalog's [catalog.drivers] table.
DRIVERS_TOKEN = "{accelerator_drivers}"
MAX_LINE = 400
MAX_SCAN_LINE = 4096
MAX_EVENTS_PER_ENTRY = 50
_ID_RE = lazy(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: `{group}`, `{group:conv}`, `{a|b}` (the first of a, b that matched).


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
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
    pattern: Optional["LazyRegex"]
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
    #: rule ids whose finding (same vendor, same device, from any log) is this line's cause:
    #: with one present the line is evidence of that finding, not a finding of its own
    consequence_of: List[str] = field(default_factory=list)
    #: (generic catalogs) the line is the bus's about a device (`pci 0000:01:00.0: ...`, a PCIe
    #: port naming the device that sent an error): it speaks of an accelerator when another line
    #: of the same log names that device with an accelerator driver (catalog.chunkmatch)
    by_device: bool = False

    def describe(self) -> Dict[str, Any]:
        """The entry as `explain --format json` prints it."""
        d: Dict[str, Any] = {"catalog": self.catalog, "key": self.key, "code": self.code,
                             "mnemonic": self.mnemonic, "meaning": self.meaning,
                             "rule": self.rule, "benign": self.benign,
                             "severity": self.severity, "source": self.source,
                             "fix": dict(self.fix), "examples": list(self.examples)}
        if self.consequence_of:
            d["consequence_of"] = list(self.consequence_of)
        if self.pattern is not None:
            d["pattern"] = self.pattern.pattern
        return d


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Catalog:
    id: str
    title: str
    vendor: str
    scope: str
    source: str
    generic: bool
    code_patterns: List["LazyRegex"]
    code_aliases: List[str]
    entries: List[Entry]
    drivers: Dict[str, str]
    file: str = ""
    consequence_of: List[str] = field(default_factory=list)
    #: a prefix the entries' mnemonics carry and some tools leave out (go-nvml prints
    #: `ERROR_DRIVER_NOT_LOADED` for NVML_ERROR_DRIVER_NOT_LOADED)
    mnemonic_prefix: str = ""

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
        pre = self.mnemonic_prefix.upper()
        if pre and not up.startswith(pre):
            return self.by_mnemonic(pre + up)
        return None


def _str_code(v: Any) -> Optional[str]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError("code must be an integer or a string")
    return str(v)


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
    text = raw.get("pattern")
    if isinstance(text, str) and DRIVERS_TOKEN in text:
        # a generic class about any accelerator driver: the catalog's driver table, spelled out
        names = sorted(cat.drivers, key=len, reverse=True)
        text = text.replace(DRIVERS_TOKEN, "(?:" + "|".join(re.escape(n) for n in names) + ")")
    pattern = compile_checked(text, flags, where) if "pattern" in raw else None
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
    by_device = raw.get("by_device", False)
    if not isinstance(by_device, bool):
        raise ConfigError(f"{where}: by_device must be true or false")
    if by_device and (not cat.generic or pattern is None
                      or "device" not in group_names(pattern.pattern, pattern.flags)):
        raise ConfigError(f"{where}: by_device needs a generic catalog and a pattern with a (?P<device>) group")
    if "consequence_of" in raw:
        consequence = _rule_ids(raw["consequence_of"], f"{where}: consequence_of")
        if consequence and benign:
            raise ConfigError(f"{where}: consequence_of needs a rule (a benign entry raises nothing)")
    else:  # the catalog's default, for the entries that raise a rule
        consequence = list(cat.consequence_of) if rule else []
    return Entry(cat.id, key, code, mnemonic, raw["meaning"], rule or None, benign, sev, scope,
                 pattern, dict(facts), dict(fix), examples, source, raw.get("message", ""),
                 raw.get("subject", ""), bool(raw.get("accelerator", False)),
                 raw.get("vendor") or cat.vendor, list(cleared), cat.generic, consequence, by_device)


def _rule_ids(value: Any, where: str) -> List[str]:
    """A `consequence_of` value: a list of kebab-case rule ids. Raises ConfigError."""
    if not isinstance(value, list) or not all(isinstance(x, str) and _ID_RE.match(x) for x in value):
        raise ConfigError(f"{where} must be a list of rule ids")
    return list(value)


def load_catalog_file(path: str) -> Catalog:
    """One catalog file. Raises ConfigError naming file, entry and what is wrong."""
    from ..datafiles import read_toml  # tomllib only when a catalog file is read

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
                  [compile_checked(p, 0, f"{path}: catalog {cid}: code_patterns") for p in pats],
                  [str(a) for a in aliases], [], {str(k): str(v) for k, v in drivers.items()}, path,
                  _rule_ids(head.get("consequence_of", []), f"{path}: catalog {cid}: consequence_of"),
                  str(head.get("mnemonic_prefix", "")))
    for p in cat.code_patterns:
        names = group_names(p.pattern, p.flags)
        if "code" not in names and "hexcode" not in names and "mnemonic" not in names:
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
