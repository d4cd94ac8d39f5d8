"""Reading the data files (probes/*.toml, rules/*.toml, lockspec): parse once, remember.

Parsed TOML is kept in this process and, as JSON, in the user cache (npu_doctor.usercache)
keyed by path, mtime and size: TOML parsing is most of the cost of loading the
configuration, and the shipped files change only with an upgrade.
"""

from __future__ import annotations

import os
import threading
import zlib
from typing import Any, Dict, List, Set, Tuple

from .errors import ConfigError

#: This installation's root (the package's parent: a checkout, or site-packages): its
#: shipped data files are the cache's regular entries.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: One cache file per installation, so that a run parses only its own entries (a cache shared
#: by every checkout and venv on a machine grew to 11 MB, 70 ms of JSON at every start).
_CACHE_NAME = "data-cache-%s.json" % format(zlib.crc32(_ROOT.encode()), "08x")
_MEMO: Dict[str, Tuple[List[int], Dict[str, Any]]] = {}
_STATE = {"disk_loaded": False, "dirty": False}
#: Paths read in this process: with the installation's own files, what the cache keeps.
_USED: Set[str] = set()
_LOCK = threading.Lock()


def _load_disk() -> None:
    from . import usercache

    _STATE["disk_loaded"] = True
    data = usercache.load_json(_CACHE_NAME)
    if isinstance(data, dict):
        for path, entry in data.items():
            if isinstance(entry, dict) and isinstance(entry.get("data"), dict):
                _MEMO.setdefault(path, (list(entry.get("key", [])), entry["data"]))
                if not _keep(path):
                    _STATE["dirty"] = True  # an entry no longer in use: rewrite without it


def _keep(path: str) -> bool:
    """Whether the cache keeps a file's entry: read in this run, or shipped with this
    installation (and still there)."""
    return path in _USED or (path.startswith(_ROOT + os.sep) and os.path.exists(path))


def read_toml(path: str) -> Dict[str, Any]:
    """Parsed TOML of a data file. Raises ConfigError naming the file."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    key = [st.st_mtime_ns, st.st_size]
    with _LOCK:
        _USED.add(path)
        if not _STATE["disk_loaded"]:
            _load_disk()
        hit = _MEMO.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
    from .safeio import CAP_DATA_FILE, loads_toml, read_regular

    try:
        data = loads_toml(read_regular(path, CAP_DATA_FILE).decode("utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except (UnicodeDecodeError, ValueError) as e:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"{path}: not valid TOML ({str(e).splitlines()[0] if str(e) else e!r})") from None
    with _LOCK:
        _MEMO[path] = (key, data)
        _STATE["dirty"] = True
    return data


def save_cache() -> None:
    """Keep what this process parsed for the next run (only if something was new)."""
    from . import usercache

    with _LOCK:
        if not _STATE["dirty"]:
            return
        _STATE["dirty"] = False
        snapshot = {p: {"key": k, "data": d} for p, (k, d) in _MEMO.items() if _keep(p)}
    usercache.save_json(_CACHE_NAME, snapshot)
