"""Building a lock manifest from the facts: locked fields, SDK Python distributions, file
hashes."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..namematch import any_match
from .. import __version__
from ..errors import HostError
from ..facts import Facts
from ..host import Host

from .lockfile import LOCK_SCHEMA, _digest, _sorted
from .spec import LockPath, LockSpec, expand, normalize_dist_name

HASH_CHUNK = 1 << 20


# -- Python distributions --------------------------------------------------------------------
def site_dirs(host: Host, extra: Sequence[str] = ()) -> List[str]:
    """Directories scanned for *.dist-info: `extra`, then those of npu_doctor.pyenv (the
    application environments, a snapshot's recorded `python_paths`, the system ones)."""
    from ..pyenv import site_dirs as env_site_dirs

    out: List[str] = []
    for d in list(extra) + env_site_dirs(host):
        if d and d not in out:
            out.append(d)
    return out


def scan_python_packages(host: Host, patterns: Sequence[str],
                         dirs: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """{normalised name: version} of the distributions matching patterns, first dir wins
    (npu_doctor.pyenv reads the folder names; a bare `NAME.egg-info` its PKG-INFO). Read
    through the Host, so a snapshot answers from its fs/."""
    from ..pyenv import find_dists

    found = find_dists(host, patterns, site_dirs(host) if dirs is None else dirs)
    return {k: d.version for k, d in found.items() if d.version is not None}


# -- hashing ---------------------------------------------------------------------------------
def file_digest(host: Host, path: str) -> Optional[Tuple[str, int]]:
    """(sha256 hex, size in bytes) of a host file, or None when it cannot be read.

    Streams through `Host.open_binary`, so a snapshot hashes its own fs/ copy; a file that
    `capture` kept only in part (the byte ranges the probes read) has the board's sha256 and
    size in snapshot.toml (`[[snapshot.sparse]]`), and those are used.
    """
    sparse = host.snapshot_meta().get("sparse", [])
    if isinstance(sparse, list) and sparse:
        try:
            real = host.realpath(path)
        except HostError:
            real = path
        for entry in sparse:
            if isinstance(entry, dict) and entry.get("path") in (path, real) and entry.get("sha256"):
                return str(entry["sha256"]), int(entry.get("size", 0))
    h = hashlib.sha256()
    size = 0
    try:
        f = host.open_binary(path)
    except HostError:
        return None
    try:
        while True:
            chunk = f.read(HASH_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        f.close()
    return h.hexdigest(), size


# -- the manifest ----------------------------------------------------------------------------
def _nest(flat: Dict[LockPath, Any]) -> Dict[str, Any]:
    root: Dict[str, Any] = {}
    for parts in sorted(flat):
        node = root
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        if not isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = flat[parts]
    return _sorted(root)

def host_arch(facts: Facts, host: Host) -> Optional[str]:
    """The machine architecture (`aarch64`): the `arch` fact, else this machine's on a live
    host; None when neither tells (a snapshot without `uname -m` nor ELF binaries)."""
    arch = facts.get("arch")
    if arch and str(arch) != "unknown":
        return str(arch)
    if host.source == "live":
        return os.uname().machine or None
    return None


def build_manifest(facts: Facts, host: Host, spec: LockSpec) -> Dict[str, Any]:
    """The lockfile content (a plain dict, keys sorted, digest included) for these facts."""
    tree = facts.to_dict()
    flat: Dict[LockPath, Any] = {}
    from .modules import accelerator_modules, is_pinned

    keep = accelerator_modules(tree, host, spec.modules_also)
    for fs in spec.fields:
        for lock_path, _fact, value in expand(tree, fs.tokens, spec):
            if lock_path[0] == "drivers" and len(lock_path) > 1 and not is_pinned(lock_path[1], keep):
                continue   # not an accelerator's module (lock/modules.py); lockspec [modules]
            flat[lock_path] = value
    files: Dict[str, Dict[str, Any]] = {}
    for hs in spec.hashes:
        for _lp, _fact, value in expand(tree, hs.tokens, spec):
            for p in (value if isinstance(value, list) else [value]):
                if not isinstance(p, str) or not p.startswith("/") or p in files:
                    continue
                got = file_digest(host, p)
                if got is None:
                    continue
                files[p] = {"kind": hs.kind, "sha256": got[0], "size": got[1]}
    packages = python_packages(facts, host, spec)
    body = _nest(flat)
    if packages:
        body.setdefault("python", {})["packages"] = packages
    if files:
        body["files"] = {k: files[k] for k in sorted(files)}
    body = _sorted(body)
    header: Dict[str, Any] = {"schema": LOCK_SCHEMA, "tool_version": __version__}
    arch = host_arch(facts, host)
    if arch:
        header["arch"] = arch
    header["digest"] = "sha256:" + _digest(header, body)
    out = {"lock": header}
    out.update(body)
    return out


def python_packages(facts: Facts, host: Host, spec: LockSpec) -> Dict[str, str]:
    """Pinned SDK distributions: the `python.packages` fact if a probe gave one, else a scan."""
    given = facts.get("python.packages")
    if isinstance(given, dict):
        items = {normalize_dist_name(k): str(v) for k, v in given.items() if v is not None}
    elif isinstance(given, list):
        items = {normalize_dist_name(str(p["name"])): str(p["version"]) for p in given
                 if isinstance(p, dict) and p.get("name") and p.get("version")}
    else:
        return scan_python_packages(host, spec.python_packages)
    return {k: v for k, v in sorted(items.items())
            if any_match(k, spec.python_packages)}
