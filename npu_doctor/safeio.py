"""Reading input files that a user or a snapshot hands over, without hanging or exhausting
memory: only regular files, opened without blocking (a FIFO cannot stall the open), and at
most a cap of bytes per kind of input (a larger file is refused, not truncated silently).

Raises OSError subclasses so callers keep their one-line `cannot read` messages:
`NotRegularFile` (FIFO, device, socket, directory), `TooLarge`, `HardLinked`, plus what
`os.open` raises (FileNotFoundError, PermissionError, ELOOP for a refused symlink).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from typing import Any, Dict, Optional

#: Caps per kind of input (bytes).
CAP_DATA_FILE = 16 * 1024 * 1024      # probes/rules/catalogs/targets/lockspec TOML
CAP_LOCKFILE = 16 * 1024 * 1024
CAP_SNAPSHOT_META = 64 * 1024 * 1024  # commands.toml (dmesg and vendor tool outputs inside)

#: Deepest nesting of tables/arrays a data file may have (tomli recurses per level).
MAX_TOML_DEPTH = 64


class NotRegularFile(OSError):
    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", path)


class TooLarge(OSError):
    def __init__(self, path: str, size: int, cap: int) -> None:
        super().__init__(errno.EFBIG, f"too large ({size} bytes, at most {cap})", path)


class HardLinked(OSError):
    def __init__(self, path: str) -> None:
        super().__init__(errno.EPERM, "hard-linked file refused (it may be a file outside the snapshot)", path)


def special_kind(path: str) -> Optional[str]:
    """What path is when it is neither a regular file nor a directory ("FIFO", "character
    device", ...; symlinks followed), else None. Raises OSError (no such file, permission)."""
    mode = os.stat(path).st_mode
    return None if stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode) else _kind(mode)


def _kind(mode: int) -> str:
    return ("directory" if stat_mod.S_ISDIR(mode) else "FIFO" if stat_mod.S_ISFIFO(mode) else
            "character device" if stat_mod.S_ISCHR(mode) else
            "block device" if stat_mod.S_ISBLK(mode) else
            "socket" if stat_mod.S_ISSOCK(mode) else "special file")


def open_regular(path: str, cap: int = 0, follow: bool = True, single_link: bool = False) -> int:
    """An fd open for reading on a regular file (the caller closes it). `cap` > 0 refuses a
    file larger than cap bytes; follow=False refuses a symlink as the last component;
    single_link refuses a file with more than one hard link."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise NotRegularFile(path, _kind(st.st_mode))
        if cap and st.st_size > cap:
            raise TooLarge(path, st.st_size, cap)
        if single_link and st.st_nlink > 1:
            raise HardLinked(path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, cap: int, follow: bool = True, single_link: bool = False,
                 limit: int = 0) -> bytes:
    """The bytes of a regular file no larger than `cap` (see open_regular); with `limit`,
    only the first `limit` bytes are read."""
    fd = open_regular(path, cap, follow, single_link)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit) if limit else f.read()


def depth_ok(data: Any, limit: int = MAX_TOML_DEPTH) -> bool:
    """False when tables/arrays nest deeper than `limit` (walked without recursion: a header
    `[a.b.c...]` of 10 000 keys parses flat but builds 10 000 nested tables)."""
    stack = [(data, 0)]
    while stack:
        node, d = stack.pop()
        if d > limit:
            return False
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return True


def loads_toml(text: str) -> Dict[str, Any]:
    """tomllib.loads with nesting bounded: raises ValueError (message one line) for a file
    nested deeper than MAX_TOML_DEPTH, tomllib.TOMLDecodeError for invalid TOML."""
    from .tomlcompat import tomllib

    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not depth_ok(data):
        raise ValueError(f"nested more than {MAX_TOML_DEPTH} levels deep")
    return data
