"""The library preflight of the last live check, reused while nothing it looked at changed.

Resolving every SDK library's dependency tree the way ld.so does (linker.ldso) looks up each
DT_NEEDED name in every RPATH / LD_LIBRARY_PATH / RUNPATH directory, the loader cache and the
default directories: ~1 400 lookups and ~15 ms of a live check on a machine with two Python
SDKs, for records that change only when a library, a directory searched or the loader cache
does.

`TouchedHost` wraps the live host while the records are built and notes what the lookups
depended on: every directory a name was looked up in (its identity — device, inode, mtime,
ctime — changes when an entry is added, removed, renamed or re-pointed) and every file opened
(device, inode, size, mtime, ctime; ctime also moves on chmod and chown). Each identity is
taken before the lookup, so a change racing the run shows as a change next time. The records
are kept in the user cache (npu_doctor.usercache) with those identities, the configuration,
the SDK files found and LD_LIBRARY_PATH; `lookup` returns them only while all of these are the
same. Live hosts only: a snapshot is read once.
"""

from __future__ import annotations

import os
import posixpath
import zlib
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from .. import usercache

_NAME = "library-preflight-%s.json" % format(zlib.crc32(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).encode()), "08x")
#: States remembered (two interpreters' views of one machine, say).
KEEP = 2

Identity = Optional[List[int]]


def _dir_identity(path: str) -> Identity:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _file_identity(path: str) -> Identity:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class TouchedHost:
    """A live Host that notes the directories looked in and the files opened (see above).
    Everything else is forwarded unchanged."""

    def __init__(self, host: Any) -> None:
        self._host = host
        self.dirs: Dict[str, Identity] = {}
        self.files: Dict[str, Identity] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    def _dir_of(self, path: str) -> None:
        d = posixpath.dirname(path) or "/"
        if d not in self.dirs:
            self.dirs[d] = _dir_identity(d)

    def _file(self, path: str) -> None:
        # no directory: a file replaced, removed or re-pointed changes its own identity
        if path not in self.files:
            self.files[path] = _file_identity(path)

    def exists(self, path: str) -> bool:
        self._dir_of(path)
        return bool(self._host.exists(path))

    def is_dir(self, path: str) -> bool:
        self._dir_of(path)
        return bool(self._host.is_dir(path))

    def read_bytes(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        self._file(path)
        return bytes(self._host.read_bytes(path, *args, **kwargs))

    def open_binary(self, path: str) -> BinaryIO:
        self._file(path)
        return self._host.open_binary(path)  # type: ignore[no-any-return]


def _state(config: str, roots: List[Tuple[str, str, bool]], ld_library_path: str) -> Dict[str, Any]:
    return {"config": config, "roots": [list(r) for r in roots], "ld_library_path": ld_library_path}


def lookup(config: str, roots: List[Tuple[str, str, bool]],
           ld_library_path: str) -> Optional[Dict[str, Any]]:
    """The facts stored for this state, or None (none stored, something changed, caching off,
    unreadable). Costs one stat per directory and file the stored run depended on."""
    if not config or not usercache.cache_path(_NAME):
        return None
    got = usercache.load_json(_NAME)
    if not isinstance(got, dict) or not isinstance(got.get("states"), list):
        return None
    want = _state(config, roots, ld_library_path)
    for s in got["states"]:
        if not isinstance(s, dict) or any(s.get(k) != v for k, v in want.items()):
            continue
        dirs, files, facts = s.get("dirs"), s.get("files"), s.get("facts")
        if not isinstance(dirs, dict) or not isinstance(files, dict) or not isinstance(facts, dict):
            return None
        if all(_dir_identity(d) == ident for d, ident in dirs.items()) and \
                all(_file_identity(f) == ident for f, ident in files.items()):
            return facts
        return None
    return None


def store(config: str, roots: List[Tuple[str, str, bool]], ld_library_path: str,
          touched: TouchedHost, facts: Dict[str, Any]) -> None:
    """Remember the facts of this state and what they depended on. Never raises; facts that
    JSON would not give back equal are not stored."""
    if not config or not usercache.cache_path(_NAME):
        return
    import json

    try:
        if json.loads(json.dumps(facts)) != facts:
            return
    except (TypeError, ValueError):
        return
    state = _state(config, roots, ld_library_path)
    state.update(dirs=touched.dirs, files=touched.files, facts=facts)
    got = usercache.load_json(_NAME)
    old = got.get("states") if isinstance(got, dict) else None
    kept = [s for s in old or [] if isinstance(s, dict)
            and any(s.get(k) != state[k] for k in ("config", "roots", "ld_library_path"))]
    usercache.save_json(_NAME, {"states": [state] + kept[:KEEP - 1]})
