"""Loading and validating rules files (`rules/*.toml`, `--rules DIR`): a bad file is a
ConfigError naming file, rule and problem, and nothing is evaluated from it."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from .datafiles import read_toml
from .errors import ConfigError
from .lazyregex import compile_checked
from .matrices import matrix_descriptions, read_matrices
from .resources import data_files
from .rule_model import (
    _ID_RE,
    FIX_KEYS,
    FIX_KINDS,
    MATCH_KEYS,
    OPERATORS,
    RULE_KEYS,
    SEVERITIES,
    Fix,
    Match,
    Rule,
    RuleSet,
)


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
    if op == "matches":
        if not isinstance(cond[op], str):
            raise ConfigError(f"{where}: bad regex {cond[op]!r} (not a string)")
        compile_checked(cond[op], 0, where)
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
        if sw is not None and (not isinstance(sw, dict) or set(sw) != {"path", "value"}
                               or not all(isinstance(v, str) for v in sw.values())):
            raise ConfigError(f"{where}: sysfs_write must be {{path = \"...\", value = \"...\"}} (strings)")
        when = f.get("when", [])
        if not isinstance(when, list):
            raise ConfigError(f"{where}: fix.when must be a list of conditions (got {when!r})")
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
                            "message", "evidence", "docs", "matrices"}
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
    area = raw.get("area", "")
    if not isinstance(area, str):
        raise ConfigError(f"{where}: area must be a string (a report line such as \"Thermal\")")
    mats = raw.get("matrices", [])
    if not isinstance(mats, list) or not all(isinstance(x, str) and x for x in mats):
        raise ConfigError(f"{where}: matrices must be a list of matrix ids")
    rule = Rule(rid, sev, raw["title"].strip(), raw["explain"].strip(), docs, matches,
                _parse_fixes(raw.get("fix"), where), file=path, area=area, matrices=list(mats))
    rule.extend = bool(raw.get("extend"))
    return rule


def load_rule_file(path: str) -> Tuple[List[Rule], Dict[str, List[Dict[str, Any]]]]:
    """Rules and matrices of one file. Raises ConfigError (file, rule, what is wrong)."""
    data = read_toml(path)
    if "catalog" in data:  # a site catalog kept with the site's rules (npu_doctor.catalog)
        return [], {}
    unknown = set(data) - {"rule", "matrix"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r} (expected [[rule]] or [[matrix]])")
    for table in ("rule", "matrix"):
        if not isinstance(data.get(table, []), list):
            raise ConfigError(f"{path}: `{table}` must be an array of tables ([[{table}]])")
    rules = [_parse_rule(r, path, n) for n, r in enumerate(data.get("rule", []))]
    _MATRIX_DESCRIPTIONS.update(matrix_descriptions(data))
    matrices = read_matrices(path, data)
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
        base.matrices += [m for m in ext.matrices if m not in base.matrices]
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
