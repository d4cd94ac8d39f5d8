"""Refusing regexes that backtrack catastrophically, at load time.

Python's `re` cannot be interrupted (a match holds the GIL, so a probe timeout cannot stop it),
so a data-file regex such as `^(a+)+$` would hang a check on one long log line. This checks
the parsed pattern (sre_parse) for the shape behind almost every such case: a repeated group
whose body can match the same text in more than one way because it holds an unbounded repeat
and everything else in it is optional — `(a+)+`, `(a*)*`, `(\\w+\\s?)*`, `(?:x+|y)+`.
A body with a required part next to the inner repeat (`(?:\\s+\\S+)*`, `(a+b)+`) is accepted.

`why_catastrophic(pattern) -> Optional[str]`: None when accepted, else a short reason.
"""

from __future__ import annotations

from typing import Any, List, Optional

try:  # Python 3.11+ keeps the parser private as re._parser
    import re._constants as _sre_const  # type: ignore
    import re._parser as _sre_parse  # type: ignore
except ImportError:  # pragma: no cover - 3.8..3.10
    import sre_constants as _sre_const  # type: ignore
    import sre_parse as _sre_parse  # type: ignore

_REPEATS = {_sre_const.MAX_REPEAT, _sre_const.MIN_REPEAT}
_POSSESSIVE = getattr(_sre_const, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_sre_const, "ATOMIC_GROUP", None)
_UNBOUNDED = _sre_const.MAXREPEAT


def _items(sub: Any) -> List[Any]:
    return list(sub.data if hasattr(sub, "data") else sub)


def _min_width(items: List[Any]) -> int:
    try:
        return _sre_parse.SubPattern(_sre_parse.State(), items).getwidth()[0]  # type: ignore
    except Exception:  # pragma: no cover - the parser's internals differ across versions
        lo = 0
        for op, av in items:
            if op in _REPEATS:
                lo += av[0] * _min_width(_items(av[2]))
            elif op is _sre_const.SUBPATTERN:
                lo += _min_width(_items(av[-1]))
            elif op not in (_sre_const.AT,):
                lo += 1
        return lo


def _has_unbounded(items: List[Any]) -> bool:
    for op, av in items:
        if op in _REPEATS and av[1] == _UNBOUNDED:
            return True
        for sub in _children(op, av):
            if _has_unbounded(_items(sub)):
                return True
    return False


def _children(op: Any, av: Any) -> List[Any]:
    if op in _REPEATS or (_POSSESSIVE is not None and op is _POSSESSIVE):
        return [av[2]]
    if op is _sre_const.SUBPATTERN:
        return [av[-1]]
    if op is _sre_const.BRANCH:
        return list(av[1])
    if _ATOMIC is not None and op is _ATOMIC:
        return []  # an atomic group never backtracks into itself
    if op in (_sre_const.ASSERT, _sre_const.ASSERT_NOT):
        return [av[1]]
    return []


def _flatten(items: List[Any]) -> List[Any]:
    """Items with plain groups opened (a group's body is part of its parent's sequence)."""
    out = []
    for op, av in items:
        if op is _sre_const.SUBPATTERN:
            out.extend(_flatten(_items(av[-1])))
        else:
            out.append((op, av))
    return out


def _ambiguous_body(items: List[Any]) -> bool:
    """The repeated body can split one text between two of its own iterations: it holds an
    unbounded repeat and nothing else in it is required, or it is an alternation one of
    whose branches is such a body."""
    flat = _flatten(items)
    if len(flat) == 1 and flat[0][0] is _sre_const.BRANCH:
        return any(_ambiguous_body(_items(b)) for b in flat[0][1][1])
    inner = [i for i, (op, av) in enumerate(flat) if op in _REPEATS and av[1] == _UNBOUNDED
             and _min_width(_items(av[2])) > 0]
    if not inner:
        return False
    rest = [it for i, it in enumerate(flat) if i not in inner[:1]]
    return _min_width(rest) == 0


def _walk(items: List[Any]) -> Optional[str]:
    for op, av in items:
        if op in _REPEATS and av[1] > 1 and _ambiguous_body(_items(av[2])):
            return "nested quantifier (a repeated group whose body is itself an unbounded repeat)"
        for sub in _children(op, av):
            why = _walk(_items(sub))
            if why:
                return why
    return None


def why_catastrophic(pattern: str, flags: int = 0) -> Optional[str]:
    """None when `pattern` is free of the nested-quantifier shape, else a one-line reason.
    A pattern that does not parse is left to re.compile to report. Remembered between runs
    (npu_doctor.regexmemo)."""
    from .regexmemo import remembered

    return remembered("catastrophic", pattern, flags, lambda: _why_catastrophic(pattern, flags))


def _why_catastrophic(pattern: str, flags: int) -> Optional[str]:
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except Exception:
        return None
    return _walk(_items(parsed))
