"""LiveHost: the machine npu-doctor runs on (reads `/`, runs real commands)."""

from __future__ import annotations

import atexit
import errno
import os
import selectors
import shutil
import signal
import stat as stat_mod
import subprocess
import threading
import time
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

from ..errors import AccessDenied, CommandNotFound, HostError, NotFound
from .base import (OUTPUT_CAP_BYTES, READ_CAP_BYTES, CommandResult, Host, Identity, StatInfo,
                   cap_output, keeps_newest)
from .logfile import decode_log
from ..safeio import read_regular


class LiveHost(Host):
    """The machine npu-doctor runs on. `extra_logs` are files given with --log."""

    source = "live"

    def __init__(self, extra_logs: Sequence[str] = ()) -> None:
        self.path = "/"
        self.extra_logs = list(extra_logs)
        self._identity: Optional[Identity] = None

    @staticmethod
    def _wrap(path: str, exc: OSError) -> HostError:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return NotFound(path, "no such file")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return AccessDenied(path, "permission denied")
        return HostError(path, exc.strerror or str(exc))

    def read_bytes(self, path: str, max_bytes: int = READ_CAP_BYTES) -> bytes:
        # Read in chunks: procfs sysctl files (/proc/sys/kernel/osrelease) allocate a kernel
        # buffer of the size asked for, and one 8 MiB read fails there with ENOMEM.
        try:
            with open(path, "rb", buffering=0) as f:
                chunks = []
                left = max_bytes
                while left > 0:
                    chunk = f.read(min(left, 65536))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= len(chunk)
                return b"".join(chunks)
        except OSError as e:
            raise self._wrap(path, e) from None

    def open_binary(self, path: str) -> BinaryIO:
        try:
            return open(path, "rb")
        except OSError as e:
            raise self._wrap(path, e) from None

    def listdir(self, path: str) -> List[str]:
        try:
            return sorted(os.listdir(path))
        except OSError as e:
            raise self._wrap(path, e) from None

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def readlink(self, path: str) -> str:
        try:
            return os.readlink(path)
        except OSError as e:
            raise self._wrap(path, e) from None

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def stat(self, path: str) -> Optional[StatInfo]:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return _statinfo(st)

    #: Reuse the kept output of a command that only reports on unchanged files (host.cmdcache);
    #: `capture` turns it off so that a snapshot records this moment's runs.
    reuse_outputs = True

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        argv = list(argv)
        if not argv or (shutil.which(argv[0]) is None):
            raise CommandNotFound(argv[0] if argv else "", "command not found")
        key = None
        if self.reuse_outputs:
            from . import cmdcache

            key = cmdcache.key(argv)
            kept = cmdcache.load(argv, key) if key is not None else None
            if kept is not None:
                return kept
        res = self._run(argv, timeout)
        if key is not None:
            cmdcache.save(argv, key, res)
        return res

    def _run(self, argv: List[str], timeout: float) -> CommandResult:
        env = dict(os.environ, LC_ALL="C", LANG="C")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, env=env)
        except FileNotFoundError:
            raise CommandNotFound(argv[0], "command not found") from None
        except PermissionError:
            raise AccessDenied(argv[0], "permission denied") from None
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        newest = keeps_newest(argv)
        try:
            out, err, timed_out, sizes = _communicate_capped(proc, timeout, newest)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        return CommandResult(
            argv=argv,
            returncode=None if timed_out else proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration_s=time.monotonic() - start,
            source="$ " + " ".join(argv),
            cut={k: n for k, n in sizes.items() if n > OUTPUT_CAP_BYTES},
        )

    def which(self, name: str) -> Optional[str]:
        return shutil.which(name)

    def environ(self) -> Dict[str, str]:
        return dict(os.environ)

    def identity(self) -> Identity:
        if self._identity is None:
            import grp
            import pwd

            uid, gid = os.getuid(), os.getgid()
            groups = sorted(set(os.getgroups()) | {gid})
            names = []
            for g in groups:
                try:
                    names.append(grp.getgrgid(g).gr_name)
                except KeyError:
                    names.append(str(g))
            try:
                user = pwd.getpwuid(uid).pw_name
            except KeyError:
                user = None
            self._identity = Identity(uid, gid, groups, names, user, source="getuid/getgroups")
        return self._identity

    def can_open(self, path: str, write: bool = True) -> Optional[bool]:
        if not os.path.exists(path):
            return None
        return os.access(path, os.R_OK | (os.W_OK if write else 0))

    def logs(self) -> List[Tuple[str, str]]:
        out = []
        for p in self.extra_logs:
            try:  # a regular file only: a FIFO or /dev/zero given as --log cannot hang the run
                out.append((p, decode_log(read_regular(p, 0, limit=READ_CAP_BYTES))))
            except FileNotFoundError:
                raise NotFound(p, "no such file") from None
            except PermissionError:
                raise AccessDenied(p, "permission denied") from None
            except OSError as e:
                raise HostError(p, e.strerror or str(e)) from None
        return out


#: Commands still running: their process groups are killed when npu-doctor exits (a probe
#: that gave up on a hung vendor tool must not leave it behind, re-parented to init).
_RUNNING: "set[subprocess.Popen]" = set()
_RUNNING_LOCK = threading.Lock()


@atexit.register
def kill_running() -> None:
    """SIGKILL the process group of every command still running (at exit)."""
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _statinfo(st: os.stat_result) -> StatInfo:
    m = st.st_mode
    kind = ("dir" if stat_mod.S_ISDIR(m) else "char" if stat_mod.S_ISCHR(m) else
            "block" if stat_mod.S_ISBLK(m) else "fifo" if stat_mod.S_ISFIFO(m) else
            "socket" if stat_mod.S_ISSOCK(m) else "link" if stat_mod.S_ISLNK(m) else "file")
    rdev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if kind in ("char", "block") else None
    return StatInfo(kind, stat_mod.S_IMODE(m), st.st_uid, st.st_gid, rdev)


def _communicate_capped(proc: subprocess.Popen, timeout: float,
                        newest: bool = False) -> Tuple[bytes, bytes, bool, Dict[str, int]]:
    """Read both pipes, keeping OUTPUT_CAP_BYTES of each: the first, or the last when
    `newest` (host.base.cap_output, on a line boundary); the rest is read and dropped, so the
    command never blocks on a full pipe. Kill the process group at the timeout. Returns
    (stdout, stderr, timed out, {"stdout": bytes written, "stderr": ...}).

    One selector in the calling thread, no reader threads: `watch` runs commands every
    sample for days, and two new threads per command made its RSS climb (glibc arenas of
    threads that are gone keep their memory).
    """
    out, err = proc.stdout, proc.stderr
    assert out is not None and err is not None
    bufs: Dict[int, bytearray] = {out.fileno(): bytearray(), err.fileno(): bytearray()}
    sizes: Dict[int, int] = {out.fileno(): 0, err.fileno(): 0}
    deadline = time.monotonic() + timeout
    timed_out = False
    drain_until: Optional[float] = None  # the command is gone; a grandchild may hold a pipe
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if drain_until is None:
                if proc.poll() is not None:
                    drain_until = now + 0.5
                elif now >= deadline:
                    timed_out = True
                    _kill_group(proc)
                    drain_until = time.monotonic() + 0.5
            if drain_until is not None and now >= drain_until:
                break  # a grandchild that escaped the group holds the pipe: not waited on
            # wake at least every 50 ms while it runs: to see it exit, or reach the deadline
            wait = (drain_until - now) if drain_until is not None else min(deadline - now, 0.05)
            for key, _ev in sel.select(timeout=max(wait, 0.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                sizes[key.fd] += len(chunk)
                if newest:
                    buf.extend(chunk)
                    if len(buf) > 2 * OUTPUT_CAP_BYTES:  # a rolling window: the newest bytes
                        del buf[:len(buf) - OUTPUT_CAP_BYTES - 65536]
                elif len(buf) <= OUTPUT_CAP_BYTES:  # a byte over: cap_output cuts at a line
                    buf.extend(chunk[: OUTPUT_CAP_BYTES + 1 - len(buf)])
    if not timed_out:
        try:  # both pipes closed: the command is ending (or closed them and kept running)
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    return (cap_output(bytes(bufs[out.fileno()]), newest),
            cap_output(bytes(bufs[err.fileno()]), newest), timed_out,
            {"stdout": sizes[out.fileno()], "stderr": sizes[err.fileno()]})


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()

