"""The user's cache directory: what npu-doctor keeps between runs to start faster.

Nothing here changes a result: every entry is keyed by the identity of the file it came from
(mtime and size, for ELF files also device and inode), so a changed file is read afresh. What
is kept: parsed data files (datafiles), the validated configuration (configcache), facts
derived from regex texts (regexmemo), ELF dynamic sections (linker.elf), the last live library
preflight (linker.preflightcache), application interpreters' import paths (pyenvcache), the
catalog events of a kernel log (catalog.eventcache), libc.so.6 version banners
(collectors.libc) and outputs of version queries and `dpkg-query -W` (host.cmdcache); each
module says what its entries depend on.
`NPU_DOCTOR_NO_CACHE=1` turns it off; `NPU_DOCTOR_CACHE_DIR` moves it (default
`$XDG_CACHE_HOME/npu-doctor`, else `~/.cache/npu-doctor`). A missing, unwritable or corrupt
cache is the same as an empty one.

Most files are per installation path and Python version, so a removed venv's files would stay
for ever: writing a file deletes the cache's files unused (neither read, by atime, nor written)
for STALE_S.
"""

from __future__ import annotations

import json
import os
import stat
import time
from typing import Any, Optional

#: A cache file neither read nor written for this long (seconds) is deleted when another is
#: written. atime under the default `relatime` mount option is kept to within a day.
STALE_S = 30 * 86400
#: The names this module's callers write (and `.<name>.*`, a temp file a killed writer left).
_FAMILIES = ("config-", "data-cache-", "regex-facts-", "command-outputs-", "python-answers-",
             "elf-cache", "log-events-", "library-preflight-", "libc-banners")


def cache_path(name: str) -> Optional[str]:
    """Path of one cache file, or None when caching is off."""
    if os.environ.get("NPU_DOCTOR_NO_CACHE"):
        return None
    base = os.environ.get("NPU_DOCTOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "npu-doctor")
    return os.path.join(base, name)


def load_json(name: str) -> Any:
    """The parsed cache file, or None (off, absent or unreadable)."""
    path = cache_path(name)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save_json(name: str, data: Any) -> None:
    """Write a cache file atomically (save_bytes). Never raises."""
    if not cache_path(name):
        return
    try:
        text = json.dumps(data, separators=(",", ":"))
    except (TypeError, ValueError):
        return
    save_bytes(name, text.encode("utf-8"))


def save_bytes(name: str, data: bytes) -> None:
    """Write a binary cache file atomically (temp file, mode 0600, + rename). Never raises."""
    path = cache_path(name)
    if not path:
        return
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        import tempfile  # only when writing (random, hashlib: 2 ms a run that only reads)

        fd, tmp = tempfile.mkstemp(prefix="." + name + ".", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
        evict_stale(os.path.dirname(path), keep=path)
    except OSError:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def evict_stale(directory: str, keep: str = "", now: Optional[float] = None) -> None:
    """Delete the cache files in directory unused for STALE_S seconds (the later of atime and
    mtime), except `keep`; names that are not a cache file's are left alone. Never raises."""
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for e in entries:
        if e.path == keep or not e.name.lstrip(".").startswith(_FAMILIES):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - max(st.st_atime, st.st_mtime) > STALE_S:
                os.unlink(e.path)
        except OSError:
            pass
