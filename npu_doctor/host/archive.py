"""Snapshot archives (`.tar.gz` of a snapshot directory), unpacked safely on every Python.

`tarfile`'s extraction filters exist only in 3.8.17+, 3.9.17+, 3.10.12+, 3.11.4+ and 3.12, so
this module never calls `extractall`: it checks every member itself and writes each one with
its own code. Refused (SnapshotError, exit 2, one line): absolute names, `..`, a member whose
path passes through a symlink member, a symlink outside `fs/` or whose relative target leaves
`fs/`, a hard link to anything but an earlier regular member (it becomes a copy, so nothing is
ever written through a link), devices, FIFOs, more than MAX_MEMBERS members or more than
MAX_TOTAL_BYTES of content. Absolute symlink targets under `fs/` are kept: the snapshot reader
resolves them inside `fs/` (sysfs links such as `/sys/class/x -> /sys/devices/...`).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat as stat_mod
import tarfile
import tempfile
from typing import Dict, Set, Tuple

from ..errors import SnapshotError

#: Most members an archive may hold (a real capture holds a few thousand).
MAX_MEMBERS = 200_000
#: Most bytes of file content an archive may unpack to (a capture keeps libraries sparse).
MAX_TOTAL_BYTES = 1024 * 1024 * 1024 // 2
_CHUNK = 1024 * 1024


def _member_name(path: str, m: tarfile.TarInfo) -> str:
    """The member's normalised relative name; SnapshotError for an unsafe one."""
    name = m.name
    while name.startswith("./"):
        name = name[2:]
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or "\x00" in name or (len(name) > 1 and name[1:3] == ":\\"):
        raise SnapshotError(f"snapshot {path}: unsafe member {m.name!r} (absolute or '..')")
    name = posixpath.normpath(name) if name else "."
    return name


def _fs_root(name: str) -> str:
    """The `fs` directory a member lives under ('' when none): `fs` or `<top>/fs`."""
    parts = name.split("/")
    if len(parts) > 1 and parts[0] == "fs":
        return "fs"
    if len(parts) > 2 and parts[1] == "fs":
        return parts[0] + "/fs"
    return ""


def _check_symlink(path: str, name: str, target: str) -> None:
    fs = _fs_root(name)
    if not fs:
        raise SnapshotError(f"snapshot {path}: symlink member {name!r} outside fs/ (refused)")
    if "\x00" in target or not target:
        raise SnapshotError(f"snapshot {path}: symlink member {name!r} has an empty or bad target")
    if target.startswith("/"):
        return  # read as a path inside fs/ by SnapshotHost
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if resolved != fs and not resolved.startswith(fs + "/"):
        raise SnapshotError(f"snapshot {path}: symlink member {name!r} -> {target!r} leaves fs/ (refused)")


def _safe_dir(root: str, rel: str) -> str:
    """Create directory `rel` under root, each component a real directory (never a link)."""
    cur = root
    for part in rel.split("/") if rel not in ("", ".") else []:
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            os.mkdir(cur, 0o755)
            continue
        if not stat_mod.S_ISDIR(st.st_mode):
            raise OSError(f"{rel}: a parent is not a directory")
    return cur


def _unpack(path: str, tf: tarfile.TarFile, dest: str) -> None:
    links: Set[str] = set()       # symlink members written so far
    files: Dict[str, str] = {}    # regular member name -> its extracted path (hard link sources)
    total = 0
    count = 0
    for m in tf:
        count += 1
        if count > MAX_MEMBERS:
            raise SnapshotError(f"snapshot {path}: more than {MAX_MEMBERS} members (refused)")
        name = _member_name(path, m)
        if name == ".":
            continue
        parents = name.split("/")[:-1]
        for i in range(1, len(parents) + 1):
            if "/".join(parents[:i]) in links:
                raise SnapshotError(f"snapshot {path}: member {name!r} passes through a symlink member (refused)")
        if m.isdev() or m.isfifo() or not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise SnapshotError(f"snapshot {path}: member {name!r} is a device, FIFO or special file (refused)")
        parent = _safe_dir(dest, posixpath.dirname(name))
        out = os.path.join(parent, posixpath.basename(name))
        if m.isdir():
            _safe_dir(dest, name)
            continue
        # A later member of the same name replaces the earlier one; never write through it.
        if os.path.lexists(out):
            if os.path.isdir(out) and not os.path.islink(out):
                raise SnapshotError(f"snapshot {path}: member {name!r} replaces a directory (refused)")
            os.unlink(out)
            links.discard(name)
            files.pop(name, None)
        if m.issym():
            _check_symlink(path, name, m.linkname)
            os.symlink(m.linkname, out)
            links.add(name)
            continue
        if m.islnk():
            src_name = _member_name(path, tarfile.TarInfo(m.linkname))
            src = files.get(src_name)
            if src is None:
                raise SnapshotError(f"snapshot {path}: hard link {name!r} -> {m.linkname!r} "
                                    "is not to an earlier regular member (refused)")
            total += os.path.getsize(src)
            if total > MAX_TOTAL_BYTES:
                raise SnapshotError(f"snapshot {path}: unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB (refused)")
            shutil.copyfile(src, out, follow_symlinks=False)
            files[name] = out
            continue
        total += max(m.size, 0)
        if total > MAX_TOTAL_BYTES:
            raise SnapshotError(f"snapshot {path}: unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB (refused)")
        src_f = tf.extractfile(m)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(out, flags, 0o644)
        with os.fdopen(fd, "wb") as f:
            left = m.size
            while src_f is not None and left > 0:
                chunk = src_f.read(min(_CHUNK, left))
                if not chunk:
                    break
                f.write(chunk)
                left -= len(chunk)
        files[name] = out


def extract_archive(path: str) -> Tuple[tempfile.TemporaryDirectory, str]:
    """Unpack a snapshot archive into a temporary directory: (the directory, to clean up
    later; the snapshot root inside it). Raises SnapshotError naming the archive and the
    refused member (see the module docstring for what is refused)."""
    tmp = tempfile.TemporaryDirectory(prefix="npu-doctor-snap-")
    try:
        with tarfile.open(path, "r:*") as tf:
            _unpack(path, tf, tmp.name)
    except SnapshotError:
        tmp.cleanup()
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, UnicodeError) as e:
        tmp.cleanup()
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if first.startswith("file could not be opened successfully"):
            # tarfile.open("r:*") found no compression it can read; its message lists each
            # method's failure on the lines after this one
            first = "not a tar, tar.gz, tar.bz2 or tar.xz file"
        raise SnapshotError(f"snapshot {path}: cannot read archive ({first})") from None
    root = tmp.name
    entries = os.listdir(root)
    # Accept an archive with one top-level folder holding the snapshot.
    if len(entries) == 1 and os.path.isdir(os.path.join(root, entries[0])) \
            and not os.path.islink(os.path.join(root, entries[0])) and entries[0] != "fs":
        root = os.path.join(root, entries[0])
    return tmp, root


def is_tarfile(path: str) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, tarfile.TarError):
        # gzip raises EOFError/BadGzipFile on a truncated or corrupt archive
        return False
