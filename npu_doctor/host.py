"""Host: the only code that touches the machine.

`LiveHost` reads `/` and runs real commands; `SnapshotHost` reads a snapshot directory or
`.tar.gz` in the contract format (ARCHITECTURE.md, "Contract: snapshot format"). Probes,
rules and tests go through this interface only, so the same code runs on a board, in CI and on
a laptop replaying a capture.

Paths given to a Host are absolute host paths (`/sys/class/thermal`), never snapshot paths.
Errors are the typed `HostError`s of `npu_doctor.errors`.
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import posixpath
import re
import shutil
import signal
import stat as stat_mod
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from .errors import AccessDenied, CommandNotFound, HostError, NotFound, SnapshotError
from .tomlcompat import tomllib

#: Largest command output kept, per stream (bytes). A vendor tool that floods stdout is cut.
OUTPUT_CAP_BYTES = 4 * 1024 * 1024
#: Largest file read by read_text/read_bytes unless the caller asks for more (bytes).
READ_CAP_BYTES = 8 * 1024 * 1024


@dataclass
class CommandResult:
    """What one command did. `stdout`/`stderr` are text (UTF-8, errors replaced)."""

    argv: List[str]
    returncode: Optional[int]
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0
    source: str = ""

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


@dataclass
class StatInfo:
    """Type, permission bits and owner of a path.

    `type` is one of file, dir, link, char, block, fifo, socket; `mode` the permission bits
    (e.g. 0o660); `rdev` "major:minor" for device nodes. Fields a snapshot does not record are
    None.
    """

    type: str
    mode: Optional[int] = None
    uid: Optional[int] = None
    gid: Optional[int] = None
    rdev: Optional[str] = None


@dataclass
class Identity:
    """The invoking user: uid, primary gid, supplementary group ids and names."""

    uid: Optional[int]
    gid: Optional[int]
    groups: List[int] = field(default_factory=list)
    group_names: List[str] = field(default_factory=list)
    user: Optional[str] = None
    source: str = ""


_ID_RE = re.compile(r"(uid|gid|groups)=([^ ]+)")
_ID_ITEM_RE = re.compile(r"(\d+)(?:\(([^)]*)\))?")


def parse_id_output(text: str) -> Identity:
    """Parse `id` output (`uid=1000(user) gid=1000(user) groups=1000(user),27(sudo)`).

    Returns an Identity; raises ValueError when no uid is present. Source: coreutils `id`.
    """
    fields = dict(_ID_RE.findall(text))
    if "uid" not in fields:
        raise ValueError("no uid= in id output")
    uid_m = _ID_ITEM_RE.match(fields["uid"])
    gid_m = _ID_ITEM_RE.match(fields.get("gid", ""))
    groups, names = [], []
    for item in fields.get("groups", "").split(","):
        m = _ID_ITEM_RE.match(item)
        if m:
            groups.append(int(m.group(1)))
            if m.group(2):
                names.append(m.group(2))
    return Identity(
        uid=int(uid_m.group(1)) if uid_m else None,
        gid=int(gid_m.group(1)) if gid_m else None,
        groups=groups,
        group_names=names,
        user=uid_m.group(2) if uid_m else None,
    )


class Host:
    """Read-only access to one machine. Subclasses implement the primitives."""

    source = "live"
    path = "/"

    # -- primitives -------------------------------------------------------------------
    def read_bytes(self, path: str, max_bytes: int = READ_CAP_BYTES) -> bytes:
        """Contents of a file (at most max_bytes). Raises NotFound, AccessDenied, HostError."""
        raise NotImplementedError

    def open_binary(self, path: str) -> BinaryIO:
        """A seekable binary file object for random-access reads (ELF headers and sections of
        libraries too large to read whole). The caller closes it. Raises NotFound,
        AccessDenied, HostError. This default reads at most READ_CAP_BYTES into memory."""
        return io.BytesIO(self.read_bytes(path))

    def listdir(self, path: str) -> List[str]:
        """Sorted names in a directory. Raises NotFound, AccessDenied."""
        raise NotImplementedError

    def is_dir(self, path: str) -> bool:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def readlink(self, path: str) -> str:
        """Target of a symlink as stored. Raises NotFound, or HostError if not a link."""
        raise NotImplementedError

    def realpath(self, path: str) -> str:
        """Absolute host path with every symlink resolved (as far as it exists)."""
        raise NotImplementedError

    def stat(self, path: str) -> Optional[StatInfo]:
        """StatInfo of a path, following symlinks, or None if it does not exist."""
        raise NotImplementedError

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        """Run argv (no shell) with a timeout in seconds. Raises CommandNotFound."""
        raise NotImplementedError

    def which(self, name: str) -> Optional[str]:
        """Where a command is, or None."""
        raise NotImplementedError

    def environ(self) -> Dict[str, str]:
        raise NotImplementedError

    def identity(self) -> Identity:
        """The invoking user. Raises HostError when it cannot be known."""
        raise NotImplementedError

    def can_open(self, path: str, write: bool = True) -> Optional[bool]:
        """Whether the invoking user can open path read(-write); None when unknown."""
        raise NotImplementedError

    def logs(self) -> List[Tuple[str, str]]:
        """Runtime/application logs to scan: (source name, text) pairs."""
        raise NotImplementedError

    # -- helpers built on the primitives ----------------------------------------------
    def read_text(self, path: str, max_bytes: int = READ_CAP_BYTES) -> str:
        """File contents decoded as UTF-8 (errors replaced). Raises like read_bytes."""
        return self.read_bytes(path, max_bytes).decode("utf-8", "replace")

    def read_attr(self, path: str) -> Optional[str]:
        """A sysfs-style attribute: stripped text, or None if missing/unreadable."""
        try:
            return self.read_text(path, 65536).strip().strip("\x00")
        except HostError:
            return None

    def glob(self, pattern: str) -> List[str]:
        """Absolute host paths matching a shell pattern (`*`, `?`, `[..]` per component)."""
        parts = [p for p in pattern.split("/") if p]
        found = ["/"]
        for part in parts:
            nxt = []
            magic = any(c in part for c in "*?[")
            for base in found:
                if magic:
                    try:
                        names = self.listdir(base)
                    except HostError:
                        continue
                    nxt.extend(posixpath.join(base, n) for n in fnmatch.filter(names, part)
                               if not n.startswith(".") or part.startswith("."))
                else:
                    cand = posixpath.join(base, part)
                    if self.exists(cand):
                        nxt.append(cand)
            found = nxt
            if not found:
                break
        return sorted(found)

    def describe(self) -> Dict[str, str]:
        return {"source": self.source, "path": self.path}


# ------------------------------------------------------------------------------------------
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

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        argv = list(argv)
        if not argv or (shutil.which(argv[0]) is None):
            raise CommandNotFound(argv[0] if argv else "", "command not found")
        env = dict(os.environ, LC_ALL="C", LANG="C")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, env=env)
        except FileNotFoundError:
            raise CommandNotFound(argv[0], "command not found") from None
        except PermissionError:
            raise AccessDenied(argv[0], "permission denied") from None
        out, err, timed_out = _communicate_capped(proc, timeout)
        return CommandResult(
            argv=argv,
            returncode=None if timed_out else proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration_s=time.monotonic() - start,
            source="$ " + " ".join(argv),
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
            try:
                out.append((p, decode_log(self.read_bytes(p))))
            except HostError:
                raise
        return out


def _statinfo(st: os.stat_result) -> StatInfo:
    m = st.st_mode
    kind = ("dir" if stat_mod.S_ISDIR(m) else "char" if stat_mod.S_ISCHR(m) else
            "block" if stat_mod.S_ISBLK(m) else "fifo" if stat_mod.S_ISFIFO(m) else
            "socket" if stat_mod.S_ISSOCK(m) else "link" if stat_mod.S_ISLNK(m) else "file")
    rdev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if kind in ("char", "block") else None
    return StatInfo(kind, stat_mod.S_IMODE(m), st.st_uid, st.st_gid, rdev)


def _communicate_capped(proc: subprocess.Popen, timeout: float) -> Tuple[bytes, bytes, bool]:
    """Read both pipes up to OUTPUT_CAP_BYTES each; kill the process group at the timeout."""
    bufs: Dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}

    def pump(stream, key):
        buf = bufs[key]
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            if len(buf) < OUTPUT_CAP_BYTES:
                buf.extend(chunk[: OUTPUT_CAP_BYTES - len(buf)])

    threads = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
    for t in threads:
        # A grandchild that escaped the group may hold the pipe; do not wait on it forever.
        t.join(timeout=0.5)
    return bytes(bufs["out"]), bytes(bufs["err"]), timed_out


# ------------------------------------------------------------------------------------------
# A symlink checked out by git with core.symlinks=false (or copied by a tool that does not keep
# links) becomes a small file holding the target and no newline. sysfs is full of links, so a
# snapshot treats such a file as the link it was.
_LINK_STUB_RE = re.compile(r"^(?:\.\.?/|/)?[\w.:+@,-]+(?:/[\w.:+@,-]+)*/?$")


class SnapshotHost(Host):
    """A snapshot directory or `.tar.gz` (ARCHITECTURE.md, "Contract: snapshot format").

    Files are read afresh at every access so a test can change them while a watch runs.
    Raises SnapshotError when the snapshot is missing or unreadable.
    """

    source = "snapshot"

    def __init__(self, path: str, extra_logs: Sequence[str] = ()) -> None:
        self.path = path
        self.extra_logs = list(extra_logs)
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._stub_cache: Dict[str, Tuple[Tuple[int, int], Optional[str]]] = {}
        if not os.path.exists(path):
            raise SnapshotError(f"snapshot {path}: no such file or directory")
        if os.path.isdir(path):
            self.root = os.path.abspath(path)
        elif _is_tarfile(path) or path.endswith((".tar.gz", ".tgz", ".tar")):
            self.root = self._extract(path)
        else:
            raise SnapshotError(f"snapshot {path}: neither a directory nor a .tar.gz archive")
        self.fs = os.path.join(self.root, "fs")
        known = ("fs", "commands.toml", "logs", "stat.toml", "snapshot.toml", "case.toml")
        if not any(os.path.exists(os.path.join(self.root, k)) for k in known):
            raise SnapshotError(f"snapshot {path}: not a snapshot (no fs/, commands.toml or logs/ in it)")
        # Validate the metadata once so a corrupt file is a clear error, not a probe error.
        self._commands_cache: Tuple[float, List[dict]] = (-1.0, [])
        self._commands()
        self._denied()
        self.environ()
        self._stat_cache: Tuple[float, Dict[str, StatInfo]] = (-1.0, {})
        self._stats()

    def _extract(self, path: str) -> str:
        self._tmp = tempfile.TemporaryDirectory(prefix="npu-doctor-snap-")
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
                tf.extractall(self._tmp.name, members=members, **kwargs)  # noqa: S202
        except (tarfile.TarError, OSError, EOFError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SnapshotError(f"snapshot {path}: cannot read archive ({first})") from None
        root = self._tmp.name
        entries = os.listdir(root)
        # Accept an archive with one top-level folder holding the snapshot.
        if len(entries) == 1 and os.path.isdir(os.path.join(root, entries[0])) and entries[0] != "fs":
            root = os.path.join(root, entries[0])
        return root

    # -- path resolution inside fs/ -------------------------------------------------------
    def _link_target(self, local: str) -> Optional[str]:
        """Target if `local` (a path under fs/) is a symlink or a link stub, else None.

        One lstat per path component; a small regular file is read only when its
        (mtime, size) changed, so resolving a sysfs path stays cheap in a watch loop."""
        try:
            st = os.lstat(local)
        except OSError:
            return None
        mode = st.st_mode
        if stat_mod.S_ISLNK(mode):
            return os.readlink(local)
        if not stat_mod.S_ISREG(mode) or st.st_size > 1024 or st.st_size == 0:
            return None
        key = (st.st_mtime_ns, st.st_size)
        hit = self._stub_cache.get(local)
        if hit is not None and hit[0] == key:
            return hit[1]
        try:
            with open(local, "rb") as f:
                data = f.read()
        except OSError:
            return None
        target: Optional[str] = None
        if data and not data.endswith(b"\n") and b"/" in data:
            try:
                text = data.decode("ascii")
                target = text if _LINK_STUB_RE.match(text) else None
            except UnicodeDecodeError:
                target = None
        self._stub_cache[local] = (key, target)
        return target

    def _resolve(self, path: str, follow_last: bool = True) -> Tuple[str, str]:
        """(local path under fs/, resolved host path). Raises NotFound on a loop."""
        parts = [p for p in posixpath.normpath("/" + path.lstrip("/")).split("/") if p]
        host_parts: List[str] = []
        hops = 0
        i = 0
        while i < len(parts):
            part = parts[i]
            i += 1
            if part == "..":
                if host_parts:
                    host_parts.pop()
                continue
            host_parts.append(part)
            if i == len(parts) and not follow_last:
                break
            target = self._link_target(self.fs + "/" + "/".join(host_parts))
            if target is None:
                continue
            hops += 1
            if hops > 40:
                raise NotFound(path, "too many levels of symbolic links")
            host_parts.pop()
            if target.startswith("/"):
                host_parts = []
            parts = [p for p in target.split("/") if p and p != "."] + parts[i:]
            i = 0
        host = "/" + "/".join(host_parts)
        return (self.fs + host if host_parts else self.fs), host

    def _local(self, path: str) -> str:
        return self._resolve(path)[0]

    def _toml(self, name: str) -> Optional[Dict[str, Any]]:
        """A snapshot metadata file (commands.toml, stat.toml, ...) parsed, None if absent.
        Raises SnapshotError naming the file for anything that is not valid TOML."""
        p = os.path.join(self.root, name)
        if not os.path.exists(p):
            return None
        try:
            with open(p, "rb") as f:
                return tomllib.load(f)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SnapshotError(f"snapshot {self.path}: {name}: {msg}") from None

    def _denied(self) -> "set":
        """Paths the capturing user could not read (snapshot.toml `[snapshot] denied`, written
        by `npu-doctor capture`), cached by mtime. A missing or bad snapshot.toml: none."""
        p = os.path.join(self.root, "snapshot.toml")
        try:
            mtime = os.path.getmtime(p)
        except OSError:
            return set()
        cache = getattr(self, "_denied_cache", (-1.0, set()))
        if cache[0] == mtime:
            return cache[1]
        data = self._toml("snapshot.toml") or {}
        meta = data.get("snapshot", {})
        if not isinstance(meta, dict):
            raise SnapshotError(f"snapshot {self.path}: snapshot.toml: [snapshot] must be a table")
        lst = meta.get("denied", [])
        out = {posixpath.normpath(str(x)) for x in lst if isinstance(x, str)} \
            if isinstance(lst, list) else set()
        self._denied_cache = (mtime, out)
        return out

    def _check_denied(self, path: str) -> None:
        """AccessDenied for a path that was unreadable when captured, so a capture made
        without root replays as it ran (insufficient-privileges, not a missing file)."""
        denied = self._denied()
        if denied and (posixpath.normpath("/" + path.lstrip("/")) in denied
                       or self._resolve(path)[1] in denied):
            raise AccessDenied(path, "permission denied")

    def read_bytes(self, path: str, max_bytes: int = READ_CAP_BYTES) -> bytes:
        self._check_denied(path)
        local = self._local(path)
        if os.path.isdir(local):
            raise HostError(path, "is a directory")
        try:
            with open(local, "rb") as f:
                return f.read(max_bytes)
        except FileNotFoundError:
            raise NotFound(path, "no such file") from None
        except PermissionError:
            raise AccessDenied(path, "permission denied") from None
        except OSError as e:
            raise HostError(path, e.strerror or str(e)) from None

    def open_binary(self, path: str) -> BinaryIO:
        self._check_denied(path)
        local = self._local(path)
        if os.path.isdir(local):
            raise HostError(path, "is a directory")
        try:
            return open(local, "rb")
        except FileNotFoundError:
            raise NotFound(path, "no such file") from None
        except PermissionError:
            raise AccessDenied(path, "permission denied") from None
        except OSError as e:
            raise HostError(path, e.strerror or str(e)) from None

    def listdir(self, path: str) -> List[str]:
        self._check_denied(path)
        local = self._local(path)
        try:
            return sorted(os.listdir(local))
        except FileNotFoundError:
            raise NotFound(path, "no such directory") from None
        except NotADirectoryError:
            raise HostError(path, "not a directory") from None
        except PermissionError:
            raise AccessDenied(path, "permission denied") from None

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._local(path))

    def exists(self, path: str) -> bool:
        local, _ = self._resolve(path, follow_last=False)
        if os.path.lexists(local):
            return True
        return self._stat_entry(path) is not None

    def readlink(self, path: str) -> str:
        local, _ = self._resolve(path, follow_last=False)
        if not os.path.lexists(local):
            raise NotFound(path, "no such file")
        target = self._link_target(local)
        if target is None:
            raise HostError(path, "not a symbolic link")
        return target

    def realpath(self, path: str) -> str:
        return self._resolve(path)[1]

    def _stats(self) -> Dict[str, StatInfo]:
        p = os.path.join(self.root, "stat.toml")
        try:
            mtime = os.path.getmtime(p)
        except OSError:
            return {}
        if mtime == self._stat_cache[0]:
            return self._stat_cache[1]
        data = self._toml("stat.toml") or {}
        try:
            out = {}
            for entry in data.get("path", []):
                mode = entry.get("mode")
                if entry.get("type", "file") not in ("file", "dir", "link", "char", "block", "fifo", "socket"):
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
            raise SnapshotError(f"snapshot {self.path}: stat.toml: bad [[path]] entry ({e})") from None
        self._stat_cache = (mtime, out)
        return out

    def _stat_entry(self, path: str) -> Optional[StatInfo]:
        return self._stats().get(posixpath.normpath("/" + path.lstrip("/")))

    def stat(self, path: str) -> Optional[StatInfo]:
        entry = self._stat_entry(path)
        if entry is not None:
            return entry
        local, host = self._resolve(path)
        entry = self._stat_entry(host)
        if entry is not None:
            return entry
        if os.path.isdir(local):
            return StatInfo("dir")
        if os.path.isfile(local):
            return StatInfo("file")
        return None

    def _commands(self) -> List[dict]:
        p = os.path.join(self.root, "commands.toml")
        try:
            mtime = os.path.getmtime(p)
        except OSError:
            return []
        if mtime == self._commands_cache[0]:
            return self._commands_cache[1]
        data = self._toml("commands.toml") or {}
        cmds = data.get("command", [])
        where = f"snapshot {self.path}: commands.toml"
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
        self._commands_cache = (mtime, cmds)
        return cmds

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        argv = [str(a) for a in argv]
        for c in self._commands():
            if [str(a) for a in c["argv"]] == argv:
                timed_out = bool(c.get("timed_out", False))
                if timed_out:
                    # A command that hung costs its timeout, as on the board.
                    time.sleep(min(timeout, float(c.get("sleep_s", timeout))))
                return CommandResult(
                    argv=argv,
                    returncode=None if timed_out else int(c.get("returncode", 0)),
                    stdout=str(c.get("stdout", "")),
                    stderr=str(c.get("stderr", "")),
                    timed_out=timed_out,
                    source="$ " + " ".join(argv),
                )
        raise CommandNotFound(argv[0] if argv else "", "command not found")

    def which(self, name: str) -> Optional[str]:
        for c in self._commands():
            if c["argv"] and c["argv"][0] == name:
                return name
        return None

    def environ(self) -> Dict[str, str]:
        data = self._toml("environ.toml") or {}
        env = data.get("environ", {})
        if not isinstance(env, dict):
            raise SnapshotError(f"snapshot {self.path}: environ.toml: [environ] must be a table")
        return {str(k): str(v) for k, v in env.items()}

    def identity(self) -> Identity:
        try:
            res = self.run(["id"])
        except CommandNotFound:
            raise NotFound("id", "the snapshot has no `id` output") from None
        try:
            ident = parse_id_output(res.stdout)
        except ValueError as e:
            raise HostError("id", str(e)) from None
        ident.source = "$ id"
        return ident

    def can_open(self, path: str, write: bool = True) -> Optional[bool]:
        st = self.stat(path)
        if st is None or st.mode is None or st.uid is None:
            return None
        try:
            ident = self.identity()
        except HostError:
            return None
        return mode_allows(st, ident, write)

    def logs(self) -> List[Tuple[str, str]]:
        out = []
        logdir = os.path.join(self.root, "logs")
        if os.path.isdir(logdir):
            for dirpath, _dirs, files in os.walk(logdir):
                for name in sorted(files):
                    p = os.path.join(dirpath, name)
                    try:
                        with open(p, "rb") as f:
                            text = decode_log(f.read(READ_CAP_BYTES))
                    except OSError:
                        continue
                    out.append(("logs/" + os.path.relpath(p, logdir), text))
        for p in self.extra_logs:
            try:
                with open(p, "rb") as f:
                    out.append((p, decode_log(f.read(READ_CAP_BYTES))))
            except OSError as e:
                raise HostError(p, e.strerror or str(e)) from None
        return sorted(out)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _decompress(data: bytes) -> bytes:
    """gzip, bzip2 or xz (rotated logs) decompressed, up to READ_CAP_BYTES; a truncated
    archive gives what could be read before the damage."""
    import bz2
    import lzma
    import zlib

    if data[:2] == b"\x1f\x8b":
        dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif data[:3] == b"BZh":
        dec = bz2.BZ2Decompressor()
    elif data[:6] == b"\xfd7zXZ\x00":
        dec = lzma.LZMADecompressor()
    else:
        return data
    out = bytearray()
    try:
        for i in range(0, len(data), 65536):
            out += dec.decompress(data[i:i + 65536])
            if len(out) >= READ_CAP_BYTES or getattr(dec, "eof", False):
                break
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        pass
    return bytes(out[:READ_CAP_BYTES])


def decode_log(data: bytes) -> str:
    """Text of a log file as users hand it over: UTF-8, UTF-16 (what PowerShell's `>` writes,
    with or without a BOM), gzip/bzip2/xz-compressed (rotated logs). At most READ_CAP_BYTES."""
    data = _decompress(data)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    head = data[:4096]
    if len(head) >= 8 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) < len(head) // 16:
        return data.decode("utf-16-le", "replace")
    return data.decode("utf-8-sig", "replace")


def _is_tarfile(path: str) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, tarfile.TarError):
        # gzip raises EOFError/BadGzipFile on a truncated or corrupt archive
        return False


def mode_allows(st: StatInfo, ident: Identity, write: bool = True) -> bool:
    """Whether Unix permission bits let this identity open the node (root always can)."""
    if ident.uid == 0:
        return True
    need = 0o6 if write else 0o4
    mode = st.mode or 0
    if st.uid == ident.uid:
        bits = (mode >> 6) & 7
    elif st.gid is not None and (st.gid == ident.gid or st.gid in ident.groups):
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & need == need


def open_host(snapshot: Optional[str] = None, logs: Sequence[str] = ()) -> Host:
    """LiveHost, or SnapshotHost for a snapshot path. Raises SnapshotError."""
    if snapshot:
        return SnapshotHost(snapshot, extra_logs=logs)
    return LiveHost(extra_logs=logs)
