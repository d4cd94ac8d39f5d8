"""Outputs of commands that only report on files, kept between runs (LiveHost.run).

`gcc --version`, `cmake --version`, `nvcc --version` print what their binary was built as;
`dpkg-query -W` prints what the dpkg database holds. Starting them is most of a live check's
waiting (cmake alone is 8 ms of CPU and ~15 ms of wall time). Their output is kept in the user
cache (npu_doctor.usercache) with the identity (device, inode, size, mtime) of every file it
is a function of, and used only while all of them are unchanged:

- `<tool> --version` / `-V`: the executable PATH finds and the file it resolves to. A script
  (`#!` — a wrapper that may choose another binary at run time) is never cached;
- `dpkg-query -W`: the binary, /var/lib/dpkg/status and /var/lib/dpkg/updates/ (dpkg's journal
  of changes not yet folded into status; dpkg-query(1) reads both).

Every other command runs every time. The environment the command sees is fixed by LiveHost
(LC_ALL=C), PATH is part of the key.
"""

from __future__ import annotations

import os
import shutil
import zlib
from typing import Any, Dict, List, Optional, Sequence

from .. import usercache
from .base import CommandResult

_NAME = "command-outputs-%s.json" % format(zlib.crc32(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).encode()), "08x")
#: Tools whose `--version` output depends on their binary only.
VERSION_TOOLS = frozenset({"gcc", "g++", "cc", "c++", "clang", "clang++", "cmake", "nvcc", "ldd",
                           "edgetpu_compiler", "hailortcli", "xrt-smi", "npu-smi", "ninja", "make"})
DPKG_FILES = ("/var/lib/dpkg/status", "/var/lib/dpkg/updates")


def _ident(path: str) -> Optional[List[int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def key(argv: Sequence[str]) -> Optional[List[Any]]:
    """What the output of argv depends on, or None when it is not a command kept here."""
    argv = list(argv)
    if not argv:
        return None
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    real = os.path.realpath(exe)
    if argv == ["dpkg-query", "-W"]:
        files = [exe, real, *DPKG_FILES]
    elif len(argv) == 2 and argv[1] in ("--version", "-V") and \
            os.path.basename(argv[0]) in VERSION_TOOLS and not _is_script(real):
        files = [exe, real]
    else:
        return None
    return [os.environ.get("PATH", ""), [[f, _ident(f)] for f in files]]


#: The cache file as read once by this process (a check asks for several commands), by path.
_STORE: Dict[str, Dict[str, Any]] = {}


def _store() -> Dict[str, Any]:
    path = usercache.cache_path(_NAME)
    if path is None:
        return {}  # caching is off
    if path not in _STORE:
        data = usercache.load_json(_NAME)
        _STORE.clear()
        _STORE[path] = data if isinstance(data, dict) else {}
    return _STORE[path]


def load(argv: Sequence[str], k: List[Any]) -> Optional[CommandResult]:
    """The kept result of argv under key k, or None."""
    entry = _store().get("\0".join(argv))
    if not isinstance(entry, dict) or entry.get("key") != k:
        return None
    r = entry.get("result")
    if not isinstance(r, dict):
        return None
    return CommandResult(argv=list(argv), returncode=r.get("returncode"), stdout=str(r.get("stdout", "")),
                         stderr=str(r.get("stderr", "")), timed_out=False, duration_s=0.0,
                         source="$ " + " ".join(argv) + " (output of an earlier run; its files are unchanged)")


def save(argv: Sequence[str], k: List[Any], res: CommandResult) -> None:
    """Keep a finished command's result (not one that timed out, failed to start or was cut:
    a cut is said each run, from CommandResult.cut)."""
    if res.timed_out or res.returncode is None or res.cut:
        return
    store = _store()
    store["\0".join(argv)] = {"key": k, "result": {"returncode": res.returncode,
                                                   "stdout": res.stdout, "stderr": res.stderr}}
    usercache.save_json(_NAME, store)

