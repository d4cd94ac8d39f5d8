"""The rule model: rules, their matches and fixes, findings, the rule set (see npu_doctor.rules)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .lazyregex import lazy

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}
FIX_KINDS = ("now", "persist", "doc")
RULE_KEYS = {"id", "severity", "title", "explain", "docs", "match", "fix", "for_each", "when",
             "subject", "message", "evidence", "tags", "extend", "area", "matrices"}
MATCH_KEYS = {"for_each", "when", "subject", "message", "evidence", "severity", "fix"}
FIX_KEYS = {"kind", "text", "sysfs_write", "when", "url"}
_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "contains", "matches",
        "version_lt", "version_le", "version_gt", "version_ge", "version_eq", "version_ne"}
OPERATORS = _CMP | {f"{o}_fact" for o in _CMP} | {"exists", "version_prefix", "version_prefix_fact"}
_ID_RE = lazy(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TEMPLATE_RE = lazy(r"\{([A-Za-z_][A-Za-z0-9_.\[\]\-]*)\}")


@dataclass
class Fix:
    """One fix of a rule: `kind` (command, link, text, sysfs), its text, an optional sysfs
    write it stands for, and the conditions under which it applies."""

    kind: str
    text: str
    sysfs_write: Optional[Dict[str, str]] = None
    when: List[Any] = field(default_factory=list)


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Match:
    """One detection path of a rule: conditions (per item of `for_each`, or once), the
    message, subject and evidence templates, an optional severity of its own, its fixes."""

    for_each: Optional[str]
    when: List[Any]
    subject: str
    message: str
    evidence: List[str]
    severity: Optional[str]
    fixes: List[Fix]
    file: str = ""


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Rule:
    """A rule of rules/*.toml: stable id, severity, title, explanation, docs links, its
    detection paths (`matches`) and the fixes every finding of it carries."""

    id: str
    severity: str
    title: str
    explain: str
    docs: List[str]
    matches: List[Match]
    fixes: List[Fix]
    file: str = ""
    extend: bool = False
    #: report line the rule's findings belong to (report.AREAS names); "" = from the evidence
    area: str = ""
    #: ids of the version matrices the rule's verdicts come from (`rules explain` lists them)
    matrices: List[str] = field(default_factory=list)


@dataclass
class Finding:
    """One finding: the rule that raised it and the subject, message, evidence and fixes of
    this instance (`to_json`: the report's shape)."""

    id: str
    severity: str
    title: str
    message: str
    subject: str
    evidence: List[Dict[str, Any]]
    fixes: List[Dict[str, Any]]
    #: the rule's `area` (not part of the JSON report; the text report groups by it)
    area: str = ""

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title,
                "message": self.message, "subject": self.subject,
                "evidence": self.evidence, "fixes": self.fixes}


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class RuleSet:
    """The loaded rules, and the version matrices their conditions use."""

    rules: List[Rule]
    matrices: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)
    #: matrix id -> (file it is defined in, its description)
    matrix_info: Dict[str, Tuple[str, str]] = field(default_factory=dict)

    def matrices_for(self, rule: "Rule") -> List[str]:
        """Ids of the version matrices behind a rule (its `matrices` key) that are loaded."""
        return [mid for mid in rule.matrices if mid in self.matrix_info]

    def get(self, rule_id: str) -> Optional[Rule]:
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None
