"""Files npu-doctor writes (lockfiles, capture archives): where they really go, and writing
them atomically so a reader or a crash sees the old file or the new one, never a mix.

An output path that is a symlink is followed and its final target replaced (the link
stays); one that exists and is not a regular file (device, fifo, socket, directory) is
refused with an `OutputPathError` (the CLI exits 2 with one line).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from typing import BinaryIO, Iterator, Optional

from .errors import NpuDoctorError

#: Test hook: seconds to sleep between writing the temp file and renaming it into place.
TEST_DELAY_ENV = "NPU_DOCTOR_LOCK_TEST_DELAY_S"


class OutputPathError(NpuDoctorError):
    """An output path that must not be written: it exists and is not a regular file (a
    device such as /dev/full, a fifo, a socket, a directory) or is a symlink loop. One line;
    the CLI exits 2."""


_KIND_NAMES = (("S_ISDIR", "a directory"), ("S_ISCHR", "a character device"),
               ("S_ISBLK", "a block device"), ("S_ISFIFO", "a fifo"), ("S_ISSOCK", "a socket"),
               ("S_ISLNK", "a symlink that cannot be resolved (loop)"))


def resolve_output(path: str, what: str = "output") -> str:
    """The absolute path a file output really goes to: symlinks followed to their final target
    (which may not exist yet: a dangling link is written through). Raises OutputPathError
    when that target exists and is not a regular file, or the links loop."""
    real = os.path.realpath(os.path.abspath(path))
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return real
    except OSError as e:
        raise OutputPathError(f"{path}: cannot write {what} ({e.strerror or e})") from None
    if stat.S_ISREG(st.st_mode):
        return real
    kind = next((name for test, name in _KIND_NAMES if getattr(stat, test)(st.st_mode)),
                "a special file")
    via = f" (via symlink to {real})" if real != os.path.abspath(path) else ""
    raise OutputPathError(f"{path}: refusing to write {what}: it is {kind}{via}, not a regular "
                          "file; give a file path" + (" or `-o -` for stdout" if what == "lockfile"
                                                     else ""))



@contextlib.contextmanager
def atomic_output(path: str, what: str = "output", mode: Optional[int] = None) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temp file beside the final target of `path`
    (symlinks followed, see `resolve_output`), fsynced and renamed onto it when the block
    ends without an exception, removed otherwise; then the directory is fsynced.

    `mode`: permission bits of the result (default 0644 less the umask). Raises
    OutputPathError for a target that is not a regular file, OSError otherwise."""
    path = resolve_output(path, what)
    d = os.path.dirname(path)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o644 & ~umask
    clean_stale_temps(path)
    # the writer's pid in the name lets a later run tell a dead writer's leftover from a
    # temp file another running writer is still filling
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}-", suffix=".tmp",
                               dir=d)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        delay = os.environ.get(TEST_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


#: A leftover temp file without a pid in its name (older versions) is removed after this long.
STALE_TEMP_S = 600


def clean_stale_temps(path: str) -> int:
    """Remove `.<name>.<pid>-XXXX.tmp` files beside `path` left by a writer that was killed
    (its pid is gone), and nameless-pid ones older than STALE_TEMP_S. Returns how many were
    removed; errors are ignored (the write itself reports what matters)."""
    import re

    d, base = os.path.split(os.path.abspath(path))
    rx = re.compile(r"^\." + re.escape(base) + r"\.(?:(\d+)-)?[\w]+\.tmp$")
    n = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        m = rx.match(name)
        if not m:
            continue
        full = os.path.join(d, name)
        try:
            if m.group(1):
                pid = int(m.group(1))
                if pid == os.getpid():
                    continue
                try:
                    os.kill(pid, 0)
                    continue          # its writer still runs
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue          # alive, another user's
            elif time.time() - os.lstat(full).st_mtime < STALE_TEMP_S:
                continue
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                os.unlink(full)
                n += 1
        except (OSError, ValueError, OverflowError):
            continue
    return n


def write_atomic(path: str, data: bytes, what: str = "lockfile", mode: Optional[int] = None) -> None:
    """Write data to path atomically (see `atomic_output`). Raises OutputPathError for a
    target that is not a regular file, OSError otherwise."""
    with atomic_output(path, what, mode) as f:
        f.write(data)
