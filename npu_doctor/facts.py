"""The facts tree of one run, with provenance.

Paths are dotted with list indices as `[n]` or `.n`: `accelerators[0].power.control`,
`os.id`. Every leaf set through `Facts.set` remembers its source (a file path or `$ command`),
so a finding can show where its evidence came from. A value not known is absent, never a
guess (docs/architecture.md, "Contract: check --format json").
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .lazyregex import lazy

_TOKEN_RE = lazy(r"[^.\[\]]+|\[\d+\]")


def split_path(path: str) -> List[Any]:
    """`accelerators[0].power.control` -> ['accelerators', 0, 'power', 'control']."""
    out: List[Any] = []
    for tok in _TOKEN_RE.findall(path):
        if tok.startswith("["):
            out.append(int(tok[1:-1]))
        elif tok.isdigit():
            out.append(int(tok))
        else:
            out.append(tok)
    return out


def join_path(parts: List[Any]) -> str:
    s = ""
    for p in parts:
        if isinstance(p, int):
            s += f"[{p}]"
        else:
            s += ("." if s else "") + p
    return s


def lookup(tree: Any, path: str) -> Any:
    """Value at a path in a plain dict/list tree, or None."""
    node = tree
    for part in split_path(path):
        if isinstance(part, int):
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


#: Keys that identify one accelerator across probes, most specific first.
ACCEL_KEYS = ("pci_address", "sysfs", "dev")


def accelerator_key(a: Dict[str, Any]) -> str:
    """A stable identity for one `accelerators[]` record across samples: its PCI address,
    else its sysfs path, else its /dev node, else `vendor:index`."""
    return (a.get("pci_address") or a.get("sysfs") or a.get("dev")
            or f"{a.get('vendor', '?')}:{a.get('index', '?')}")


def accelerator_label(a: Dict[str, Any]) -> str:
    """How events and metrics name an accelerator: `name where` (`Hailo-8 0000:01:00.0`,
    `rknpu fdab0000.npu`), or just the name when it has no place."""
    name = a.get("name") or a.get("vendor") or "accelerator"
    where = a.get("pci_address") or (a.get("sysfs") or "").rsplit("/", 1)[-1]
    return f"{name} {where}".strip() if where and where != name else name


class Facts:
    """A facts tree plus a map from leaf path to source."""

    def __init__(self) -> None:
        self.data: Dict[str, Any] = {}
        self.sources: Dict[str, str] = {}
        self._accel_gen = 0
        self._index: Optional[_AccelIndex] = None

    # -- writing ---------------------------------------------------------------------
    def set(self, path: str, value: Any, source: Optional[str] = None) -> None:
        """Set a leaf (or subtree). None values are not stored: unknown is absent."""
        if value is None:
            return
        parts = split_path(path)
        if parts and parts[0] == "accelerators":
            self._accel_gen += 1  # the accelerator index (below) is rebuilt on next use
        _put(self.data, parts, value)
        if source:
            self._record_sources(join_path(parts), value, source)

    def _record_sources(self, path: str, value: Any, source: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                self._record_sources(f"{path}.{k}", v, source)
        elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            for i, v in enumerate(value):
                self._record_sources(f"{path}[{i}]", v, source)
        else:
            self.sources[path] = source

    def add_accelerator(self, record: Dict[str, Any], sources: Optional[Dict[str, str]] = None,
                        source: Optional[str] = None) -> int:
        """Add or merge one accelerator; returns its index in `accelerators`.

        Records naming the same `pci_address`, `sysfs` or `dev` are the same device and are
        merged (values already known are kept). `sources` maps relative leaf paths
        (`power.control`) to sources; `source` applies to every leaf not in `sources`.
        Cost: O(leaves of the record), whatever the number of accelerators already known.
        """
        accels: List[Dict[str, Any]] = self.data.setdefault("accelerators", [])
        index = self._accel_index()
        idx = self._find_accelerator(record)
        if idx is None:
            accels.append({})
            idx = len(accels) - 1
        node = accels[idx]
        base = f"accelerators[{idx}]"
        srcs = sources or {}
        for rel, value in _leaves(record):
            parts = split_path(rel)
            if get_parts(node, parts) is not None and not (rel == "driver.bound" and value is True):
                # kept, except that evidence of a bound driver (its debugfs, class device)
                # beats not having seen one (a devfreq dir missing or denied)
                continue
            if value is not None:
                _put(node, parts, value)
            src = srcs.get(rel) or source
            if src:
                self.sources[f"{base}.{rel}"] = src
        index.note(idx, node)
        return idx

    def _accel_index(self) -> "_AccelIndex":
        """The identity index of `accelerators`, rebuilt when the list was changed other
        than through add_accelerator (a set() under `accelerators`, a new list)."""
        accels = self.data.get("accelerators")
        ix = self._index
        if ix is None or ix.gen != self._accel_gen or ix.accels is not accels or ix.size != len(accels or ()):
            ix = self._index = _AccelIndex(accels if isinstance(accels, list) else [], self._accel_gen)
        return ix

    def _find_accelerator(self, record: Dict[str, Any]) -> Optional[int]:
        ix = self._accel_index()
        for key in ACCEL_KEYS:
            val = record.get(key)
            if not val:
                continue
            i = ix.by_key[key].get(_hashable(val))
            if i is not None:
                return i
        vendor, index = record.get("vendor"), record.get("index")
        if vendor is not None and index is not None:
            i = ix.by_vendor_index.get((_hashable(vendor), _hashable(index)))
            if i is not None:
                return i
        # A record with no key of its own (e.g. a version from debugfs) joins the only
        # accelerator of its vendor.
        if vendor and not any(record.get(k) for k in ACCEL_KEYS) and index is None:
            same = ix.by_vendor.get(_hashable(vendor), ())
            if len(same) == 1:
                return next(iter(same))
        return None

    def merge(self, other: "Facts") -> None:
        """Merge a probe's partial facts.

        Accelerators are merged by identity; dicts are deep-merged (values already present
        are kept); other lists of records (log events, denied paths) are concatenated.
        One pass over the other's sources groups them per accelerator and per top-level key,
        so merging is linear in the number of facts.
        """
        other_accels = other.data.get("accelerators", [])
        per_accel: Dict[int, Dict[str, str]] = {}
        by_top: Dict[str, List[Tuple[str, str]]] = {}
        for k, v in other.sources.items():
            if k.startswith("accelerators["):
                close = k.find("]", 13)
                if close > 13 and k[close + 1:close + 2] == "." and k[13:close].isdigit():
                    per_accel.setdefault(int(k[13:close]), {})[k[close + 2:]] = v
                continue
            by_top.setdefault(_top(k), []).append((k, v))
        for i, rec in enumerate(other_accels):
            self.add_accelerator(rec, per_accel.get(i, {}))
        rest = {k: v for k, v in other.data.items() if k != "accelerators"}
        self._merge_dict(self.data, rest, "", "", by_top)

    def _copy_sources(self, by_top: Dict[str, List[Tuple[str, str]]], src_path: str,
                      dst_path: str) -> None:
        for k, v in by_top.get(_top(src_path), ()):
            if k == src_path or k.startswith(src_path + ".") or k.startswith(src_path + "["):
                self.sources[dst_path + k[len(src_path):]] = v

    def _copy_list_sources(self, by_top: Dict[str, List[Tuple[str, str]]], src_path: str,
                           dst_path: str, off: int, n: int) -> None:
        """Sources of `src_path[i]...` (i < n) to `dst_path[off + i]...`, in one pass."""
        head = src_path + "["
        for k, v in by_top.get(_top(src_path), ()):
            if k.startswith(head):
                close = k.find("]", len(head))
                num = k[len(head):close]
                if close > 0 and num.isdigit() and int(num) < n:
                    self.sources[f"{dst_path}[{off + int(num)}]{k[close + 1:]}"] = v

    def _merge_dict(self, dst: Dict[str, Any], src: Dict[str, Any], dst_path: str,
                    src_path: str, by_top: Dict[str, List[Tuple[str, str]]]) -> None:
        for k, v in src.items():
            sp = f"{src_path}.{k}" if src_path else k
            dp = f"{dst_path}.{k}" if dst_path else k
            if dst.get(k) is None:
                dst[k] = copy.deepcopy(v)
                self._copy_sources(by_top, sp, dp)
            elif isinstance(dst[k], dict) and isinstance(v, dict):
                self._merge_dict(dst[k], v, dp, sp, by_top)
            elif isinstance(dst[k], list) and isinstance(v, list) and all(
                    isinstance(x, dict) for x in dst[k] + v):
                off = len(dst[k])
                dst[k].extend(copy.deepcopy(v))
                self._copy_list_sources(by_top, sp, dp, off, len(v))

    # -- reading ---------------------------------------------------------------------
    def get(self, path: str, default: Any = None) -> Any:
        v = lookup(self.data, path)
        return default if v is None else v

    def source_of(self, path: str) -> Optional[str]:
        """Where a fact came from: its own source or that of its nearest ancestor."""
        parts = split_path(path)
        while parts:
            src = self.sources.get(join_path(parts))
            if src:
                return src
            parts = parts[:-1]
        return None

    def to_dict(self) -> Dict[str, Any]:
        return copy.deepcopy(self.data)

    def flat(self) -> Iterator[Tuple[str, Any]]:
        """Every leaf as (path, value), lists of scalars kept whole."""
        return _leaves(self.data)


def _leaves(tree: Any, prefix: str = "") -> Iterator[Tuple[str, Any]]:
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(tree, list) and tree and all(isinstance(x, dict) for x in tree):
        for i, v in enumerate(tree):
            yield from _leaves(v, f"{prefix}[{i}]")
    elif prefix:
        yield prefix, tree


def _top(path: str) -> str:
    """The first component of a fact path (`log_events` of `log_events[3].line`)."""
    for i, c in enumerate(path):
        if c in ".[":
            return path[:i]
    return path


def _hashable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool, tuple)) else repr(v)


def _put(node: Any, parts: List[Any], value: Any) -> None:
    """Write value at parts under node, creating dicts/lists on the way."""
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(part, int):
            while len(node) <= part:
                node.append({} if not isinstance(nxt, int) else [])
            node = node[part]
        else:
            if part not in node or node[part] is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value


def get_parts(node: Any, parts: List[Any]) -> Any:
    """The value at split path `parts` (see split_path) in a plain dict/list tree, or None."""
    for part in parts:
        if isinstance(part, int):
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


class _AccelIndex:
    """accelerators[] by identity: the lowest index holding each pci_address / sysfs / dev,
    each (vendor, index), and the indices of each vendor (what _find_accelerator asks)."""

    def __init__(self, accels: List[Any], gen: int) -> None:
        self.accels, self.gen = accels, gen
        self.size = 0
        self.by_key: Dict[str, Dict[Any, int]] = {k: {} for k in ACCEL_KEYS}
        self.by_vendor_index: Dict[Tuple[Any, Any], int] = {}
        self.by_vendor: Dict[Any, set] = {}
        for i, a in enumerate(accels):
            self.note(i, a)

    def note(self, i: int, a: Any) -> None:
        """Record accelerator i (new, or grown by a merge)."""
        self.size = max(self.size, i + 1, len(self.accels))
        if not isinstance(a, dict):
            return
        for key in ACCEL_KEYS:
            val = a.get(key)
            if val:
                d = self.by_key[key]
                hv = _hashable(val)
                if d.get(hv, i + 1) > i:
                    d[hv] = i
        vendor, index = a.get("vendor"), a.get("index")
        if vendor is not None and index is not None:
            hk = (_hashable(vendor), _hashable(index))
            if self.by_vendor_index.get(hk, i + 1) > i:
                self.by_vendor_index[hk] = i
        if vendor:
            self.by_vendor.setdefault(_hashable(vendor), set()).add(i)
