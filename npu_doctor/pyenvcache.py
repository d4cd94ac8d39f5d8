"""An application interpreter's answer to pyenv.QUERY_SCRIPT, kept between runs.

Asking `--python /path/to/venv/bin/python` for its import path starts that interpreter: 20-40 ms
of a check that takes ~150 ms. The answer is a function of the interpreter and what its
`site` module reads at start-up, so it is kept in the user cache (npu_doctor.usercache) with
the identity of all of that, and used only while every part is unchanged:

- the interpreter: the link given (a venv's `bin/python`) and the binary it resolves to
  (device, inode, size, mtime), and `pyvenv.cfg` beside a venv;
- the environment variables the interpreter reads for its path (PYTHONPATH, PYTHONHOME,
  PYTHONUSERBASE, PYTHONNOUSERSITE, PYTHONSAFEPATH, PYTHONPLATLIBDIR);
- every directory of the answer (mtime: a `.pth` file added or removed changes it) and each
  `.pth` file in them (size, mtime: their lines add directories and run code at start-up);
- the user site directory (`~/.local/lib/pythonX.Y/site-packages`), which `site` adds only
  when it exists.

Live hosts only: `capture` runs the interpreter so that the snapshot records its answer.
"""

from __future__ import annotations

import os
import posixpath
import zlib
from typing import Any, Dict, List, Optional

from . import usercache

_NAME = "python-answers-%s.json" % format(zlib.crc32(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))).encode()), "08x")
ENV_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
            "PYTHONPLATLIBDIR")
#: Interpreters remembered (the most recently asked kept).
MAX_ENTRIES = 16


def _stat(path: str, follow: bool = True) -> Optional[List[int]]:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def interpreter_key(exe: str, environ: Dict[str, str]) -> List[Any]:
    """What can be known of the interpreter's answer without running it."""
    venv_cfg = posixpath.join(posixpath.dirname(posixpath.dirname(exe)), "pyvenv.cfg")
    return [_stat(exe, follow=False), _stat(exe), _stat(venv_cfg),
            [environ.get(v) for v in ENV_VARS]]


def _user_site(data: Dict[str, Any], environ: Dict[str, str]) -> Optional[str]:
    version = str(data.get("version") or "")
    parts = version.split(".")
    if len(parts) < 2:
        return None
    base = environ.get("PYTHONUSERBASE") or os.path.expanduser("~/.local")
    return posixpath.join(base, "lib", f"python{parts[0]}.{parts[1]}", "site-packages")


def sites_key(data: Dict[str, Any], environ: Dict[str, str]) -> List[Any]:
    """The identity of the directories an answer names, and of their .pth files."""
    dirs = [p for p in data.get("path", []) if isinstance(p, str) and p.startswith("/")]
    for k in ("purelib", "platlib"):
        if isinstance(data.get(k), str):
            dirs.append(data[k])
    out: List[Any] = []
    for d in sorted(set(dirs)):
        pth: List[Any] = []
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.name.endswith(".pth"):
                        st = e.stat()
                        pth.append([e.name, st.st_size, st.st_mtime_ns])
        except OSError:
            pass
        out.append([d, _stat(d), sorted(pth)])
    user = _user_site(data, environ)
    out.append([user, os.path.isdir(user) if user else None])
    return out


def load(exe: str, environ: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """The remembered answer of `exe`, or None when anything it depends on changed."""
    store = usercache.load_json(_NAME)
    entry = store.get(exe) if isinstance(store, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
        return None
    if entry.get("interpreter") != interpreter_key(exe, environ):
        return None
    data: Dict[str, Any] = entry["data"]
    if entry.get("sites") != sites_key(data, environ):
        return None
    return data


def save(exe: str, environ: Dict[str, str], data: Dict[str, Any]) -> None:
    """Remember an answer (the interpreter's identity taken now, after it answered)."""
    store = usercache.load_json(_NAME)
    if not isinstance(store, dict):
        store = {}
    store.pop(exe, None)
    store[exe] = {"interpreter": interpreter_key(exe, environ), "sites": sites_key(data, environ),
                  "data": data}
    while len(store) > MAX_ENTRIES:
        store.pop(next(iter(store)))
    usercache.save_json(_NAME, store)
