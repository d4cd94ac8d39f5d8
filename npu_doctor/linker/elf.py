"""What the dynamic loader needs to know about one ELF file, read with pyelftools.

`read_elf(host, path)` returns an `ElfInfo`: ELF class and machine, DT_NEEDED, DT_SONAME,
DT_RPATH, DT_RUNPATH, the `.gnu.version_r` requirements per needed file and the
`.gnu.version_d` definitions. Nothing else is read: the ELF header, the section header table,
the dynamic section with its string table and the two version sections — a few kilobytes even
for a 500 MB library (the file is opened through `Host.open_binary` and read with seeks, never
whole). A file whose section headers were stripped is read the way ld.so reads it, through the
PT_DYNAMIC program header.

Results are cached per file identity (device, inode, mtime, size), so `watch` and a
dependency tree that meets the same libc a hundred times parse each file once.

Formats: System V gABI "Dynamic Section"; LSB Core "Symbol Versioning"
(https://refspecs.linuxfoundation.org/LSB_5.0.0/LSB-Core-generic/LSB-Core-generic/symversion.html).

Errors (npu_doctor.errors.NpuDoctorError underneath): `ElfError` (an ELF file pyelftools
cannot read) and its subclass `NotElf` (not an ELF file: a linker script such as libc.so, a
text stub, a truncated file); host errors (NotFound, AccessDenied) pass through.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Tuple

from ..host import Host
from .elfparse import _parse
from .elftypes import (  # noqa: F401
    _LOCK,
    ELF_MAGIC,
    STATS,
    VER_FLG_BASE,
    VER_FLG_WEAK,
    ElfError,
    ElfInfo,
    NotElf,
    VersionNeed,
)

_CACHE: Dict[Tuple[Any, ...], ElfInfo] = {}
_CACHE_MAX = 8192


def clear_cache() -> None:
    """Forget what was parsed in this process (the cache file is left alone)."""
    with _LOCK:
        _CACHE.clear()
        _DISK.clear()
        _NEW_KEYS.clear()
        _DISK_STATE["loaded"] = True  # and do not read it back in this process


# -- cache across runs ---------------------------------------------------------------------
# Parsing is most of the preflight's cost and SDK libraries rarely change, so what was read is
# kept in the user's cache directory, keyed like the in-process cache (device, inode, mtime,
# size): a changed or replaced file is parsed again (npu_doctor.usercache says where).
_DISK: Dict[str, Dict[str, Any]] = {}
_DISK_STATE = {"loaded": False, "dirty": False}
_DISK_VERSION = 2   # 2: machine in `uname -m` spelling (linker.arch)


_CACHE_NAME = "elf-cache.json"


def _key_text(key: Tuple[Any, ...]) -> str:
    return ":".join(str(k) for k in key)


def _load_disk() -> None:
    from .. import usercache

    with _LOCK:
        if _DISK_STATE["loaded"]:
            return
        _DISK_STATE["loaded"] = True
        data = usercache.load_json(_CACHE_NAME)
        if isinstance(data, dict) and data.get("version") == _DISK_VERSION \
                and isinstance(data.get("files"), dict):
            _DISK.update(data["files"])


def _from_disk(key: Tuple[Any, ...], path: str) -> Optional[ElfInfo]:
    _load_disk()
    d = _DISK.get(_key_text(key))
    if not isinstance(d, dict):
        return None
    try:
        d = dict(d)
        d["version_needs"] = {k: [VersionNeed(**n) for n in v] for k, v in d.get("version_needs", {}).items()}
        info = ElfInfo(**d)
    except (TypeError, AttributeError):
        return None
    info.path = path
    with _LOCK:
        _CACHE[key] = info
    return info


def save_cache() -> None:
    """Write what this process parsed to the user cache (atomically). Never raises."""
    from .. import usercache

    with _LOCK:
        if not _NEW_KEYS:
            return
        for key in _NEW_KEYS:
            info = _CACHE.get(key)
            if info is not None:
                _DISK[_key_text(key)] = dataclasses.asdict(info)
        _NEW_KEYS.clear()
        if len(_DISK) > _CACHE_MAX:
            for k in list(_DISK)[: len(_DISK) - _CACHE_MAX]:
                del _DISK[k]
        files = dict(_DISK)
    usercache.save_json(_CACHE_NAME, {"version": _DISK_VERSION, "files": files})


_NEW_KEYS: List[Tuple[Any, ...]] = []


def is_elf(host: Host, path: str) -> bool:
    """Whether path starts with the ELF magic (False for missing or unreadable files)."""
    try:
        return host.read_bytes(path, 4) == ELF_MAGIC
    except Exception:
        return False


def read_elf(host: Host, path: str) -> ElfInfo:
    """The ElfInfo of path (a host path), cached per (dev, inode, mtime, size).

    Raises NotElf, ElfError, and the Host's NotFound / AccessDenied / HostError.
    """
    f = host.open_binary(path)
    try:
        key: Optional[Tuple[Any, ...]] = None
        try:
            st = os.fstat(f.fileno())
            # no path: /lib/x/libc.so.6 and /usr/lib/x/libc.so.6 (merged /usr) are one file
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        except (AttributeError, OSError, ValueError):
            key = None  # an in-memory file: no identity to cache by
        if key is not None:
            hit = _CACHE.get(key)
            if hit is None:
                hit = _from_disk(key, path)
            if hit is not None:
                with _LOCK:
                    STATS["cache_hits"] += 1
                return hit if hit.path == path else dataclasses.replace(hit, path=path)
        info = _parse(f, path)
        if key is not None:
            with _LOCK:
                if len(_CACHE) >= _CACHE_MAX:
                    _CACHE.clear()
                _CACHE[key] = info
                _NEW_KEYS.append(key)
        return info
    finally:
        f.close()
