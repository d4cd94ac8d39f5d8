"""Copying the runtime logs (`--log`, a snapshot's `logs/`) into a capture: streamed, any
size up to a limit, and said when cut.

A log is read in pieces (host.logstream.iter_log_text: decompressed, UTF-16 decoded) and
written as UTF-8 to a spool file beside the output, while the redactor learns its values;
after every input has been learned the spool is redacted piece by piece into a second one,
which becomes `logs/NAME` (renamed into a directory snapshot, streamed into an archive). A
log costs a few MB of memory whatever its size. Time: copying runs at disk speed (~1 GB/s
here), redacting at the redactor's ~2 MB/s of plain log text (learning, then applying), so
a 100 MB log adds about a minute to a redacted capture (`--no-redact` skips it).

The limit: LOG_LIMIT_BYTES (1 GiB) per log, and never the last DISK_RESERVE_BYTES (256 MiB)
of free space on the spool's or the output's filesystem (half of what is left above the
reserve, since an archive holds the log a second time while it is written). A log over the
limit keeps its first part, cut after a whole line (so line numbers stay those of the
original); the cut is listed in snapshot.toml `[[snapshot.truncated]]` and `check
--snapshot` reports it (rule input-truncated).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Tuple

from ..host.logstream import COMPRESSED_MAGIC, iter_log_text
from ..truncation import human_bytes

LOG_LIMIT_BYTES = 1 << 30
DISK_RESERVE_BYTES = 256 << 20
#: Bytes of spooled text redacted at a time (cut after a "\n").
REDACT_PIECE = 1 << 20


@dataclass
class SpooledLog:
    """One log copied: its snapshot name (set when written), the spool file, the source
    file's size on disk, the UTF-8 bytes kept (decompressed, decoded, redacted), and why it
    was cut (None: whole)."""

    name: str
    src: str
    spool: str
    size_bytes: int
    kept_bytes: int = 0
    cut_why: Optional[str] = None
    compressed: bool = False  # gzip/bzip2/xz: size_bytes is the compressed size


def spool_dir(out: str) -> str:
    """A fresh private directory for spool files: beside the output when that directory can
    be written (the final rename stays on one filesystem), else the system temp directory."""
    parent = os.path.dirname(os.path.abspath(out.rstrip("/") or out)) or "."
    try:
        return tempfile.mkdtemp(prefix=".npu-doctor-capture-", dir=parent)
    except OSError:
        return tempfile.mkdtemp(prefix="npu-doctor-capture-")


def _free(path: str) -> Optional[int]:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def log_limit(dirs: Iterable[str]) -> Tuple[int, str]:
    """(bytes a log may take now, what sets it): LOG_LIMIT_BYTES, or half the free space
    above DISK_RESERVE_BYTES on the fullest of `dirs`."""
    limit, why = LOG_LIMIT_BYTES, f"the capture's limit of {human_bytes(LOG_LIMIT_BYTES)} a log"
    for d in dirs:
        free = _free(d)
        if free is not None and (free - DISK_RESERVE_BYTES) // 2 < limit:
            limit = max(0, (free - DISK_RESERVE_BYTES) // 2)
            why = f"free disk space: {human_bytes(free)} left on the output's filesystem"
    return limit, why


def spool_log(name: str, path: str, strict: bool, spool: str, limit: int, why: str,
              learn: Any) -> SpooledLog:
    """Copy the log at `path` into the file `spool` (UTF-8), at most `limit` bytes cut
    after a whole line, calling learn(text) on each piece copied. Raises HostError when the
    log cannot be opened, OSError when reading or writing fails."""
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            compressed = f.read(6).startswith(COMPRESSED_MAGIC)
    except OSError:
        size, compressed = 0, False
    out = SpooledLog(name, path, spool, size, compressed=compressed)
    fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        for text in iter_log_text(path, strict):
            data = text.encode("utf-8", "replace")
            if out.kept_bytes + len(data) > limit:
                data = data[:limit - out.kept_bytes]
                data = data[:data.rfind(b"\n") + 1]
                text = data.decode("utf-8", "replace")
                out.cut_why = why
            if data:
                learn(text)
                f.write(data)
                out.kept_bytes += len(data)
            if out.cut_why:
                break
    return out


def redact_spool(log: SpooledLog, red: Any) -> None:
    """Redact the spool file in pieces of about REDACT_PIECE bytes (each ending after a
    "\n"), written to a new file that replaces it (os.replace)."""
    if not red.enabled:
        return
    dst = log.spool + ".red"
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    kept = 0
    with open(log.spool, "rb") as src, os.fdopen(fd, "wb") as f:
        carry = b""
        while True:
            chunk = src.read(REDACT_PIECE)
            data = carry + chunk
            # a piece ends after a "\n" (at the end of the file, or of a very long line)
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            if chunk and not cut:
                if len(data) < 4 * REDACT_PIECE:
                    carry = data
                    continue
                cut = len(data)
            piece, carry = data[:cut], data[cut:]
            if piece:
                red_piece = red.apply(piece.decode("utf-8", "replace")).encode("utf-8")
                f.write(red_piece)
                kept += len(red_piece)
            if not chunk:
                break
    os.replace(dst, log.spool)
    log.kept_bytes = kept


def truncated_record(log: SpooledLog) -> List[dict]:
    """The snapshot.toml `[[snapshot.truncated]]` rows of a log cut when copied."""
    if not log.cut_why:
        return []
    from ..truncation import for_log

    return [for_log(log.name, log.size_bytes, log.kept_bytes, log.cut_why, log.compressed)]
