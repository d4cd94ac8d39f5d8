"""The lockfile as a reviewable manifest: `lock --update` (rewrite only the pins that
changed, show the diff), `verify --accept PATH` (record an intended change) and the digest
advisory (a hand edit is an `info` finding, never an error by itself).

A change is a (lock path, old, new) triple; `None` as old is a new pin, as new a pin that is
gone. The text diff is one line per pin, `-`/`+` like a unified diff:

    - drivers.rknpu.version = "0.9.6"
    + drivers.rknpu.version = "0.9.8"
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..rules import Finding
from .drift import _flatten, display_path, ignored, parse_ignore
from .lockfile import with_digest
from .spec import LockPath

Change = Tuple[LockPath, Any, Any]


def _body(d: Dict[str, Any]) -> Dict[LockPath, Any]:
    return _flatten({k: v for k, v in d.items() if k != "lock"})


def _nest(flat: Dict[LockPath, Any]) -> Dict[str, Any]:
    root: Dict[str, Any] = {}
    for parts in sorted(flat):
        node = root
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = flat[parts]
    return root


def changes(old: Dict[str, Any], new: Dict[str, Any],
            only: Optional[Sequence[str]] = None) -> List[Change]:
    """Pins that differ between two lockfile dicts (sorted by path); with `only` (lock path
    patterns, as --skip-path takes them), just those under one of the patterns, plus the
    same change (same key, same old and new value) at other paths."""
    a, b = _body(old), _body(new)
    pats = [parse_ignore(p) for p in only] if only is not None else None
    every = [(p, a.get(p), b.get(p)) for p in sorted(set(a) | set(b)) if a.get(p) != b.get(p)]
    if pats is None:
        return every
    out = [c for c in every if ignored(c[0], pats)]
    # one change seen at several paths (drivers.rknpu.version and the accelerator's
    # driver.version: verify reports them as one finding) is accepted at all of them
    sigs = {(c[0][-1], json.dumps(c[1:], default=str)) for c in out if None not in c[1:]}
    out += [c for c in every if c not in out and None not in c[1:]
            and (c[0][-1], json.dumps(c[1:], default=str)) in sigs]
    return sorted(out, key=lambda c: c[0])


def apply_changes(old: Dict[str, Any], chs: Sequence[Change],
                  header: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """`old` with each change applied (pins added, replaced or dropped), the rest untouched
    (hand edits elsewhere stay), [lock] header updated from `header` and the digest renewed."""
    flat = _body(old)
    for p, _a, b in chs:
        if b is None:
            flat.pop(p, None)
        else:
            # a table that becomes a value (or the reverse) replaces what was under it
            for q in [q for q in flat if q[:len(p)] == p and q != p]:
                flat.pop(q)
            flat[p] = b
    out: Dict[str, Any] = {"lock": dict(old.get("lock", {}))}
    if header:
        out["lock"].update({k: v for k, v in header.items() if k != "digest"})
    out.update(_nest(flat))
    return with_digest(out)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def diff_text(chs: Sequence[Change]) -> str:
    """The changes as `- path = old` / `+ path = new` lines (empty string: no change)."""
    lines = []
    for p, a, b in chs:
        if a is not None:
            lines.append(f"- {display_path(p)} = {_toml_value(a)}")
        if b is not None:
            lines.append(f"+ {display_path(p)} = {_toml_value(b)}")
    return "".join(line + "\n" for line in lines)


def digest_finding(state: str, lock_path: str) -> Optional[Finding]:
    """The advisory `lock-drift` info finding for a lockfile whose digest is not npu-doctor's
    own (`edited`) or absent (`missing`); None when it matches."""
    if state == "ok":
        return None
    if state == "edited":
        msg = (f"{lock_path} was edited since npu-doctor wrote it (its digest no longer matches); "
               "its pins are compared as they are now")
    else:
        msg = f"{lock_path} has no digest: it is compared as written"
    fix = ("Review the change (`git diff`); when it is intended, `npu-doctor lock --update -o "
           f"{lock_path}` renews the digest and pins the host's values, or `npu-doctor verify "
           f"{lock_path} --accept PATH` records one pin.")
    return Finding("lock-drift", "info", "The lockfile was edited since it was written", msg,
                   "lock.digest", [{"fact": "lock.digest", "value": state, "source": lock_path}],
                   [{"kind": "now", "text": fix}])
