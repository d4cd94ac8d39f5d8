"""`verify`: the differences between a lock and the host now, as lock-drift findings."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigError
from ..rules import Finding

from .lockfile import LockfileError
from .spec import LockPath, LockSpec, PathSpec
from ..lazyregex import lazy


# -- comparing -------------------------------------------------------------------------------
@dataclass
class Drift:
    path: LockPath
    kind: str            # changed | removed | added
    old: Any
    new: Any
    cls: str
    severity: str
    #: other lock paths that changed the same way (one module version seen by two probes)
    also: List[LockPath] = field(default_factory=list)

    @property
    def display(self) -> str:
        return display_path(self.path)


_BARE_RE = lazy(r"^[A-Za-z0-9_-]+$")


def display_path(parts: Sequence[str]) -> str:
    """TOML dotted-key form: `accelerators."rknpu@0000:01:00.0".driver.version`."""
    return ".".join(p if _BARE_RE.match(p) else json.dumps(p, ensure_ascii=False) for p in parts)


def parse_ignore(pattern: str) -> List[str]:
    """Tokens of a lock path pattern (--skip-path, --accept): dotted keys, "quoted keys", `*` / `[*]` for any key."""
    toks: List[str] = []
    i, n = 0, len(pattern)
    cur = ""
    while i < n:
        c = pattern[i]
        if c == '"':
            j = pattern.find('"', i + 1)
            while j != -1 and pattern[j - 1] == "\\":
                j = pattern.find('"', j + 1)
            if j == -1:
                raise ConfigError(f"lock path {pattern}: unterminated quote")
            cur += json.loads(pattern[i:j + 1])
            i = j + 1
        elif c == ".":
            if cur:
                toks.append(cur)
            cur = ""
            i += 1
        elif c == "[":
            j = pattern.find("]", i)
            if j == -1:
                raise ConfigError(f"lock path {pattern}: unterminated [")
            if cur:
                toks.append(cur)
            cur = ""
            inner = pattern[i + 1:j].strip('"')
            toks.append("*" if inner in ("*", "") or inner.isdigit() else inner)
            i = j + 1
        else:
            cur += c
            i += 1
    if cur:
        toks.append(cur)
    if not toks:
        raise ConfigError("--skip-path needs a lock path such as sdks.cann.version")
    return toks


def ignored(path: LockPath, patterns: Sequence[List[str]]) -> bool:
    """A pattern matches a path it is a prefix of, each token a shell pattern on one key."""
    for toks in patterns:
        if len(toks) <= len(path) and all(fnmatch.fnmatchcase(p, t) for p, t in zip(path, toks)):
            return True
    return False


def _flatten(d: Dict[str, Any], prefix: LockPath = ()) -> Dict[LockPath, Any]:
    out: Dict[LockPath, Any] = {}
    for k, v in d.items():
        p = prefix + (str(k),)
        if isinstance(v, dict):
            out.update(_flatten(v, p))
        else:
            out[p] = v
    return out


def _lock_pattern_tokens(ps: PathSpec) -> List[str]:
    return ["*" if t == "[*]" or (t.startswith("[") and t[1:-1].isdigit()) else t
            for t in ps.tokens]


def classify(path: LockPath, spec: LockSpec) -> str:
    """The class of a lock path: python/files sections, then the first [[field]] it matches."""
    if path[:2] == ("python", "packages"):
        return spec.python_class
    if path and path[0] == "files":
        return "library"
    for fs in spec.fields:
        toks = _lock_pattern_tokens(fs)
        if len(toks) <= len(path) and all(fnmatch.fnmatchcase(p, t) if t == "*" else p == t
                                          for p, t in zip(path, toks)):
            return fs.cls
    return "os"


def diff(locked: Dict[str, Any], current: Dict[str, Any], spec: LockSpec,
         ignore: Sequence[str] = ()) -> List[Drift]:
    """Every difference between two manifests, graded by the spec, ignored paths left out."""
    pats = [parse_ignore(p) for p in ignore]
    old = _flatten({k: v for k, v in locked.items() if k != "lock"})
    new = _flatten({k: v for k, v in current.items() if k != "lock"})
    drifts: List[Drift] = []
    skip_prefixes: List[LockPath] = []
    # whole keyed elements (an accelerator, a file) appearing or disappearing: one finding each
    groups: List[Tuple[LockPath, str]] = [(tuple(c.path.split(".")), c.cls)
                                          for c in spec.collections.values()]
    groups.append((("files",), "files"))
    for base, cls in groups:
        n = len(base)
        old_keys = {p[n] for p in old if p[:n] == base and len(p) > n}
        new_keys = {p[n] for p in new if p[:n] == base and len(p) > n}
        for key in sorted(old_keys ^ new_keys):
            path = base + (key,)
            skip_prefixes.append(path)
            if ignored(path, pats):
                continue
            kind = "removed" if key in old_keys else "added"
            src = old if kind == "removed" else new
            val = {p[n + 1:]: v for p, v in src.items() if p[:n + 1] == path}
            grade = cls
            if cls == "files":
                kinds = [v for p, v in val.items() if p == ("kind",)]
                grade = "firmware" if kinds and kinds[0] == "firmware" else "library"
            summary = _element_summary(val)
            drifts.append(Drift(path, kind, summary if kind == "removed" else None,
                                summary if kind == "added" else None, grade,
                                spec.severity(grade, kind)))
    for path in sorted(set(old) | set(new)):
        if any(path[:len(s)] == s for s in skip_prefixes) or ignored(path, pats):
            continue
        if path[0] == "files" and path[-1] in ("size", "kind"):
            continue  # the sha256 decides; size follows it
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        kind = "changed" if (a is not None and b is not None) else ("removed" if b is None else "added")
        cls = classify(path, spec)
        if path[0] == "files":
            fkind = old.get(path[:-1] + ("kind",)) or new.get(path[:-1] + ("kind",))
            cls = "firmware" if fkind == "firmware" else "library"
        drifts.append(Drift(path, kind, a, b, cls, spec.severity(cls, kind)))
    order = {"error": 0, "warning": 1, "info": 2}
    drifts.sort(key=lambda d: (order[d.severity], len(d.path), d.path))
    # One change seen at several paths (drivers.rknpu.version and the accelerator's
    # driver.version) is one finding that names every path.
    merged: List[Drift] = []
    by_change: Dict[str, Drift] = {}
    for d in drifts:
        sig = json.dumps([d.kind, d.cls, d.old, d.new, d.path[-1]], default=str, sort_keys=True)
        if d.kind == "changed" and sig in by_change:
            by_change[sig].also.append(d.path)
            continue
        by_change.setdefault(sig, d)
        merged.append(d)
    merged.sort(key=lambda d: (order[d.severity], d.path))
    return merged


def _element_summary(val: Dict[LockPath, Any]) -> str:
    parts = []
    for p in sorted(val):
        if p == ("sha256",):
            parts.append(f"sha256 {str(val[p])[:12]}")
        elif p[-1] in ("name", "version", "vendor"):
            parts.append(f"{'.'.join(p)}={val[p]}")
    return ", ".join(parts) or "present"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def drift_message(d: Drift) -> str:
    if d.kind == "changed":
        also = "".join(f"; also {display_path(p)}" for p in d.also)
        return f"{d.display} changed from {_fmt(d.old)} to {_fmt(d.new)} ({d.cls}{also})"
    if d.kind == "removed":
        return f"{d.display} was {_fmt(d.old)} in the lock and is now gone or unknown ({d.cls})"
    return f"{d.display} is new: {_fmt(d.new)}, not in the lock ({d.cls})"


def drift_findings(drifts: Sequence[Drift], lock_path: str, title: str = "",
                   rule_fixes: Sequence[Dict[str, Any]] = ()) -> List[Finding]:
    """One `lock-drift` finding per difference, with the locked and current value as evidence."""
    out = []
    for d in drifts:
        ev = [{"fact": display_path(p), "value": d.new, "locked": d.old, "change": d.kind,
               "class": d.cls, "source": lock_path} for p in [d.path] + d.also]
        fixes = [{"kind": "now", "text": _fix_text(d, lock_path)}] + list(rule_fixes)
        out.append(Finding("lock-drift", d.severity, title or "The environment differs from the lockfile",
                           drift_message(d), d.display, ev, fixes))
    return out


def _fix_text(d: Drift, lock_path: str) -> str:
    accept = f"`npu-doctor verify {lock_path} --accept '{d.display}'`"
    if d.kind == "added":
        return (f"If {d.display} belongs to the validated stack, pin it: {accept}; otherwise "
                f"remove it, or let it float with `--skip-path '{d.display}'`.")
    back = f"restore {d.display} to {_fmt(d.old)}" if d.kind == "changed" else \
        f"bring {d.display} back ({_fmt(d.old)})"
    return (f"If the change is intended, record it: {accept} (or `npu-doctor lock --update -o "
            f"{lock_path}` for every change); otherwise {back}, or let it float with "
            f"`--skip-path '{d.display}'`.")


def _arch_of(manifest: Dict[str, Any]) -> Optional[str]:
    a = manifest.get("lock", {}).get("arch")
    return str(a) if a and str(a) != "unknown" else None   # "unknown": locks before 0.1.1


def check_arch(locked: Dict[str, Any], current: Dict[str, Any], lock_path: str,
               where: str = "this host") -> Optional[str]:
    """Compare the architectures of a lock and of the host now.

    Raises LockfileError (exit 2) when both are known and differ. Returns None when they
    were compared and match, else a one-line note saying why they could not be compared
    (verify prints it in its report; it is not a difference and does not change the exit
    status)."""
    a, b = _arch_of(locked), _arch_of(current)
    if a and b:
        if a != b:
            raise LockfileError(f"{lock_path}: lockfile is for architecture {a}, {where} is {b}; "
                                "a lock pins one kind of machine")
        return None
    if not a and not b:
        why = f"neither the lockfile nor {where} records one"
    elif not a:
        why = f"the lockfile records none ({where} is {b})"
    else:
        why = f"{where} does not tell it (no `uname -m`, /proc/sys/kernel/arch or ELF binary); " \
              f"the lockfile is for {a}"
    return f"architecture not compared: {why}"


def count_locked(manifest: Dict[str, Any]) -> int:
    return len(_flatten({k: v for k, v in manifest.items() if k != "lock"}))
