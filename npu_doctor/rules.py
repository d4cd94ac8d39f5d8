"""The rules engine: pitfall rules as data (`rules/*.toml`), evaluated safely.

A rule (ARCHITECTURE.md, "Contract: rule ids"):

```toml
[[rule]]
id = "runtime-autosuspend"          # contract id, kebab-case
severity = "warning"                # error | warning | info
title = "Runtime PM suspends the accelerator between inferences"
explain = "Why it matters, in a paragraph."
docs = ["https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-devices-power"]
for_each = "accelerators"           # optional: evaluate once per list element, bound to `it`
when = [                            # all must hold; {any = [...]}, {all = [...]}, {not = {...}}
  {fact = "it.power.control", eq = "auto"},
]
subject = "{it.name}"               # templates: {path} of a fact, {it.path} of the element
message = "power/control is {it.power.control}"
evidence = ["it.power.control", "it.power.runtime_status"]
[[rule.fix]]
kind = "now"                        # now | persist | doc
text = "echo on | sudo tee {it.sysfs}/power/control"
sysfs_write = {path = "{it.sysfs}/power/control", value = "on"}
```

A rule with several ways of being detected lists `[[rule.match]]` tables, each with its own
`for_each`, `when`, `subject`, `message`, `evidence`, optional `severity` and `fix`.

Condition operators (one per condition, on `fact`): eq, ne, lt, le, gt, ge, in, not_in,
contains, matches (regex), exists (true/false), version_lt/le/gt/ge/eq/ne (through
`npu_doctor.versions`), version_prefix, and each comparison with `_fact` to compare with
another fact (`ge_fact = "it.passive_trip_c"`). A fact that is unknown makes a comparison
false: unknown is never a finding.

Nothing is evaluated as code. A bad file raises ConfigError naming file, rule and problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import versions
from .errors import ConfigError
from .datafiles import read_toml
from .facts import Facts, lookup, split_path
from .resources import data_files

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}
FIX_KINDS = ("now", "persist", "doc")
RULE_KEYS = {"id", "severity", "title", "explain", "docs", "match", "fix", "for_each", "when",
             "subject", "message", "evidence", "tags", "extend"}
MATCH_KEYS = {"for_each", "when", "subject", "message", "evidence", "severity", "fix"}
FIX_KEYS = {"kind", "text", "sysfs_write", "when", "url"}
_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "contains", "matches",
        "version_lt", "version_le", "version_gt", "version_ge", "version_eq", "version_ne"}
OPERATORS = _CMP | {f"{o}_fact" for o in _CMP} | {"exists", "version_prefix", "version_prefix_fact"}
#: Rules that compare versions against the matrices.
VERSION_RULE_RE = re.compile(r"mismatch|incompatible|not-in-matrix")
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TEMPLATE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\[\]\-]*)\}")


@dataclass
class Fix:
    kind: str
    text: str
    sysfs_write: Optional[Dict[str, str]] = None
    when: List[Any] = field(default_factory=list)


@dataclass
class Match:
    for_each: Optional[str]
    when: List[Any]
    subject: str
    message: str
    evidence: List[str]
    severity: Optional[str]
    fixes: List[Fix]
    file: str = ""


@dataclass
class Rule:
    id: str
    severity: str
    title: str
    explain: str
    docs: List[str]
    matches: List[Match]
    fixes: List[Fix]
    file: str = ""
    extend: bool = False


@dataclass
class Finding:
    id: str
    severity: str
    title: str
    message: str
    subject: str
    evidence: List[Dict[str, Any]]
    fixes: List[Dict[str, Any]]

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title,
                "message": self.message, "subject": self.subject,
                "evidence": self.evidence, "fixes": self.fixes}


@dataclass
class RuleSet:
    rules: List[Rule]
    matrices: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)
    #: matrix id -> (file it is defined in, its description)
    matrix_info: Dict[str, Tuple[str, str]] = field(default_factory=dict)

    def matrices_for(self, rule: "Rule") -> List[str]:
        """Ids of the version matrices behind a version rule: those kept in the files that
        define or extend it. Other rules (thermal, sensors) use no matrix."""
        if not VERSION_RULE_RE.search(rule.id):
            return []
        files = {rule.file} | {m.file for m in rule.matches}
        return [mid for mid, (f, _d) in self.matrix_info.items() if f in files]

    def get(self, rule_id: str) -> Optional[Rule]:
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None


# -- loading -----------------------------------------------------------------------------
def _check_condition(cond: Any, where: str) -> None:
    if not isinstance(cond, dict):
        raise ConfigError(f"{where}: a condition must be a table, got {cond!r}")
    if "any" in cond or "all" in cond:
        key = "any" if "any" in cond else "all"
        if set(cond) != {key} or not isinstance(cond[key], list):
            raise ConfigError(f"{where}: `{key}` must be the only key and hold a list")
        for c in cond[key]:
            _check_condition(c, where)
        return
    if "not" in cond:
        if set(cond) != {"not"}:
            raise ConfigError(f"{where}: `not` must be the only key")
        _check_condition(cond["not"], where)
        return
    if "fact" not in cond or not isinstance(cond["fact"], str):
        raise ConfigError(f"{where}: condition {cond!r} has no fact")
    ops = set(cond) - {"fact"}
    unknown = ops - OPERATORS
    if unknown:
        raise ConfigError(f"{where}: unknown operator {sorted(unknown)[0]!r}")
    if len(ops) != 1:
        raise ConfigError(f"{where}: condition on {cond['fact']!r} needs exactly one operator")
    op = next(iter(ops))
    if op == "exists" and not isinstance(cond[op], bool):
        raise ConfigError(f"{where}: `exists` takes true or false")
    if op.endswith("_fact") and not isinstance(cond[op], str):
        raise ConfigError(f"{where}: `{op}` names another fact (a string)")
    if op in ("matches", "matches_fact") and op == "matches":
        try:
            re.compile(cond[op])
        except (re.error, TypeError) as e:
            raise ConfigError(f"{where}: bad regex {cond[op]!r} ({e})") from None
    if op in ("in", "not_in") and not isinstance(cond[op], list):
        raise ConfigError(f"{where}: `{op}` needs a list")


def _parse_fixes(raw: Any, where: str) -> List[Fix]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: fix must be an array of tables ([[rule.fix]])")
    out = []
    for f in raw:
        if not isinstance(f, dict):
            raise ConfigError(f"{where}: fix must be a table")
        unknown = set(f) - FIX_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown fix key {sorted(unknown)[0]!r}")
        if f.get("kind") not in FIX_KINDS:
            raise ConfigError(f"{where}: fix kind must be one of {', '.join(FIX_KINDS)}")
        text = f.get("text") or f.get("url")
        if not isinstance(text, str) or not text:
            raise ConfigError(f"{where}: fix needs text")
        sw = f.get("sysfs_write")
        if sw is not None and (not isinstance(sw, dict) or set(sw) != {"path", "value"}):
            raise ConfigError(f"{where}: sysfs_write must be {{path = ..., value = ...}}")
        when = f.get("when", [])
        for c in when:
            _check_condition(c, where)
        out.append(Fix(f["kind"], text, sw, when))
    return out


def _parse_rule(raw: Any, path: str, n: int) -> Rule:
    rid = raw.get("id") if isinstance(raw, dict) else None
    where = f"{path}: rule {rid or '#' + str(n + 1)}"
    if not isinstance(raw, dict) or not isinstance(rid, str):
        raise ConfigError(f"{where}: missing id")
    if not _ID_RE.match(rid):
        raise ConfigError(f"{where}: id must be kebab-case")
    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    if not isinstance(raw.get("extend", False), bool):
        raise ConfigError(f"{where}: extend must be true or false")
    if raw.get("extend"):
        # adds detection paths to a rule defined (with title, explain, severity) elsewhere
        extra = set(raw) - {"id", "extend", "match", "fix", "for_each", "when", "subject",
                            "message", "evidence", "docs"}
        if extra:
            raise ConfigError(f"{where}: an `extend = true` rule may not set {sorted(extra)[0]!r}")
        raw = dict(raw, severity="info", title="(extension)", explain="(extension)")
    sev = raw.get("severity")
    if sev not in SEVERITIES:
        raise ConfigError(f"{where}: severity must be error, warning or info (got {sev!r})")
    for key in ("title", "explain"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{where}: missing {key}")
    raw_matches = raw.get("match")
    inline = {k: raw[k] for k in MATCH_KEYS - {"severity", "fix"} if k in raw}
    if raw_matches is None:
        raw_matches = [inline] if inline else []
    elif inline:
        raise ConfigError(f"{where}: use either [[rule.match]] or top-level when, not both")
    matches = []
    for m in raw_matches:
        if not isinstance(m, dict):
            raise ConfigError(f"{where}: match must be a table")
        unknown = set(m) - MATCH_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown match key {sorted(unknown)[0]!r}")
        when = m.get("when", [])
        if not isinstance(when, list) or not when:
            raise ConfigError(f"{where}: when must be a non-empty list of conditions")
        for c in when:
            _check_condition(c, where)
        msev = m.get("severity")
        if msev is not None and msev not in SEVERITIES:
            raise ConfigError(f"{where}: match severity must be error, warning or info")
        ev = m.get("evidence", [])
        if not isinstance(ev, list) or not all(isinstance(e, str) for e in ev):
            raise ConfigError(f"{where}: evidence must be a list of fact paths")
        if not isinstance(m.get("message", ""), str) or not m.get("message"):
            raise ConfigError(f"{where}: match needs a message")
        for key in ("subject", "for_each"):
            if key in m and not isinstance(m[key], str):
                raise ConfigError(f"{where}: {key} must be a string")
        matches.append(Match(m.get("for_each"), when, m.get("subject", ""), m["message"], ev,
                             msev, _parse_fixes(m.get("fix"), where), file=path))
    docs = raw.get("docs", [])
    if not isinstance(docs, list) or not all(isinstance(d, str) and d for d in docs):
        raise ConfigError(f"{where}: docs must be a list of URLs")
    rule = Rule(rid, sev, raw["title"].strip(), raw["explain"].strip(), docs, matches,
                _parse_fixes(raw.get("fix"), where), file=path)
    rule.extend = bool(raw.get("extend"))
    return rule


def load_rule_file(path: str) -> Tuple[List[Rule], Dict[str, List[Dict[str, Any]]]]:
    """Rules and matrices of one file. Raises ConfigError (file, rule, what is wrong)."""
    data = read_toml(path)
    unknown = set(data) - {"rule", "matrix"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r} (expected [[rule]] or [[matrix]])")
    for table in ("rule", "matrix"):
        if not isinstance(data.get(table, []), list):
            raise ConfigError(f"{path}: `{table}` must be an array of tables ([[{table}]])")
    rules = [_parse_rule(r, path, n) for n, r in enumerate(data.get("rule", []))]
    matrices: Dict[str, List[Dict[str, Any]]] = {}
    _MATRIX_DESCRIPTIONS.update({m["id"]: str(m.get("description", "")) for m in data.get("matrix", [])
                                 if isinstance(m, dict) and isinstance(m.get("id"), str)})
    for n, m in enumerate(data.get("matrix", [])):
        if not isinstance(m, dict) or not isinstance(m.get("id"), str):
            raise ConfigError(f"{path}: matrix #{n + 1}: missing id")
        rows = m.get("row", [])
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or not row.get("source"):
                raise ConfigError(f"{path}: matrix {m['id']}: row {i + 1} has no source")
        matrices.setdefault(m["id"], []).extend(rows)
    return rules, matrices


_MATRIX_DESCRIPTIONS: Dict[str, str] = {}


def load_rules(extra_dirs: Iterable[str] = ()) -> RuleSet:
    """Every shipped rule, then those of --rules DIRs. Raises ConfigError on a duplicate id."""
    rules: List[Rule] = []
    extensions: List[Rule] = []
    matrices: Dict[str, List[Dict[str, Any]]] = {}
    matrix_info: Dict[str, Tuple[str, str]] = {}
    seen: Dict[str, str] = {}
    for path in data_files("rules", extra_dirs):
        file_rules, file_mats = load_rule_file(path)
        for k in file_mats:
            matrix_info.setdefault(k, (path, _MATRIX_DESCRIPTIONS.get(k, "")))
        for r in file_rules:
            if r.extend:
                extensions.append(r)
                continue
            if r.id in seen:
                raise ConfigError(f"{path}: rule {r.id}: already defined in {seen[r.id]} "
                                  "(use `extend = true` to add matches to it)")
            seen[r.id] = path
            rules.append(r)
        for k, rows in file_mats.items():
            matrices.setdefault(k, []).extend(rows)
    by_id = {r.id: r for r in rules}
    for ext in extensions:
        base = by_id.get(ext.id)
        if base is None:
            raise ConfigError(f"{ext.file}: rule {ext.id}: extends a rule that is not defined")
        for m in ext.matches:
            # fixes and docs given at the extension's top level belong to its own matches
            # (a Hailo finding must not carry the NVIDIA extension's documentation)
            m.fixes = m.fixes + ext.fixes + [Fix("doc", d) for d in ext.docs
                                             if not any(f.text == d for f in m.fixes + ext.fixes)]
        base.matches.extend(ext.matches)
    for r in rules:
        r.matches.append(catalog_match(r.id))
    return RuleSet(rules, matrices, matrix_info)


def catalog_match(rule_id: str) -> Match:
    """How a catalog entry (npu_doctor.catalogs) raises its rule: a log_events[] element that
    names the rule. Message, subject, severity and fixes come from the entry."""
    return Match(
        for_each="log_events", when=[{"fact": "it.rule", "eq": rule_id}],
        subject="{it.subject}", message="{it.message}",
        evidence=["it.line", "it.count", "it.also", "it.meaning"], severity="{it.severity}",
        fixes=[Fix("now", "{it.fix_now}"), Fix("persist", "{it.fix_persist}"),
               Fix("doc", "{it.fix_doc}"), Fix("doc", "{it.source_url}")],
        file="catalogs")


# -- evaluation --------------------------------------------------------------------------
class _Scope:
    def __init__(self, root: Dict[str, Any], it: Any = None, it_path: str = "") -> None:
        self.root, self.it, self.it_path = root, it, it_path

    def resolve(self, path: str) -> Tuple[Any, str]:
        """(value, absolute fact path) for `it.x` or an absolute path."""
        if path == "it":
            return self.it, self.it_path
        if path.startswith("it."):
            rel = path[3:]
            return lookup(self.it, rel), f"{self.it_path}.{rel}"
        return lookup(self.root, path), path


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


def _compare(op: str, got: Any, want: Any) -> bool:
    if got is None or want is None:
        return False
    if op.startswith("version_"):
        if op == "version_prefix":
            return versions.prefix_match(str(got), str(want))
        c = versions.compare(str(got), str(want))
        if c is None:
            return False
        return {"version_lt": c < 0, "version_le": c <= 0, "version_gt": c > 0,
                "version_ge": c >= 0, "version_eq": c == 0, "version_ne": c != 0}[op]
    if op in ("eq", "ne"):
        ng, nw = _num(got), _num(want)
        same = (ng == nw) if (ng is not None and nw is not None) else (got == want or str(got) == str(want))
        return same if op == "eq" else not same
    if op in ("lt", "le", "gt", "ge"):
        ng, nw = _num(got), _num(want)
        if ng is None or nw is None:
            return False
        return {"lt": ng < nw, "le": ng <= nw, "gt": ng > nw, "ge": ng >= nw}[op]
    if op == "in":
        return got in want or str(got) in [str(w) for w in want]
    if op == "not_in":
        return not (got in want or str(got) in [str(w) for w in want])
    if op == "contains":
        if isinstance(got, (list, str)):
            return want in got
        return False
    if op == "matches":
        return re.search(str(want), str(got)) is not None
    raise ValueError(op)


def _holds(cond: Dict[str, Any], scope: _Scope) -> bool:
    if "any" in cond:
        return any(_holds(c, scope) for c in cond["any"])
    if "all" in cond:
        return all(_holds(c, scope) for c in cond["all"])
    if "not" in cond:
        return not _holds(cond["not"], scope)
    got, _ = scope.resolve(cond["fact"])
    op = next(k for k in cond if k != "fact")
    if op == "exists":
        return (got is not None) == bool(cond[op])
    want = cond[op]
    if op.endswith("_fact"):
        want, _ = scope.resolve(want)
        op = op[: -len("_fact")]
    return _compare(op, got, want)


def _fmt(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, float):
        return f"{v:.2f}".rstrip("0").rstrip(".")
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def render(template: str, scope: _Scope) -> str:
    """Fill `{path}` placeholders with fact values (`?` when unknown). No code runs."""
    return _TEMPLATE_RE.sub(lambda m: _fmt(scope.resolve(m.group(1))[0]), template)


def _all_known(template: str, scope: _Scope) -> bool:
    return all(scope.resolve(m.group(1))[0] is not None for m in _TEMPLATE_RE.finditer(template))


def evaluate(ruleset: RuleSet, facts: Facts, probes: List[Dict[str, Any]]) -> List[Finding]:
    """Findings for every rule match, in rule order, one per (id, subject, message)."""
    root = dict(facts.data)
    root["probes"] = probes
    findings: List[Finding] = []
    from_catalog: set = set()
    seen = set()
    for rule in ruleset.rules:
        for match in rule.matches:
            for scope in _scopes(root, match.for_each):
                if not all(_holds(c, scope) for c in match.when):
                    continue
                subject = render(match.subject, scope) if match.subject else ""
                message = render(match.message, scope)
                key = (rule.id, subject, message)
                if key in seen:
                    continue
                seen.add(key)
                evidence = []
                for ev in match.evidence:
                    val, abs_path = scope.resolve(ev)
                    if val is None:
                        continue
                    item: Dict[str, Any] = {"fact": abs_path, "value": val}
                    src = facts.source_of(abs_path)
                    if src:
                        item["source"] = src
                    evidence.append(item)
                fixes = []
                for fx in match.fixes + rule.fixes:
                    if fx.when and not all(_holds(c, scope) for c in fx.when):
                        continue
                    # a fix that would print "?" (e.g. {it.sysfs} of a GPU seen only through
                    # nvidia-smi) is no fix for this finding
                    parts = [fx.text] + (list(map(str, fx.sysfs_write.values())) if fx.sysfs_write else [])
                    if not all(_all_known(t, scope) for t in parts):
                        continue
                    d: Dict[str, Any] = {"kind": fx.kind, "text": render(fx.text, scope)}
                    if fx.sysfs_write:
                        d["sysfs_write"] = {"path": render(fx.sysfs_write["path"], scope),
                                            "value": render(str(fx.sysfs_write["value"]), scope)}
                    fixes.append(d)
                for url in rule.docs:
                    if not any(f["text"] == url for f in fixes):
                        fixes.append({"kind": "doc", "text": url})
                severity = match.severity or rule.severity
                if "{" in severity:
                    severity = render(severity, scope)
                    if severity not in SEVERITIES:
                        severity = rule.severity
                findings.append(Finding(rule.id, severity, rule.title,
                                        message, subject, evidence, fixes))
                if match.file == "catalogs":
                    from_catalog.add(id(findings[-1]))
    return _vendor_match_wins(findings, from_catalog)


def _vendor_match_wins(findings: List[Finding], from_catalog: set) -> List[Finding]:
    """A catalog finding whose log line a rule's own match already reports (with the vendor's
    knowledge of the cause) is the same problem said twice: keep the rule's."""
    lines_by_rule: Dict[str, set] = {}
    for f in findings:
        if id(f) not in from_catalog:
            for ev in f.evidence:
                if isinstance(ev.get("value"), str):
                    lines_by_rule.setdefault(f.id, set()).add(ev["value"].strip())
    out = []
    for f in findings:
        if id(f) in from_catalog:
            line = next((ev["value"] for ev in f.evidence if ev["fact"].endswith(".line")), None)
            if isinstance(line, str) and _line_reported(line, lines_by_rule.get(f.id, ())):
                continue
        out.append(f)
    return out


def _line_reported(line: str, values: Iterable[str]) -> bool:
    line = line.strip()
    return any(v and (v in line or line in v) and len(v) > 20 for v in values)


def _scopes(root: Dict[str, Any], for_each: Optional[str]):
    if not for_each:
        yield _Scope(root)
        return
    if "*" in for_each.split("."):
        # `deep.*.*`: every value of a tree of tables, one `*` per level (runtime -> device)
        parts = for_each.split(".")
        n = parts.index("*")
        nodes = [(lookup(root, ".".join(parts[:n])), ".".join(parts[:n]))]
        for part in parts[n:]:
            nxt = []
            for val, p in nodes:
                if part != "*":
                    nxt.append((lookup(val, part), f"{p}.{part}"))
                elif isinstance(val, dict):
                    nxt += [(v, f"{p}.{k}") for k, v in val.items()]
                elif isinstance(val, list):
                    nxt += [(v, f"{p}[{i}]") for i, v in enumerate(val)]
            nodes = nxt
        for val, p in nodes:
            yield _Scope(root, val, p)
        return
    items = lookup(root, for_each)
    if isinstance(items, dict):
        for k, v in items.items():
            yield _Scope(root, v, f"{for_each}.{k}")
    elif isinstance(items, list):
        base = for_each
        for i, v in enumerate(items):
            yield _Scope(root, v, f"{base}[{i}]")


def filter_findings(findings: List[Finding], select: Iterable[str] = (),
                    ignore: Iterable[str] = ()) -> List[Finding]:
    sel, ign = set(select), set(ignore)
    return [f for f in findings if (not sel or f.id in sel) and f.id not in ign]


def known_ids(ruleset: RuleSet) -> List[str]:
    return [r.id for r in ruleset.rules]


__all__ = ["Finding", "Rule", "RuleSet", "load_rules", "load_rule_file", "evaluate",
           "filter_findings", "SEVERITY_RANK", "split_path"]
