"""Reading the data files (probes/*.toml, rules/*.toml, lockspec): parse once, remember.

Parsed TOML is kept in this process and, as JSON, in the user cache (npu_doctor.usercache)
keyed by path, mtime and size: TOML parsing is most of the cost of loading the
configuration, and the shipped files change only with an upgrade.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Tuple

from .errors import ConfigError
from .tomlcompat import tomllib

_CACHE_NAME = "data-cache.json"
_MEMO: Dict[str, Tuple[List[int], Dict[str, Any]]] = {}
_STATE = {"disk_loaded": False, "dirty": False}
_LOCK = threading.Lock()


def _load_disk() -> None:
    from . import usercache

    _STATE["disk_loaded"] = True
    data = usercache.load_json(_CACHE_NAME)
    if isinstance(data, dict):
        for path, entry in data.items():
            if isinstance(entry, dict) and isinstance(entry.get("data"), dict):
                _MEMO.setdefault(path, (list(entry.get("key", [])), entry["data"]))


def read_toml(path: str) -> Dict[str, Any]:
    """Parsed TOML of a data file. Raises ConfigError naming the file."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    key = [st.st_mtime_ns, st.st_size]
    with _LOCK:
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
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as e:
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
        snapshot = {p: {"key": k, "data": d} for p, (k, d) in _MEMO.items() if os.path.exists(p)}
    usercache.save_json(_CACHE_NAME, snapshot)
