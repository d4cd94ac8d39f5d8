"""The loaded configuration (probe specs, rules, signatures, catalogs) kept between runs.

Loading validates ~100 data files into ~1 500 objects (1 130 catalog entries, 360 rules):
about 25 ms of every start, the largest part of a snapshot check after imports. The
validated objects are stored with pickle in the user cache (npu_doctor.usercache) and read
back in ~4 ms when nothing they came from changed.

The key is everything the result depends on: the npu-doctor version, the Python version,
the installation's own source files and every data file read (path, mtime, size), and the
`--probes` / `--rules` directories' file lists. Any difference, an unreadable or foreign
file, or anything at all going wrong while reading is a miss: the files are loaded and
validated as without the cache (so a broken rules file is still a ConfigError).

A pickle runs code of the classes it names when read, so the file is used only when it is
owned by this user and writable by nobody else (the rule ssh applies to its keys); it lives
in this user's cache directory, which only this user can write to.
"""

from __future__ import annotations

import copy
import os
import pickle
import sys
import threading
import zlib
from typing import Any, Iterable, List, Optional, Tuple

from . import __version__, usercache

_PKG = os.path.dirname(os.path.abspath(__file__))
_NAME = "config-%s-py%d%d.pickle" % ((format(zlib.crc32(_PKG.encode()), "08x"),) + sys.version_info[:2])
#: Bump when what is pickled changes shape in a way the source files' mtimes do not show.
FORMAT = 9


def _source_files() -> List[Tuple[str, int, int]]:
    """(path, mtime_ns, size) of this installation's Python files: the loaders' code (a
    validation rule added in a checkout must not be skipped because the data did not change)."""
    out: List[Tuple[str, int, int]] = []
    stack = [_PKG]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith(".py"):
                st = e.stat()
                out.append((e.path, st.st_mtime_ns, st.st_size))
    return sorted(out)


def _data_files(probe_dirs: Iterable[str], rule_dirs: Iterable[str]) -> List[Tuple[str, int, int]]:
    from .resources import data_files

    out = []
    for kind, extra in (("probes", probe_dirs), ("rules", rule_dirs), ("catalogs", rule_dirs)):
        for path in data_files(kind, extra):
            st = os.stat(path)
            out.append((path, st.st_mtime_ns, st.st_size))
    return out


def key(probe_dirs: Iterable[str], rule_dirs: Iterable[str]) -> Tuple[Any, ...]:
    """What the loaded configuration depends on. Raises ConfigError as data_files does (an
    extra directory that does not exist) and OSError."""
    try:
        import ahocorasick  # noqa: F401  # the catalogs' automaton is in the pickle
        fast = True
    except ImportError:
        fast = False
    return (FORMAT, __version__, sys.version, fast, tuple(_data_files(probe_dirs, rule_dirs)),
            tuple(_source_files()))


def _trusted(fd: int) -> bool:
    st = os.fstat(fd)
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def load(k: Tuple[Any, ...]) -> Optional[Any]:
    """The configuration stored under key k, or None (off, absent, other key, untrusted or
    unreadable). Never raises."""
    path = usercache.cache_path(_NAME)
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not _trusted(fd):
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            stored_key = pickle.load(f)
            if stored_key != k:
                return None
            return pickle.load(f)
    except Exception:  # a truncated or foreign file: load the data files instead
        return None
    finally:
        if fd >= 0:
            os.close(fd)


class DeferredCatalogs:
    """The catalogs of a configuration read back from the cache, unpickled on first use.

    They are most of the stored configuration (~1 900 entries: ~80 % of its bytes and of the
    time to read it back), and a check whose hosts has no kernel or runtime log to match never
    uses them (a snapshot of sysfs files, a container without `dmesg`). Attribute access is
    forwarded to the CatalogSet, loaded once (thread-safe: probes run in parallel)."""

    __slots__ = ("_blob", "_obj", "_lock")

    def __init__(self, blob: bytes) -> None:
        self._blob = blob
        self._obj: Any = None
        self._lock = threading.Lock()

    def loaded(self) -> Any:
        """The CatalogSet (unpickled now if it was not yet)."""
        if self._obj is None:
            with self._lock:
                if self._obj is None:
                    self._obj = pickle.loads(self._blob)
                    self._blob = b""
        return self._obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loaded(), name)

    def __reduce__(self) -> Any:
        blob = self._blob if self._obj is None else \
            pickle.dumps(self._obj, protocol=pickle.HIGHEST_PROTOCOL)
        return (DeferredCatalogs, (blob,))


def save(k: Tuple[Any, ...], config: Any) -> None:
    """Store the configuration under key k (atomically, mode 0600). Never raises."""
    if not usercache.cache_path(_NAME):
        return  # caching is off: pickling it (and its log indexes) would be wasted work
    try:
        stored = copy.copy(config)
        if not isinstance(config.catalogs, DeferredCatalogs):
            stored.catalogs = DeferredCatalogs(
                pickle.dumps(config.catalogs, protocol=pickle.HIGHEST_PROTOCOL))
        data = pickle.dumps(k, protocol=pickle.HIGHEST_PROTOCOL) + \
            pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # something unpicklable: simply no cache
        return
    usercache.save_bytes(_NAME, data)
