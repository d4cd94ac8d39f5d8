"""Rules compiled once: each condition, fact path and template of a Match becomes a closure.

`npu_doctor.rules.evaluate` used to interpret every condition dict afresh for every rule and
every device (~9 us per rule per device). Here a Match is compiled on first use (and cached
on it): fact paths are split once, comparisons are specialised on their constant operand
(a version normalised once, a regex compiled once, an `in` list turned into a set), the
conditions that do not read `it` are separated so they run once per rule instead of once per
device, and a top-level `it.vendor` eq/in condition lets evaluation visit only that vendor's
accelerators. Semantics are those documented in npu_doctor.rules (unknown makes a comparison
false); tests/test_rules_engine.py holds them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from . import versions
from .facts import get_parts, split_path
from .lazyregex import lazy
from .rule_model import _TEMPLATE_RE, Fix, Match

#: (root, it) -> value
Getter = Callable[[Any, Any], Any]
#: (root, it) -> bool
Cond = Callable[[Any, Any], bool]

_normalize = lru_cache(maxsize=4096)(versions.normalize)


# -- fact paths --------------------------------------------------------------------------
def _walker(parts: List[Any]) -> Callable[[Any], Any]:
    if len(parts) == 1 and isinstance(parts[0], str):
        key = parts[0]
        return lambda node: node.get(key) if isinstance(node, dict) else None

    return lambda node: get_parts(node, parts)


@lru_cache(maxsize=None)
def compile_path(path: str) -> Tuple[Getter, bool]:
    """(getter, reads `it`) for `it`, `it.x.y` or an absolute fact path."""
    if path == "it":
        return (lambda root, it: it), True
    if path.startswith("it."):
        walk = _walker(split_path(path[3:]))
        return (lambda root, it: walk(it)), True
    walk = _walker(split_path(path))
    return (lambda root, it: walk(root)), False


def abs_path(path: str, it_path: str) -> str:
    """The absolute fact path of `path` in a scope bound to the element at `it_path`."""
    if path == "it":
        return it_path
    if path.startswith("it."):
        return f"{it_path}.{path[3:]}"
    return path


# -- comparisons -------------------------------------------------------------------------
def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


_VERSION_OPS = {"version_lt": lambda c: c < 0, "version_le": lambda c: c <= 0,
                "version_gt": lambda c: c > 0, "version_ge": lambda c: c >= 0,
                "version_eq": lambda c: c == 0, "version_ne": lambda c: c != 0}
_NUM_OPS = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
            "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def compare(op: str, got: Any, want: Any) -> bool:
    """The generic comparison (used for `*_fact` operators, whose operand is a fact)."""
    if got is None or want is None:
        return False
    return _specialise(op, want)(got)


def _specialise(op: str, want: Any) -> Callable[[Any], bool]:
    """A test of `got` (never None) against the constant `want` (never None)."""
    if op == "version_prefix":
        sw = str(want)
        return lambda got: versions.prefix_match(str(got), sw)
    if op in _VERSION_OPS:
        vw = _normalize(str(want))
        test = _VERSION_OPS[op]
        if vw is None:
            return lambda got: False

        def version_test(got: Any) -> bool:
            vg = _normalize(str(got))
            if vg is None:
                return False
            return test((vg > vw) - (vg < vw))
        return version_test
    if op in ("eq", "ne"):
        nw, sw = _num(want), str(want)
        neg = op == "ne"

        def eq_test(got: Any) -> bool:
            if nw is not None:
                ng = _num(got)
                if ng is not None:
                    return (ng == nw) != neg
            return (got == want or str(got) == sw) != neg
        return eq_test
    if op in _NUM_OPS:
        nw2 = _num(want)
        cmp = _NUM_OPS[op]
        if nw2 is None:
            return lambda got: False

        def num_test(got: Any) -> bool:
            ng = _num(got)
            return ng is not None and cmp(ng, nw2)
        return num_test
    # Facts of another type than the operator expects (an `in_fact` naming a string, a
    # `contains` on a number, a regex from a fact that does not compile) do not hold: a rule
    # is data and must never raise on what the machine reports.
    if op in ("in", "not_in"):
        if not isinstance(want, list):
            return lambda got: False
        strs = frozenset(str(w) for w in want)
        neg = op == "not_in"
        return lambda got: (str(got) in strs or got in want) != neg
    if op == "contains":
        sw = str(want)

        def contains_test(got: Any) -> bool:
            if isinstance(got, str):
                return sw in got
            if isinstance(got, list):
                return want in got or sw in [str(g) for g in got]
            return False
        return contains_test
    if op == "matches":
        # compiled when first tested (the loader already checked that it compiles)
        rx = lazy(str(want))

        def matches_test(got: Any) -> bool:
            try:
                return rx.search(str(got)) is not None
            except (re.error, RecursionError, OverflowError):
                return False
        return matches_test
    raise ValueError(op)


def compile_condition(cond: Dict[str, Any]) -> Tuple[Cond, bool]:
    """(test(root, it) -> bool, reads `it`) for one validated condition table. Equal tables
    (the same condition in many rules) share one closure."""
    key = repr(cond)
    got = _COND_CACHE.get(key)
    if got is None:
        got = _COND_CACHE[key] = _compile_condition(cond)
    return got


_COND_CACHE: Dict[str, Tuple[Cond, bool]] = {}


def _compile_condition(cond: Dict[str, Any]) -> Tuple[Cond, bool]:
    for key in ("any", "all"):
        if key in cond:
            subs = [compile_condition(c) for c in cond[key]]
            fns = [f for f, _ in subs]
            uses = any(u for _, u in subs)
            if key == "any":
                return (lambda root, it: any(f(root, it) for f in fns)), uses
            return (lambda root, it: all(f(root, it) for f in fns)), uses
    if "not" in cond:
        inner, uses = compile_condition(cond["not"])
        return (lambda root, it: not inner(root, it)), uses
    get, uses = compile_path(cond["fact"])
    op = next(k for k in cond if k != "fact")
    want = cond[op]
    if op == "exists":
        flag = bool(want)
        return (lambda root, it: (get(root, it) is not None) == flag), uses
    if op.endswith("_fact"):
        other, uses2 = compile_path(want)
        base = op[: -len("_fact")]

        def fact_test(root: Any, it: Any) -> bool:
            return compare(base, get(root, it), other(root, it))
        return fact_test, uses or uses2
    if want is None:
        return (lambda root, it: False), uses
    test = _specialise(op, want)

    def const_test(root: Any, it: Any) -> bool:
        got = get(root, it)
        return got is not None and test(got)
    return const_test, uses


# -- templates ---------------------------------------------------------------------------
def fmt(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, float):
        return f"{v:.2f}".rstrip("0").rstrip(".")
    if isinstance(v, list):
        return ", ".join(fmt(x) for x in v)
    return str(v)


def template(text: str) -> "Template":
    """The compiled template for a text (shared by every match that uses the same text)."""
    t = _TEMPLATES.get(text)
    if t is None:
        t = _TEMPLATES[text] = Template(text)
    return t


class Template:
    """A `{path}` template split once into literal text and fact getters."""

    __slots__ = ("text", "parts", "getters")

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts: List[Any] = []   # str literals and getters, in order
        self.getters: List[Getter] = []
        pos = 0
        for m in _TEMPLATE_RE.finditer(text):
            if m.start() > pos:
                self.parts.append(text[pos:m.start()])
            g = compile_path(m.group(1))[0]
            self.parts.append(g)
            self.getters.append(g)
            pos = m.end()
        if pos < len(text):
            self.parts.append(text[pos:])

    def render(self, root: Any, it: Any) -> str:
        """The text with each `{path}` filled (`?` when unknown). No code runs."""
        return "".join(p if isinstance(p, str) else fmt(p(root, it)) for p in self.parts)

    def all_known(self, root: Any, it: Any) -> bool:
        return all(g(root, it) is not None for g in self.getters)


_TEMPLATES: Dict[str, Template] = {}


# -- matches -----------------------------------------------------------------------------
class CompiledFix:
    """One fix: its text and sysfs_write templates (sw_path/sw_value both set or both None)."""

    __slots__ = ("kind", "text", "sw_path", "sw_value", "when")

    def __init__(self, fx: Fix) -> None:
        self.kind = fx.kind
        self.text = template(fx.text)
        sw = fx.sysfs_write
        self.sw_path: Optional[Template] = template(str(sw["path"])) if sw else None
        self.sw_value: Template = template(str(sw["value"])) if sw else self.text
        self.when = [compile_condition(c)[0] for c in fx.when]


class CompiledMatch:
    """One Match ready to run: conditions split into per-rule (`once`) and per-element.
    What a finding is built from (subject, message, evidence, fixes, severity) is compiled
    when the match first fires: most rules never do in a run."""

    __slots__ = ("once", "each", "vendors", "for_each", "_match", "_out")

    def __init__(self, match: Match) -> None:
        self.for_each = match.for_each
        self._match = match
        self._out: Optional[Tuple[Any, ...]] = None
        self.once: List[Cond] = []
        self.each: List[Cond] = []
        vendors: Optional[FrozenSet[str]] = None
        for c in match.when:
            fn, uses_it = compile_condition(c)
            (self.each if uses_it and match.for_each else self.once).append(fn)
            if match.for_each == "accelerators" and c.get("fact") == "it.vendor" and len(c) == 2:
                v = _vendor_values(c)
                if v is not None:
                    vendors = v if vendors is None else vendors & v
        self.vendors = vendors

    def _outputs(self) -> Tuple[Any, ...]:
        if self._out is None:
            match = self._match
            sev = match.severity
            self._out = (template(match.subject) if match.subject else None,
                         template(match.message),
                         [(e, compile_path(e)[0]) for e in match.evidence],
                         [CompiledFix(f) for f in match.fixes],
                         template(sev) if sev and "{" in sev else sev)
        return self._out

    @property
    def subject(self) -> Optional[Template]:
        return self._outputs()[0]  # type: ignore[no-any-return]

    @property
    def message(self) -> Template:
        return self._outputs()[1]  # type: ignore[no-any-return]

    @property
    def evidence(self) -> List[Tuple[str, Getter]]:
        return self._outputs()[2]  # type: ignore[no-any-return]

    @property
    def fixes(self) -> List[CompiledFix]:
        return self._outputs()[3]  # type: ignore[no-any-return]

    @property
    def severity(self) -> Any:
        return self._outputs()[4]


def _vendor_values(cond: Dict[str, Any]) -> Optional[FrozenSet[str]]:
    """The vendors a top-level `it.vendor` eq/in condition admits (string operands only:
    then equality is string equality, so an index by vendor string is exact)."""
    if "eq" in cond and isinstance(cond["eq"], str):
        return frozenset([cond["eq"]])
    if "in" in cond and isinstance(cond["in"], list) and all(isinstance(w, str) for w in cond["in"]):
        return frozenset(cond["in"])
    return None


def compiled(match: Match) -> CompiledMatch:
    """The match's compiled form, built on first use and kept on the Match."""
    cm = match.__dict__.get("_compiled")
    if cm is None or cm[0] is not match.when or cm[1] is not match.fixes:
        cm = (match.when, match.fixes, CompiledMatch(match))
        match.__dict__["_compiled"] = cm
    return cm[2]
