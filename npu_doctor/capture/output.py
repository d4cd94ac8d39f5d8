"""Where a capture goes: its kind (archive or directory) decided from the name, and writing
either (the archive atomically, through npu_doctor.outputs)."""

from __future__ import annotations

import errno
import io
import os
import posixpath
import shutil
import tarfile
import time
from typing import Any, Dict, Set, Tuple


from ..outputs import OutputPathError, atomic_output, resolve_output
from .tree import _Sparse

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


def output_kind(out: str) -> Tuple[str, str]:
    """("archive", absolute target path) or ("dir", out) for a capture output path.

    `.tar.gz`/`.tgz` -> archive (symlinks followed to the final target; see
    npu_doctor.outputs.resolve_output); an existing directory or a path ending in `/` ->
    directory snapshot; anything else raises OutputPathError (one line, exit 2), as does an
    archive path whose target exists and is not a regular file.
    """
    if out.endswith(ARCHIVE_SUFFIXES):
        return "archive", resolve_output(out, "capture archive")
    if out.endswith(("/", os.sep)) or os.path.isdir(out):
        if os.path.lexists(out) and not os.path.isdir(out):
            raise OutputPathError(f"{out}: refusing to write capture: it exists and is not a "
                                  "directory")
        if os.path.isdir(out) and os.listdir(out):
            raise OutputPathError(f"{out}: refusing to write capture: directory exists and is "
                                  "not empty")
        return "dir", out
    raise OutputPathError(f"{out}: unknown capture output kind; use an archive name ending in "
                          "`.tar.gz` or `.tgz`, or a directory (an existing empty one, or a "
                          "path ending in `/`)")


def _write_tar(out: str, entries: Dict[str, Tuple[str, Any]]) -> None:
    """A gzip tar with members 0600/0700, no owner names, written atomically with mode 0600
    (temp file beside the final target of `out`, fsync, os.replace onto that target)."""
    with atomic_output(out, "capture archive", mode=0o600) as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT,
                          compresslevel=1) as tf:
            mtime = int(time.time())
            added_dirs: Set[str] = set()

            def add_dir(rel: str) -> None:
                parts = rel.split("/")
                for i in range(1, len(parts) + 1):
                    sub = "/".join(parts[:i])
                    if sub in added_dirs:
                        continue
                    added_dirs.add(sub)
                    ti = tarfile.TarInfo(sub)
                    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o700, mtime
                    tf.addfile(ti)

            for rel in sorted(entries):
                kind, data = entries[rel]
                parent = posixpath.dirname(rel)
                if parent:
                    add_dir(parent)
                if kind == "dir":
                    add_dir(rel)
                    continue
                ti = tarfile.TarInfo(rel)
                ti.mtime = mtime
                if kind == "link":
                    ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, data, 0o777
                    tf.addfile(ti)
                elif kind == "spool":  # a file written beforehand (a log: capture.logcopy)
                    ti.size, ti.mode = os.path.getsize(data), 0o600
                    with open(data, "rb") as f:
                        tf.addfile(ti, f)
                elif isinstance(data, _Sparse):
                    ti.size, ti.mode = data.size, 0o600
                    tf.addfile(ti, io.BufferedReader(data.stream(), 1 << 20))
                else:
                    ti.size, ti.mode = len(data), 0o600
                    tf.addfile(ti, io.BytesIO(data))


def _write_dir(out: str, entries: Dict[str, Tuple[str, Any]]) -> None:
    if os.path.exists(out) and os.listdir(out):
        raise OSError(f"{out}: directory exists and is not empty")
    os.makedirs(out, mode=0o700, exist_ok=True)
    os.chmod(out, 0o700)
    for rel in sorted(entries):
        kind, data = entries[rel]
        dest = os.path.join(out, *rel.split("/"))
        os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
        if kind == "dir":
            os.makedirs(dest, mode=0o700, exist_ok=True)
        elif kind == "link":
            os.symlink(data, dest)
        elif kind == "spool":
            _place(data, dest)
        else:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                if isinstance(data, _Sparse):
                    for off, piece in data.pieces:   # holes stay holes on disk
                        f.seek(off)
                        f.write(piece)
                    f.truncate(data.size)
                else:
                    f.write(data)


def _place(spool: str, dest: str) -> None:
    """Move a spool file to `dest`: renamed when on the same filesystem, else copied to a
    temporary name beside dest and renamed (a reader never sees half a log)."""
    try:
        os.replace(spool, dest)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    tmp = dest + ".part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(spool, "rb") as src, os.fdopen(fd, "wb") as f:
        shutil.copyfileobj(src, f, 1 << 20)
    os.replace(tmp, dest)
