"""The facts tree of one run, with provenance.

Paths are dotted with list indices as `[n]` or `.n`: `accelerators[0].power.control`,
`os.id`. Every leaf set through `Facts.set` remembers its source (a file path or `$ command`),
so a finding can show where its evidence came from. A value not known is absent, never a
guess (docs/architecture.md, "Contract: check --format json").
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

_TOKEN_RE = re.compile(r"[^.\[\]]+|\[\d+\]")


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

    # -- writing ---------------------------------------------------------------------
    def set(self, path: str, value: Any, source: Optional[str] = None) -> None:
        """Set a leaf (or subtree). None values are not stored: unknown is absent."""
        if value is None:
            return
        parts = split_path(path)
        node: Any = self.data
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
        else:
            node[last] = value
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
        """
        accels: List[Dict[str, Any]] = self.data.setdefault("accelerators", [])
        idx = self._find_accelerator(record)
        if idx is None:
            accels.append({})
            idx = len(accels) - 1
        base = f"accelerators[{idx}]"
        for rel, value in _leaves(record):
            path = f"{base}.{rel}"
            if self.get(path) is not None and not (rel == "driver.bound" and value is True):
                # kept, except that evidence of a bound driver (its debugfs, class device)
                # beats not having seen one (a devfreq dir missing or denied)
                continue
            self.set(path, value)
            src = (sources or {}).get(rel) or source
            if src:
                self.sources[path] = src
        return idx

    def _find_accelerator(self, record: Dict[str, Any]) -> Optional[int]:
        accels = self.data.get("accelerators", [])
        for key in ACCEL_KEYS:
            val = record.get(key)
            if not val:
                continue
            for i, a in enumerate(accels):
                if a.get(key) == val:
                    return i
        vendor, index = record.get("vendor"), record.get("index")
        if vendor is not None and index is not None:
            for i, a in enumerate(accels):
                if a.get("vendor") == vendor and a.get("index") == index:
                    return i
        # A record with no key of its own (e.g. a version from debugfs) joins the only
        # accelerator of its vendor.
        if vendor and not any(record.get(k) for k in ACCEL_KEYS) and index is None:
            same = [i for i, a in enumerate(accels) if a.get("vendor") == vendor]
            if len(same) == 1:
                return same[0]
        return None

    def merge(self, other: "Facts") -> None:
        """Merge a probe's partial facts.

        Accelerators are merged by identity; dicts are deep-merged (values already present
        are kept); other lists of records (log events, denied paths) are concatenated.
        """
        other_accels = other.data.get("accelerators", [])
        for i, rec in enumerate(other_accels):
            prefix = f"accelerators[{i}]."
            srcs = {k[len(prefix):]: v for k, v in other.sources.items() if k.startswith(prefix)}
            self.add_accelerator(rec, srcs)
        rest = {k: v for k, v in other.data.items() if k != "accelerators"}
        self._merge_dict(self.data, rest, "", "", other)

    def _copy_sources(self, other: "Facts", src_path: str, dst_path: str) -> None:
        for k, v in other.sources.items():
            if k == src_path or k.startswith(src_path + ".") or k.startswith(src_path + "["):
                self.sources[dst_path + k[len(src_path):]] = v

    def _merge_dict(self, dst: Dict[str, Any], src: Dict[str, Any], dst_path: str,
                    src_path: str, other: "Facts") -> None:
        for k, v in src.items():
            sp = f"{src_path}.{k}" if src_path else k
            dp = f"{dst_path}.{k}" if dst_path else k
            if dst.get(k) is None:
                dst[k] = copy.deepcopy(v)
                self._copy_sources(other, sp, dp)
            elif isinstance(dst[k], dict) and isinstance(v, dict):
                self._merge_dict(dst[k], v, dp, sp, other)
            elif isinstance(dst[k], list) and isinstance(v, list) and all(
                    isinstance(x, dict) for x in dst[k] + v):
                off = len(dst[k])
                dst[k].extend(copy.deepcopy(v))
                for i in range(len(v)):
                    self._copy_sources(other, f"{sp}[{i}]", f"{dp}[{off + i}]")

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
