"""Snapshot archives (`.tar.gz` of a snapshot directory), unpacked safely."""

from __future__ import annotations

import os
import tarfile
import tempfile
from typing import Tuple

from ..errors import SnapshotError


def extract_archive(path: str) -> Tuple[tempfile.TemporaryDirectory, str]:
    """Unpack a snapshot archive into a temporary directory: (the directory, to clean up
    later; the snapshot root inside it). Raises SnapshotError naming the archive."""
    tmp = tempfile.TemporaryDirectory(prefix="npu-doctor-snap-")
    try:
        with tarfile.open(path, "r:*") as tf:
            members = []
            for m in tf.getmembers():
                name = m.name.lstrip("./") if m.name.startswith("./") else m.name
                if name.startswith("/") or ".." in name.split("/"):
                    raise SnapshotError(f"snapshot {path}: unsafe member {m.name!r}")
                if m.isdev():
                    continue
                members.append(m)
            # members were checked above; the "tar" filter (where Python has it) also drops
            # setuid bits. Not "data": a snapshot's sysfs links may be absolute.
            kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tf.extractall(tmp.name, members=members, **kwargs)  # noqa: S202
    except (tarfile.TarError, OSError, EOFError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SnapshotError(f"snapshot {path}: cannot read archive ({first})") from None
    root = tmp.name
    entries = os.listdir(root)
    # Accept an archive with one top-level folder holding the snapshot.
    if len(entries) == 1 and os.path.isdir(os.path.join(root, entries[0])) and entries[0] != "fs":
        root = os.path.join(root, entries[0])
    return tmp, root


def is_tarfile(path: str) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, tarfile.TarError):
        # gzip raises EOFError/BadGzipFile on a truncated or corrupt archive
        return False
