"""The lockspec: which fact paths a lock pins, how list elements are keyed, which files are
hashed, and the severity of each class of difference (data: npu_doctor/lockspec.toml)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import ConfigError
from ..rules import SEVERITIES
from ..lazyregex import lazy

SPEC_SCHEMA = "npu-doctor/lockspec/v1"
DRIFT_KINDS = ("changed", "removed", "added")

LockPath = Tuple[str, ...]


# -- the spec --------------------------------------------------------------------------------
@dataclass
class Collection:
    path: str
    key: List[str]
    prefix: Optional[str]
    cls: str


@dataclass
class PathSpec:
    facts: str
    tokens: List[str]
    cls: str
    kind: str = ""


@dataclass
class LockSpec:
    classes: Dict[str, Dict[str, str]]
    collections: Dict[str, Collection]
    fields: List[PathSpec]
    hashes: List[PathSpec]
    python_class: str
    python_packages: List[str]
    file: str = ""
    #: kernel modules pinned beyond the accelerator-relevant ones (shell patterns)
    modules_also: List[str] = field(default_factory=list)

    def severity(self, cls: str, kind: str) -> str:
        return self.classes.get(cls, {}).get(kind, "warning")


def default_spec_path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lockspec.toml")


_TOKEN_RE = lazy(r"\[\*\]|\[\d+\]|[^.\[\]]+")


def _pattern_tokens(pattern: str) -> List[str]:
    return _TOKEN_RE.findall(pattern)


def load_spec(path: Optional[str] = None) -> LockSpec:
    """Read a lockspec (default: the shipped one). Raises ConfigError naming file and entry."""
    path = path or default_spec_path()
    from ..safeio import CAP_DATA_FILE, loads_toml, read_regular

    try:
        data = loads_toml(read_regular(path, CAP_DATA_FILE).decode("utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    if data.get("schema") != SPEC_SCHEMA:
        raise ConfigError(f"{path}: schema must be {SPEC_SCHEMA!r}")
    classes: Dict[str, Dict[str, str]] = {}
    for name, sev in data.get("class", {}).items():
        if not isinstance(sev, dict) or set(sev) - set(DRIFT_KINDS):
            raise ConfigError(f"{path}: class {name}: keys must be {', '.join(DRIFT_KINDS)}")
        for k, v in sev.items():
            if v not in SEVERITIES:
                raise ConfigError(f"{path}: class {name}: {k} must be error, warning or info")
        classes[name] = {k: sev.get(k, "warning") for k in DRIFT_KINDS}

    def cls_of(entry: Dict[str, Any], where: str) -> str:
        c = entry.get("class")
        if c not in classes:
            raise ConfigError(f"{path}: {where}: unknown class {c!r}")
        return c

    collections = {}
    for n, c in enumerate(data.get("collection", [])):
        where = f"collection #{n + 1}"
        if not isinstance(c.get("path"), str) or not isinstance(c.get("key"), list) or not c["key"]:
            raise ConfigError(f"{path}: {where}: needs path and a non-empty key list")
        collections[c["path"]] = Collection(c["path"], [str(k) for k in c["key"]],
                                            c.get("prefix"), cls_of(c, where))
    fields = []
    for n, f in enumerate(data.get("field", [])):
        where = f"field #{n + 1}"
        if not isinstance(f.get("facts"), str) or not f["facts"]:
            raise ConfigError(f"{path}: {where}: needs facts = \"path.pattern\"")
        fields.append(PathSpec(f["facts"], _pattern_tokens(f["facts"]), cls_of(f, where)))
    hashes = []
    for n, h in enumerate(data.get("hash", [])):
        where = f"hash #{n + 1}"
        if not isinstance(h.get("facts"), str) or not h["facts"]:
            raise ConfigError(f"{path}: {where}: needs facts = \"path.pattern\"")
        hashes.append(PathSpec(h["facts"], _pattern_tokens(h["facts"]), cls_of(h, where),
                               str(h.get("kind", "file"))))
    py = data.get("python", {})
    pkgs = py.get("packages", [])
    if not isinstance(pkgs, list) or not all(isinstance(p, str) for p in pkgs):
        raise ConfigError(f"{path}: python.packages must be a list of names")
    py_cls = cls_of(py, "python") if py else "package"
    also = data.get("modules", {}).get("also", []) if isinstance(data.get("modules"), dict) else None
    if not isinstance(also, list) or not all(isinstance(p, str) for p in also):
        raise ConfigError(f"{path}: modules.also must be a list of module names or patterns")
    return LockSpec(classes, collections, fields, hashes, py_cls,
                    [normalize_dist_name(p) for p in pkgs], path, also)


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalised distribution name (`Torch_NPU` -> `torch-npu`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# -- walking the facts tree ------------------------------------------------------------------
def element_key(coll: Optional[Collection], elem: Any, index: int) -> str:
    """Stable key of one list element: `vendor@0000:5a:00.0`, `#3` when nothing identifies it."""
    if coll is not None and isinstance(elem, dict):
        for k in coll.key:
            v = elem.get(k)
            if v is not None and v != "":
                key = str(v) if k != "index" else f"#{v}"
                if coll.prefix and elem.get(coll.prefix) is not None:
                    key = f"{elem[coll.prefix]}@{key}"
                return key
        if coll.prefix and elem.get(coll.prefix) is not None:
            return f"{elem[coll.prefix]}#{index}"
    return f"#{index}"


def _keyed(items: List[Any], coll: Optional[Collection]) -> List[Tuple[str, int, Any]]:
    """(key, index, element) with duplicate keys made unique by a `~N` suffix."""
    seen: Dict[str, int] = {}
    out = []
    for i, el in enumerate(items):
        k = element_key(coll, el, i)
        if k in seen:
            seen[k] += 1
            k = f"{k}~{seen[k]}"
        else:
            seen[k] = 1
        out.append((k, i, el))
    return out


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or (
        isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v))


def _leaves_under(node: Any, lock: LockPath, fact: str) -> Iterator[Tuple[LockPath, str, Any]]:
    if isinstance(node, dict):
        for k in sorted(node):
            yield from _leaves_under(node[k], lock + (str(k),), f"{fact}.{k}")
    elif _scalar(node):
        yield lock, fact, node


def expand(tree: Dict[str, Any], tokens: List[str], spec: LockSpec,
           ) -> Iterator[Tuple[LockPath, str, Any]]:
    """Every (lock path, fact path, value) a pattern reaches in a facts tree."""

    def walk(node: Any, i: int, lock: LockPath, fact: str, names: str):
        if node is None:
            return
        if i == len(tokens):
            yield from _leaves_under(node, lock, fact)
            return
        tok = tokens[i]
        if tok == "[*]" or (tok.startswith("[") and tok[1:-1].isdigit()):
            if not isinstance(node, list):
                return
            coll = spec.collections.get(names)
            for key, idx, el in _keyed(node, coll):
                if tok != "[*]" and idx != int(tok[1:-1]):
                    continue
                yield from walk(el, i + 1, lock + (key,), f"{fact}[{idx}]", names)
        elif tok == "*":
            if isinstance(node, dict):
                for k in sorted(node):
                    yield from walk(node[k], i + 1, lock + (str(k),),
                                    f"{fact}.{k}" if fact else str(k), names)
        elif isinstance(node, dict) and tok in node:
            yield from walk(node[tok], i + 1, lock + (tok,), f"{fact}.{tok}" if fact else tok,
                            f"{names}.{tok}" if names else tok)

    yield from walk(tree, 0, (), "", "")
