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
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple

from .facts import Facts, lookup, split_path
from .rule_compile import CompiledFix, CompiledMatch, abs_path, compiled
from .rule_compile import compare as _compare  # noqa: F401  (the operators, for tests)
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
# Matches are compiled once into closures (npu_doctor.rule_compile); this loop only walks
# the elements a match can apply to and builds strings for the elements that match.
def evaluate(ruleset: RuleSet, facts: Facts, probes: List[Dict[str, Any]]) -> List[Finding]:
    """Findings for every rule match, in rule order, one per (id, subject, message)."""
    root = dict(facts.data)
    root["probes"] = probes
    findings: List[Finding] = []
    from_catalog: set = set()
    seen: Set[Tuple[str, str, str]] = set()
    by_vendor: Optional[Dict[str, List[int]]] = None
    defaults = {r.id: r.severity for r in ruleset.rules}
    for rule in ruleset.rules:
        for match in rule.matches:
            cm = compiled(match)
            if not all(c(root, None) for c in cm.once):
                continue
            if cm.vendors is not None:
                if by_vendor is None:
                    by_vendor = _vendor_index(root)
                elements = _accelerators_of(root, by_vendor, cm.vendors)
            else:
                elements = _elements(root, cm.for_each)
            each = cm.each
            for it, it_path in elements:
                if each and not all(c(root, it) for c in each):
                    continue
                finding = _finding(rule, cm, root, it, it_path(), facts, seen, defaults)
                if finding is None:
                    continue
                findings.append(finding)
                if match.file == "catalogs":
                    from_catalog.add(id(finding))
    return _vendor_match_wins(findings, from_catalog)


def _finding(rule: Rule, cm: CompiledMatch, root: Dict[str, Any], it: Any, it_path: str,
             facts: Facts, seen: set, defaults: Dict[str, str]) -> Optional[Finding]:
    subject = cm.subject.render(root, it) if cm.subject else ""
    message = cm.message.render(root, it)
    key = (rule.id, subject, message)
    if key in seen:
        return None
    seen.add(key)
    evidence = []
    for path, get in cm.evidence:
        val = get(root, it)
        if val is None:
            continue
        ap = abs_path(path, it_path)
        item: Dict[str, Any] = {"fact": ap, "value": val}
        src = facts.source_of(ap)
        if src:
            item["source"] = src
        evidence.append(item)
    fixes = []
    for fx in cm.fixes + compiled_rule_fixes(rule):
        if fx.when and not all(c(root, it) for c in fx.when):
            continue
        # a fix that would print "?" (e.g. {it.sysfs} of a GPU seen only through
        # nvidia-smi) is no fix for this finding
        sw_path = fx.sw_path
        if not fx.text.all_known(root, it) or (sw_path is not None and not (
                sw_path.all_known(root, it) and fx.sw_value.all_known(root, it))):
            continue
        d: Dict[str, Any] = {"kind": fx.kind, "text": fx.text.render(root, it)}
        if sw_path is not None:
            d["sysfs_write"] = {"path": sw_path.render(root, it),
                                "value": fx.sw_value.render(root, it)}
        fixes.append(d)
    for url in rule.docs:
        if not any(f["text"] == url for f in fixes):
            fixes.append({"kind": "doc", "text": url})
    severity = cm.severity or rule.severity
    if not isinstance(severity, str):
        severity = severity.render(root, it)
        if severity not in SEVERITIES:
            severity = rule.severity
    if isinstance(it, dict) and it.get("consequence_rules"):
        severity = _with_consequences(severity, it, defaults)
    return Finding(rule.id, severity, rule.title, message, subject, evidence, fixes, area=rule.area)


def _with_consequences(severity: str, ev: Dict[str, Any], defaults: Dict[str, str]) -> str:
    """The most severe of a catalog finding's own severity and those of the lines made its
    consequences (catalog.events.apply_consequences): their explicit severity, else their
    rule's."""
    cands = [severity] + [defaults.get(r, severity) for r in ev.get("consequence_rules", [])
                          if isinstance(r, str)]
    cands += [s for s in ev.get("consequence_severities", []) if s in SEVERITIES]
    return min(cands, key=lambda s: SEVERITIES.index(s) if s in SEVERITIES else len(SEVERITIES))


def compiled_rule_fixes(rule: Rule) -> List[CompiledFix]:
    """The rule-level fixes, compiled once and kept on the rule."""
    got = rule.__dict__.get("_compiled_fixes")
    if got is None or got[0] is not rule.fixes:
        got = (rule.fixes, [CompiledFix(f) for f in rule.fixes])
        rule.__dict__["_compiled_fixes"] = got
    return got[1]


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


def _elements(root: Dict[str, Any], for_each: Optional[str]):
    """(element, its absolute path as a thunk) for each element a match walks; the path
    string is built only for an element that matches."""
    if not for_each:
        yield None, lambda: ""
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
            yield val, (lambda p=p: p)
        return
    items = lookup(root, for_each)
    if isinstance(items, dict):
        for k, v in items.items():
            yield v, (lambda k=k: f"{for_each}.{k}")
    elif isinstance(items, list):
        for i, v in enumerate(items):
            yield v, (lambda i=i: f"{for_each}[{i}]")


class _Scope(NamedTuple):
    """An element a match walks: `it` and its absolute fact path."""

    it: Any
    it_path: str


def _scopes(root: Dict[str, Any], for_each: Optional[str]) -> Iterator[_Scope]:
    """The elements a match with this `for_each` walks, in order (`_elements`, paths built)."""
    for it, path in _elements(root, for_each):
        yield _Scope(it, path())


def _vendor_index(root: Dict[str, Any]) -> Dict[str, List[int]]:
    """accelerators[] indices by vendor string, in list order."""
    out: Dict[str, List[int]] = {}
    accels = root.get("accelerators")
    if isinstance(accels, list):
        for i, a in enumerate(accels):
            v = a.get("vendor") if isinstance(a, dict) else None
            if v is not None:
                out.setdefault(str(v), []).append(i)
    return out


def _accelerators_of(root: Dict[str, Any], by_vendor: Dict[str, List[int]], vendors):
    accels = root.get("accelerators") or []
    idx = [i for v in vendors for i in by_vendor.get(v, ())]
    if len(vendors) > 1:
        idx.sort()
    for i in idx:
        yield accels[i], (lambda i=i: f"accelerators[{i}]")


def filter_findings(findings: List[Finding], select: Iterable[str] = (),
                    ignore: Iterable[str] = ()) -> List[Finding]:
    sel, ign = set(select), set(ignore)
    return [f for f in findings if (not sel or f.id in sel) and f.id not in ign]


def known_ids(ruleset: RuleSet) -> List[str]:
    return [r.id for r in ruleset.rules]


__all__ = ["Finding", "Rule", "RuleSet", "load_rules", "load_rule_file", "evaluate",
           "filter_findings", "SEVERITY_RANK", "split_path"]
