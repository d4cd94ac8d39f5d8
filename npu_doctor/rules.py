"""The rules engine: pitfall rules as data (`rules/*.toml`), evaluated safely.

A rule (docs/architecture.md, "Contract: rule ids"):

```toml
[[rule]]
id = "runtime-autosuspend"          # contract id, kebab-case
severity = "warning"                # error | warning | info
title = "Runtime PM suspends the accelerator between inferences"
area = "Power & clocks"              # the report line its findings go on (else from evidence)
# matrices = ["rknn-runtime-driver"] # version rules: the matrices behind it (`rules explain`)
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
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import versions
from .facts import Facts, lookup, split_path
from .rule_loader import load_rule_file, load_rules  # noqa: F401  (the public API)
from .rule_model import (  # noqa: F401
    _TEMPLATE_RE,
    FIX_KINDS,
    OPERATORS,
    SEVERITIES,
    SEVERITY_RANK,
    Finding,
    Fix,
    Match,
    Rule,
    RuleSet,
)


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
    # Facts of another type than the operator expects (an `in_fact` naming a string, a
    # `contains` on a number, a regex from a fact that does not compile) do not hold: a rule
    # is data and must never raise on what the machine reports.
    if op in ("in", "not_in"):
        if not isinstance(want, list):
            return False
        found = got in want or str(got) in [str(w) for w in want]
        return found if op == "in" else not found
    if op == "contains":
        if isinstance(got, str):
            return str(want) in got
        if isinstance(got, list):
            return want in got or str(want) in [str(g) for g in got]
        return False
    if op == "matches":
        try:
            return re.search(str(want), str(got)) is not None
        except (re.error, RecursionError, OverflowError):
            return False
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
                                        message, subject, evidence, fixes, area=rule.area))
                if match.file == "catalogs":
                    from_catalog.add(id(findings[-1]))
    return _vendor_match_wins(findings, from_catalog)


def _vendor_match_wins(findings: List[Finding], from_catalog: set) -> List[Finding]:
    """A catalog finding that a rule's own match already reports (with the vendor's knowledge
    of the cause) is the same problem said twice: keep the rule's. Same problem: the rule's
    evidence holds the catalog finding's line, or comes from the same log file."""
    lines_by_rule: Dict[str, set] = {}
    files_by_rule: Dict[str, set] = {}
    for f in findings:
        if id(f) not in from_catalog:
            for ev in f.evidence:
                if isinstance(ev.get("value"), str):
                    lines_by_rule.setdefault(f.id, set()).add(ev["value"].strip())
                if isinstance(ev.get("source"), str):
                    files_by_rule.setdefault(f.id, set()).add(_source_file(ev["source"]))
    out = []
    for f in findings:
        if id(f) in from_catalog:
            line_ev = next((ev for ev in f.evidence if ev["fact"].endswith(".line")), None)
            if line_ev is not None:
                if isinstance(line_ev["value"], str) and \
                        _line_reported(line_ev["value"], lines_by_rule.get(f.id, ())):
                    continue
                src = line_ev.get("source")
                if isinstance(src, str) and _source_file(src).startswith("logs/") and \
                        _source_file(src) in files_by_rule.get(f.id, ()):
                    continue
        out.append(f)
    return out


def _source_file(source: str) -> str:
    """`logs/run.log:12` (or `:3, 7-8`) -> `logs/run.log`."""
    m = re.match(r"^(.+?)(?::[\d, \-]+)?$", source)
    return m.group(1) if m else source


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
