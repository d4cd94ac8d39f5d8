"""The metadata files of a snapshot (docs/architecture.md, "Contract: snapshot format"),
validated: `stat.toml` [[path]] entries and `commands.toml` [[command]] entries. A bad entry is
a SnapshotError naming the file and the entry, never a probe error later."""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List

from ..errors import SnapshotError
from .base import StatInfo

_TYPES = ("file", "dir", "link", "char", "block", "fifo", "socket")


def stat_entries(data: Dict[str, Any], where: str) -> Dict[str, StatInfo]:
    """{normalised host path: StatInfo} of stat.toml's [[path]] tables (mode an octal string,
    uid/gid integers). Raises SnapshotError."""
    try:
        out = {}
        for entry in data.get("path", []):
            mode = entry.get("mode")
            if entry.get("type", "file") not in _TYPES:
                raise ValueError(f"{entry.get('path')}: unknown type {entry.get('type')!r}")
            for key in ("uid", "gid"):
                if key in entry and (not isinstance(entry[key], int) or isinstance(entry[key], bool)):
                    raise ValueError(f"{entry.get('path')}: {key} must be an integer")
            if mode is not None and not isinstance(mode, str):
                raise ValueError(f"{entry.get('path')}: mode must be an octal string such as \"0660\"")
            out[posixpath.normpath(entry["path"])] = StatInfo(
                type=entry.get("type", "file"),
                mode=int(mode, 8) if isinstance(mode, str) else mode,
                uid=entry.get("uid"), gid=entry.get("gid"), rdev=entry.get("rdev"))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise SnapshotError(f"{where}: bad [[path]] entry ({e})") from None
    return out


def command_entries(data: Dict[str, Any], where: str) -> List[dict]:
    """commands.toml's [[command]] tables, checked: argv a non-empty list of strings, an
    integer returncode, string stdout/stderr, `cut` a table of byte counts. Raises
    SnapshotError."""
    cmds = data.get("command", [])
    if not isinstance(cmds, list):
        raise SnapshotError(f"{where}: `command` must be an array of tables ([[command]])")
    for n, c in enumerate(cmds):
        if not isinstance(c, dict) or not isinstance(c.get("argv"), list) or not c["argv"] \
                or not all(isinstance(a, str) for a in c["argv"]):
            raise SnapshotError(f"{where}: command #{n + 1} needs argv, a non-empty list of strings")
        if not isinstance(c.get("returncode", 0), int) or isinstance(c.get("returncode"), bool):
            raise SnapshotError(f"{where}: command #{n + 1} ({' '.join(map(str, c['argv']))}): "
                                "returncode must be an integer")
        for key in ("stdout", "stderr"):
            if not isinstance(c.get(key, ""), str):
                raise SnapshotError(f"{where}: command #{n + 1}: {key} must be a string")
        cut = c.get("cut", {})
        if not isinstance(cut, dict) or not all(
                k in ("stdout", "stderr") and isinstance(v, int) and not isinstance(v, bool)
                and v >= 0 for k, v in cut.items()):
            raise SnapshotError(f"{where}: command #{n + 1}: cut must be a table of byte "
                                "counts: cut = {stdout = 9437184}")
    return cmds
