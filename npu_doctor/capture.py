"""`npu-doctor capture`: a snapshot of exactly what the probes read and ran on this host.

`RecordingHost` wraps another Host (a `LiveHost` on a board; any Host in tests) and records
every read, open, listdir, readlink, realpath, exists/is_dir, stat, can_open, run, environ,
identity and log access while a normal `check` runs through it. `write_capture` then writes
that record in the snapshot contract (ARCHITECTURE.md, "Contract: snapshot format"):

- `fs/`: each file read, at its real path (a file opened for seeks, such as an ELF library,
  keeps only the byte ranges the probes read, zeros elsewhere, with its real size and
  sha256 in snapshot.toml `[[snapshot.sparse]]`); every symlink met on the way kept as a symlink
  (an absolute target, or a relative one that climbs above `/`, is rewritten relative so it
  resolves inside `fs/` and never out of the tree); directories listed by a probe hold every
  name they had (names not read become empty placeholder files or directories, so globs
  and listings replay identically).
- `commands.toml`: every command run, with returncode, stdout, stderr (timed_out = true for
  a command that hung). The invoking user (`Host.identity`) becomes an `["id"]` entry.
- `stat.toml`: type, mode, owner and rdev of device nodes and of every path a probe
  stat()ed or asked to open, since a plain tree loses them.
- `environ.toml`: only the environment variables a probe looked up by name (never names
  that look like secrets: TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH, COOKIE).
- `logs/`: the files given with --log.
- `snapshot.toml`: created, tool_version, hostname (redacted), redacted, python_paths (the
  site directories `lock` scans, so `lock --snapshot` matches a live `lock`), sparse,
  denied (paths this user could not read: a SnapshotHost answers AccessDenied for them, so
  a capture made without root replays as it ran), left_out.

Redaction (npu_doctor.redact) is on by default and applied to text content, command output,
logs, environment values and paths alike, with one mapping per capture. Binary files (ELF
libraries) are copied unchanged. Files and the archive are mode 0600 (directories 0700), and
members carry no owner names. A file over the size cap, or one that could not be read, is
left out and listed (with why) in the summary and in snapshot.toml.

The output's kind is decided from its name, never guessed (`output_kind`): a name ending in
`.tar.gz` or `.tgz` is an archive (a symlink is followed and its final target replaced
atomically; a target that exists and is not a regular file is refused); an existing
directory, or a path ending in `/`, is a directory snapshot (the directory must be empty);
anything else (`out.zip`, `board`) is refused with one line naming the accepted forms.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import socket
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Set, Tuple

from . import __version__
from .errors import AccessDenied, HostError
from .host import CommandResult, Host, Identity, StatInfo

DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
SECRET_ENV_RE = re.compile(r"(?i)TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION")
MAX_LINK_HOPS = 40


class _TrackedEnv(dict):
    """The environment dict handed to probes; remembers which names were looked up."""

    def __init__(self, data: Dict[str, str], used: Set[str], lock: threading.Lock) -> None:
        super().__init__(data)
        self._used, self._lock = used, lock

    def _mark(self, key: Any) -> None:
        if isinstance(key, str):
            with self._lock:
                self._used.add(key)

    def __getitem__(self, key):
        self._mark(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._mark(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._mark(key)
        return super().__contains__(key)


class _TrackedFile:
    """The file object RecordingHost.open_binary hands out: records which byte ranges were
    read, so the capture can keep just those (a sparse copy of a 500 MB library).
    `run_capture` empties the ELF cache first, so no read is skipped by an earlier run."""

    def __init__(self, f: BinaryIO, ranges: List[Tuple[int, int]], lock: threading.Lock) -> None:
        self._f, self._ranges, self._lock = f, ranges, lock

    def _note(self, pos: int, n: int) -> None:
        if n > 0:
            with self._lock:
                self._ranges.append((pos, n))

    def read(self, n: int = -1) -> bytes:
        pos = self._f.tell()
        data = self._f.read(n)
        self._note(pos, len(data))
        return data

    def readinto(self, b) -> int:
        pos = self._f.tell()
        n = self._f.readinto(b) or 0
        self._note(pos, n)
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def fileno(self) -> int:
        return self._f.fileno()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed

    def __enter__(self) -> "_TrackedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordingHost(Host):
    """A Host that forwards to `inner` and records what was accessed (thread-safe)."""

    def __init__(self, inner: Host) -> None:
        self.inner = inner
        self.source = inner.source
        self.path = inner.path
        self._lock = threading.Lock()
        self.reads: Dict[str, bytes] = {}          # path -> longest content returned
        self.whole: Set[str] = set()               # opened with open_binary
        self.ranges: Dict[str, List[Tuple[int, int]]] = {}   # ... and the (offset, n) read
        self.listed: Set[str] = set()
        self.touched: Set[str] = set()             # exists/is_dir/realpath/readlink
        self.stated: Set[str] = set()              # stat/can_open: record mode and owner
        self.denied: Dict[str, str] = {}
        self.commands: Dict[Tuple[str, ...], CommandResult] = {}
        self.env_used: Set[str] = set()
        self.env_data: Dict[str, str] = {}
        self.identity_used: Optional[Identity] = None
        self.logs_used: List[Tuple[str, str]] = []

    def _add(self, coll: Set[str], path: str) -> None:
        with self._lock:
            coll.add(path)

    def _deny(self, path: str, e: HostError) -> None:
        if isinstance(e, AccessDenied):
            with self._lock:
                self.denied.setdefault(path, "permission denied")

    # -- primitives ------------------------------------------------------------------------
    def read_bytes(self, path: str, max_bytes: int = 8 * 1024 * 1024) -> bytes:
        try:
            data = self.inner.read_bytes(path, max_bytes)
        except HostError as e:
            self._deny(path, e)
            raise
        with self._lock:
            if len(data) > len(self.reads.get(path, b"")) or path not in self.reads:
                self.reads[path] = data
        return data

    def open_binary(self, path: str) -> BinaryIO:
        try:
            f = self.inner.open_binary(path)
        except HostError as e:
            self._deny(path, e)
            raise
        with self._lock:
            self.whole.add(path)
            ranges = self.ranges.setdefault(path, [])
        return _TrackedFile(f, ranges, self._lock)  # type: ignore[return-value]

    def listdir(self, path: str) -> List[str]:
        try:
            names = self.inner.listdir(path)
        except HostError as e:
            self._deny(path, e)
            raise
        self._add(self.listed, path)
        return names

    def is_dir(self, path: str) -> bool:
        self._add(self.touched, path)
        return self.inner.is_dir(path)

    def exists(self, path: str) -> bool:
        self._add(self.touched, path)
        return self.inner.exists(path)

    def readlink(self, path: str) -> str:
        self._add(self.touched, path)
        return self.inner.readlink(path)

    def realpath(self, path: str) -> str:
        self._add(self.touched, path)
        return self.inner.realpath(path)

    def stat(self, path: str) -> Optional[StatInfo]:
        self._add(self.stated, path)
        return self.inner.stat(path)

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        res = self.inner.run(argv, timeout)  # CommandNotFound: not listed = not found
        with self._lock:
            self.commands.setdefault(tuple(str(a) for a in argv), res)
        return res

    def which(self, name: str) -> Optional[str]:
        return self.inner.which(name)

    def environ(self) -> Dict[str, str]:
        data = self.inner.environ()
        with self._lock:
            self.env_data = dict(data)
        return _TrackedEnv(data, self.env_used, self._lock)

    def identity(self) -> Identity:
        ident = self.inner.identity()
        with self._lock:
            self.identity_used = ident
        return ident

    def can_open(self, path: str, write: bool = True) -> Optional[bool]:
        self._add(self.stated, path)
        try:
            self.identity()
        except HostError:
            pass
        return self.inner.can_open(path, write)

    def logs(self) -> List[Tuple[str, str]]:
        got = self.inner.logs()
        with self._lock:
            self.logs_used = list(got)
        return got

    def describe(self) -> Dict[str, str]:
        return self.inner.describe()


# -- writing -----------------------------------------------------------------------------------
@dataclass
class CaptureResult:
    path: str
    files: int = 0
    placeholders: int = 0
    links: int = 0
    commands: int = 0
    logs: int = 0
    left_out: List[Tuple[str, str]] = field(default_factory=list)   # (host path, why)
    redactions: Dict[str, int] = field(default_factory=dict)


class _Sparse:
    """A file of `size` bytes of which only `pieces` [(offset, bytes)] were read; the rest is
    written as zeros (what the probes never looked at)."""

    def __init__(self, size: int, pieces: List[Tuple[int, bytes]], sha256: str) -> None:
        self.size, self.pieces, self.sha256 = size, pieces, sha256

    def stream(self) -> "io.RawIOBase":
        return _SparseStream(self)


class _SparseStream(io.RawIOBase):
    def __init__(self, sp: _Sparse) -> None:
        self.sp, self.pos, self.i = sp, 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.pos >= self.sp.size:
            return 0
        want = min(len(b), self.sp.size - self.pos)
        pieces = self.sp.pieces
        while self.i < len(pieces) and pieces[self.i][0] + len(pieces[self.i][1]) <= self.pos:
            self.i += 1
        if self.i < len(pieces) and pieces[self.i][0] <= self.pos:
            off, data = pieces[self.i]
            chunk = data[self.pos - off:self.pos - off + want]
        else:
            nxt = pieces[self.i][0] if self.i < len(pieces) else self.sp.size
            chunk = bytes(min(want, nxt - self.pos))
        b[:len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


def _merge_ranges(ranges: List[Tuple[int, int]], size: int) -> List[Tuple[int, int]]:
    out: List[List[int]] = []
    for off, n in sorted(ranges):
        end = min(off + n, size)
        if end <= off:
            continue
        if out and off <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([off, end])
    return [(a, b - a) for a, b in out]


class _Tree:
    """The capture being assembled: fs/ entries by (unredacted) host path."""

    def __init__(self) -> None:
        self.dirs: Set[str] = set()
        self.files: Dict[str, Any] = {}   # bytes, or _Sparse for a file read in parts
        self.placeholders: Set[str] = set()
        self.links: Dict[str, str] = {}
        self.stats: Dict[str, StatInfo] = {}

    def add_dir(self, path: str) -> None:
        while path not in ("/", "") and path not in self.dirs:
            if path in self.files or path in self.links:
                return
            self.dirs.add(path)
            path = posixpath.dirname(path)


def _safe_target(link: str, target: str) -> str:
    """A link target that resolves inside the tree: relative, never above `/`.

    A relative target that stays below `/` is kept as stored (what readlink returns); an
    absolute one, or one whose `..` climb above `/`, is rewritten relative to the link.
    """
    parent = posixpath.dirname(link)
    if not target.startswith("/"):
        level = len([p for p in parent.split("/") if p])
        ok = True
        for part in target.split("/"):
            if part == "..":
                level -= 1
                if level < 0:
                    ok = False
                    break
            elif part not in ("", "."):
                level += 1
        if ok:
            return target
    absolute = posixpath.normpath(posixpath.join(parent, target))
    return posixpath.relpath(absolute, parent)


class CaptureWriter:
    """Turns a RecordingHost's record into a snapshot (directory or .tar.gz)."""

    def __init__(self, rec: RecordingHost, redactor, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES):
        self.rec = rec
        self.inner = rec.inner
        self.red = redactor
        self.max = max_file_bytes
        self.tree = _Tree()
        self.left_out: Dict[str, str] = {}
        #: --log path on the host -> its name in the snapshot (`logs/NAME`)
        self.log_map: Dict[str, str] = {}

    # -- resolving paths like the kernel does, keeping the links met ---------------------------
    def _materialize(self, path: str) -> Optional[str]:
        """Record every symlink on the way to path; return its real path (None on a loop)."""
        parts = [p for p in posixpath.normpath("/" + path.lstrip("/")).split("/") if p]
        cur = "/"
        hops = 0
        i = 0
        while i < len(parts):
            part = parts[i]
            i += 1
            if part == ".":
                continue
            if part == "..":
                cur = posixpath.dirname(cur) or "/"
                continue
            nxt = posixpath.join(cur, part)
            try:
                target = self.inner.readlink(nxt)
            except HostError:
                target = None
            except Exception:
                target = None
            if target is None:
                cur = nxt
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                return None
            self.tree.links[nxt] = target
            self.tree.add_dir(cur)
            if target.startswith("/"):
                cur = "/"
            parts = [p for p in target.split("/") if p] + parts[i:]
            i = 0
        return cur

    def _lstat_kind(self, path: str) -> Optional[str]:
        try:
            self.inner.readlink(path)
            return "link"
        except Exception:  # HostError: not a link (or unreadable); decide below
            pass
        if self.inner.is_dir(path):
            return "dir"
        if self.inner.exists(path):
            st = self.inner.stat(path)
            return st.type if st else "file"
        return None

    def _note_stat(self, real: str) -> None:
        st = self.inner.stat(real)
        if st is not None and (st.mode is not None or st.type not in ("file", "dir")):
            self.tree.stats[real] = st

    def _add_file(self, real: str, data: bytes) -> None:
        if len(data) > self.max:
            self.left_out[real] = f"too large: {len(data)} bytes > cap {self.max} bytes"
            return
        self.tree.add_dir(posixpath.dirname(real))
        self.tree.files[real] = data
        self.tree.placeholders.discard(real)

    def _placeholder(self, real: str, kind: Optional[str]) -> None:
        if real in self.tree.files or real in self.tree.links or real in self.tree.dirs:
            return
        if kind == "dir":
            self.tree.add_dir(real)
        elif kind is not None:
            self.tree.add_dir(posixpath.dirname(real))
            self.tree.placeholders.add(real)
            if kind not in ("file", "link"):
                self._note_stat(real)

    def _add_opened(self, real: str, path: str, ranges: List[Tuple[int, int]]) -> None:
        """A file opened with open_binary: whole if it was read whole, else the parts read."""
        try:
            f = self.inner.open_binary(path)
        except HostError as e:
            self.left_out[real] = f"unreadable: {e.reason or e}"
            return
        try:
            size = f.seek(0, 2)
            merged = _merge_ranges(ranges, size)
            covered = sum(n for _o, n in merged)
            if covered >= size:
                if size > self.max:
                    self.left_out[real] = f"too large: {size} bytes > cap {self.max} bytes"
                    return
                f.seek(0)
                self._add_file(real, f.read(size))
                return
            if covered > self.max:
                self.left_out[real] = (f"too large: {covered} bytes read of {size} > cap "
                                       f"{self.max} bytes")
                return
            pieces = []
            for off, n in merged:
                f.seek(off)
                pieces.append((off, f.read(n)))
            import hashlib

            h = hashlib.sha256()
            f.seek(0)
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
        finally:
            f.close()
        self.tree.add_dir(posixpath.dirname(real))
        self.tree.files[real] = _Sparse(size, pieces, h.hexdigest())
        self.tree.placeholders.discard(real)

    def build(self) -> None:
        rec = self.rec
        opened: Dict[str, Tuple[str, List[Tuple[int, int]]]] = {}
        for path in sorted(rec.whole):
            real = self._materialize(path)
            if real is None:
                self.left_out[path] = "symlink loop"
                continue
            src, ranges = opened.setdefault(real, (path, []))
            ranges.extend(rec.ranges.get(path, []))
        for path, data in sorted(rec.reads.items()):
            real = self._materialize(path)
            if real is None:
                self.left_out[path] = "symlink loop"
                continue
            if real in opened:
                opened[real][1].append((0, len(data)))
                continue
            self._add_file(real, data)
        for real, (path, ranges) in sorted(opened.items()):
            self._add_opened(real, path, ranges)
        for path in sorted(rec.listed):
            real = self._materialize(path)
            if real is None:
                continue
            self.tree.add_dir(real)
            try:
                names = self.inner.listdir(path)
            except HostError:
                continue
            for name in names:
                child = posixpath.join(real, name)
                if child in self.tree.files or child in self.tree.links or child in self.tree.dirs:
                    continue
                kind = self._lstat_kind(child)
                if kind == "link":
                    try:
                        self.tree.links[child] = self.inner.readlink(child)
                    except HostError:
                        pass
                else:
                    self._placeholder(child, kind)
        for path in sorted(rec.touched | rec.stated):
            real = self._materialize(path)
            if real is None:
                continue
            kind = self._lstat_kind(real)
            self._placeholder(real, kind)
            if path in rec.stated and kind is not None:
                self._note_stat(real)
        for path, why in sorted(rec.denied.items()):
            self.left_out.setdefault(path, f"unreadable: {why}")
        # a link that is also a directory/file entry: the link wins (it is what the host has)
        for link in list(self.tree.links):
            self.tree.dirs.discard(link)
            self.tree.files.pop(link, None)
            self.tree.placeholders.discard(link)

    # -- content ---------------------------------------------------------------------------------
    def _identity_command(self) -> Optional[Dict[str, Any]]:
        ident = self.rec.identity_used
        if ident is None or ("id",) in self.rec.commands or ident.uid is None:
            return None
        names = dict(zip(ident.groups, ident.group_names))
        try:
            import grp

            for g in ident.groups + ([ident.gid] if ident.gid is not None else []):
                if g not in names:
                    names[g] = grp.getgrgid(g).gr_name
        except (ImportError, KeyError):
            pass

        def item(n: Optional[int], name: Optional[str]) -> str:
            return f"{n}({name})" if name else f"{n}"

        text = f"uid={item(ident.uid, ident.user)}"
        if ident.gid is not None:
            text += f" gid={item(ident.gid, names.get(ident.gid))}"
        if ident.groups:
            text += " groups=" + ",".join(item(g, names.get(g)) for g in ident.groups)
        return {"argv": ["id"], "returncode": 0, "stdout": text + "\n", "stderr": ""}

    def _commands(self) -> List[Dict[str, Any]]:
        out = []
        for argv, res in sorted(self.rec.commands.items()):
            d: Dict[str, Any] = {"argv": list(argv)}
            if res.timed_out:
                d["timed_out"] = True
            else:
                d["returncode"] = int(res.returncode if res.returncode is not None else -1)
            d["stdout"] = res.stdout
            d["stderr"] = res.stderr
            out.append(d)
        ident = self._identity_command()
        if ident:
            out.append(ident)
        return out

    def _learn(self, commands: List[Dict[str, Any]]) -> None:
        """First pass of redaction: learn every value from everything that will be written."""
        red = self.red
        for real, data in sorted(self.tree.files.items()):
            from .redact import is_text

            if isinstance(data, bytes) and is_text(data):
                red.scan(data.decode("utf-8"), real)
        for c in commands:
            red.scan(" ".join(c["argv"]))
            red.scan(c["stdout"])
            red.scan(c["stderr"])
        for _name, text in self.rec.logs_used:
            red.scan(text)
        for k in sorted(self.rec.env_used):
            if k in self.rec.env_data:
                red.scan(f"{k}={self.rec.env_data[k]}")

    def write(self, out: str, check_meta: Optional[Dict[str, Any]] = None) -> CaptureResult:
        """Write the snapshot to `out`: an archive or a directory, as `output_kind` decides.
        Raises OutputPathError for an output it refuses, OSError when writing fails."""
        import tomli_w

        from .redact import is_text

        self.build()
        commands = self._commands()
        self._learn(commands)
        red = self.red
        entries: Dict[str, Tuple[str, Any]] = {}   # relative path -> (kind, data)

        def fs_rel(host_path: str) -> str:
            return "fs" + red.apply_path(host_path)

        for d in sorted(self.tree.dirs):
            entries[fs_rel(d)] = ("dir", None)
        sparse_meta = []
        for real, data in sorted(self.tree.files.items()):
            if isinstance(data, _Sparse):
                sparse_meta.append({"path": red.apply_path(real), "size": data.size,
                                    "sha256": data.sha256,
                                    "bytes_kept": sum(len(b) for _o, b in data.pieces)})
            elif is_text(data):
                data = red.apply(data.decode("utf-8"), real).encode("utf-8")
            entries[fs_rel(real)] = ("file", data)
        for real in sorted(self.tree.placeholders):
            entries.setdefault(fs_rel(real), ("file", b""))
        for link, target in sorted(self.tree.links.items()):
            entries[fs_rel(link)] = ("link", red.apply_path(_safe_target(link, target)))
        red_commands = []
        for c in commands:
            red_commands.append({
                "argv": [red.apply(a) for a in c["argv"]],
                **{k: c[k] for k in ("timed_out", "returncode") if k in c},
                "stdout": red.apply(c["stdout"]), "stderr": red.apply(c["stderr"])})
        if red_commands:
            entries["commands.toml"] = ("file", tomli_w.dumps(
                {"command": red_commands}, multiline_strings=True).encode("utf-8"))
        stats = []
        for real, st in sorted(self.tree.stats.items()):
            row: Dict[str, Any] = {"path": red.apply_path(real), "type": st.type}
            if st.mode is not None:
                row["mode"] = f"{st.mode:04o}"
            for k in ("uid", "gid", "rdev"):
                if getattr(st, k) is not None:
                    row[k] = getattr(st, k)
            stats.append(row)
        if stats:
            entries["stat.toml"] = ("file", tomli_w.dumps({"path": stats}).encode("utf-8"))
        env = {k: red.apply(self.rec.env_data[k]) for k in sorted(self.rec.env_used)
               if k in self.rec.env_data and not SECRET_ENV_RE.search(k)}
        if env:
            entries["environ.toml"] = ("file", tomli_w.dumps({"environ": env}).encode("utf-8"))
        # logs/NAME keeps the log's own name; when the order the probes saw (the --log
        # order) is not the sorted order a snapshot lists logs/ in, names get a 01- prefix
        bases = []
        for name, _text in self.rec.logs_used:
            rel = name[len("logs/"):] if name.startswith("logs/") else os.path.basename(name)
            bases.append(red.apply_path(rel) or "log")
        keep = bases == sorted(bases) and len(set(bases)) == len(bases)
        nlogs = 0
        for i, ((name, text), base) in enumerate(zip(self.rec.logs_used, bases), 1):
            cand = base if keep else f"{i:02d}-{posixpath.basename(base)}"
            self.log_map[name] = "logs/" + cand
            entries["logs/" + cand] = ("file", red.apply(text).encode("utf-8"))
            nlogs += 1
        meta: Dict[str, Any] = {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tool_version": __version__,
            "redacted": bool(red.enabled),
            "note": "npu-doctor capture: what the probes read and ran on this host",
        }
        hostname = _hostname(self.inner)
        if hostname:
            meta["hostname"] = red.apply(hostname)
        if check_meta:
            meta.update({k: v for k, v in check_meta.items() if v})
        if sparse_meta:
            meta["sparse"] = sparse_meta
        if self.rec.denied:
            meta["denied"] = sorted(red.apply_path(p) for p in self.rec.denied)
        if self.left_out:
            meta["left_out"] = [f"{red.apply_path(p)}: {why}" for p, why in sorted(self.left_out.items())]
        entries["snapshot.toml"] = ("file", tomli_w.dumps({"snapshot": meta}).encode("utf-8"))
        kind, target = output_kind(out)
        if kind == "archive":
            _write_tar(target, entries)
        else:
            _write_dir(target, entries)
        return CaptureResult(
            path=out, files=len(self.tree.files), placeholders=len(self.tree.placeholders),
            links=len(self.tree.links), commands=len(red_commands), logs=nlogs,
            left_out=[(red.apply_path(p), w) for p, w in sorted(self.left_out.items())],
            redactions=red.summary())


def output_kind(out: str) -> Tuple[str, str]:
    """("archive", absolute target path) or ("dir", out) for a capture output path.

    `.tar.gz`/`.tgz` -> archive (symlinks followed to the final target; see
    npu_doctor.lock.resolve_output); an existing directory or a path ending in `/` ->
    directory snapshot; anything else raises OutputPathError (one line, exit 2), as does an
    archive path whose target exists and is not a regular file.
    """
    from .lock import OutputPathError, resolve_output

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


def _hostname(host: Host) -> Optional[str]:
    if host.source == "live":
        return socket.gethostname()
    for p in ("/proc/sys/kernel/hostname", "/etc/hostname"):
        try:
            v = host.read_attr(p)
        except Exception:
            v = None
        if v:
            return v
    return None


def seed_redactor(red, host: Host) -> None:
    """Teach the redactor this host's own names: hostname, user name, home directory."""
    if not red.enabled:
        return
    names = set()
    h = _hostname(host)
    if h:
        names.add(h)
    if host.source == "live":
        names.add(os.uname().nodename)
        try:
            names.add(socket.getfqdn())
        except OSError:
            pass
    for n in sorted(names):
        red.add_hostname(n)
    try:
        ident = host.identity()
        red.add_user(ident.user)
    except Exception:
        ident = None
    try:
        env = host.environ()
    except Exception:
        env = {}
    red.add_user(env.get("USER") or env.get("LOGNAME"))
    if env.get("HOME"):
        red.add_home(env["HOME"])
    if host.source == "live" and ident is not None and ident.uid is not None:
        try:
            import pwd

            pw = pwd.getpwuid(ident.uid)
            red.add_user(pw.pw_name)
            red.add_home(pw.pw_dir)
        except (ImportError, KeyError):
            pass
    for user in list(red.maps["user"]):
        red.add_home(f"/home/{user}")


def _write_tar(out: str, entries: Dict[str, Tuple[str, Any]]) -> None:
    """A gzip tar with members 0600/0700, no owner names, written atomically with mode 0600
    (temp file beside the final target of `out`, fsync, os.replace onto that target)."""
    from .lock import resolve_output

    out = resolve_output(out, "capture archive")
    d = os.path.dirname(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=d)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as raw:
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
                    elif isinstance(data, _Sparse):
                        ti.size, ti.mode = data.size, 0o600
                        tf.addfile(ti, io.BufferedReader(data.stream(), 1 << 20))
                    else:
                        ti.size, ti.mode = len(data), 0o600
                        tf.addfile(ti, io.BytesIO(data))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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


# -- comparing a live run with its replay ------------------------------------------------------
def _leaves(tree: Any, prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, list) and tree and all(isinstance(x, dict) for x in tree):
        for i, v in enumerate(tree):
            out.update(_leaves(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = tree
    return out


def normalize_for_replay(facts: Dict[str, Any], red, log_names: Dict[str, str]) -> Dict[str, Any]:
    """What the replay of a capture must give for these live facts: values redacted like the
    capture, --log paths renamed to their `logs/NAME` place in the snapshot."""
    import json

    text = json.dumps(facts, sort_keys=True, ensure_ascii=False)
    for live, snap in sorted(log_names.items(), key=lambda t: -len(t[0])):
        text = text.replace(json.dumps(live)[1:-1], json.dumps(snap)[1:-1])
    return red.value(json.loads(text))


#: Leaves that measure the run itself (time spent by npu-doctor), not the host: never compared.
VOLATILE_RE = re.compile(r"^(?:duration|cpu|elapsed|wall)_(?:ms|s)$")


def compare_runs(live: Dict[str, Any], replay: Dict[str, Any]) -> List[str]:
    """Fact paths whose value differs between two facts trees (sorted, `path: a != b`).

    Timings of the run itself (`*.duration_ms`, `*.cpu_ms`) are not compared. A leaf only the replay has
    is listed as `replay only` (a live probe that used an OS call, such as os.confstr,
    where the snapshot offers a file with more detail).
    """
    a, b = _leaves(live), _leaves(replay)
    out = []
    for k in sorted(set(a) | set(b)):
        if VOLATILE_RE.match(k.rsplit(".", 1)[-1]):
            continue
        if k not in a:
            out.append(f"replay only: {k} = {b[k]!r}")
        elif a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k)!r} != {b.get(k)!r}")
    return out


def finding_keys(findings: Sequence[Any]) -> List[Tuple[str, str, str, str]]:
    return sorted((f.id, f.severity, f.subject, f.message) for f in findings)


@dataclass
class CaptureRun:
    """A capture and its self-check: the live check run through the recorder, the replay of
    the written snapshot, and the differences between them (empty = same facts/findings)."""

    result: CaptureResult
    live: Any
    replay: Any
    fact_diffs: List[str]
    finding_diffs: List[str]


def run_capture(inner: Host, config: Any, out: str, redact: bool = True,
                max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, self_check: bool = True,
                progress=None) -> CaptureRun:
    """Run `check` through a RecordingHost, write the snapshot, replay it and compare.

    Besides the probes, the Python distribution scan of `lock` runs through the recorder,
    and a file kept only in part records its sha256 in snapshot.toml, so `lock --snapshot
    CAPTURE` matches `lock` on the board.
    Raises OutputPathError (before anything runs) for an output path it refuses, OSError
    when the output cannot be written.
    """
    from .check import run_check
    from .host import SnapshotHost
    from .lock import load_spec, scan_python_packages, site_dirs
    from .redact import Redactor

    output_kind(out)   # refuse a bad output before spending a whole check on it
    rec = RecordingHost(inner)
    try:  # an ELF parsed by an earlier run in this process would not be read (nor recorded)
        from .elf import clear_cache

        clear_cache()
    except ImportError:
        pass
    live = run_check(rec, config, progress=progress)
    try:  # what `lock` scans beyond the probes: the SDK Python distributions
        scan_python_packages(rec, load_spec().python_packages)
    except Exception:  # a bonus for `lock --snapshot`; the capture itself must not fail on it
        pass
    red = Redactor(enabled=redact)
    seed_redactor(red, inner)
    writer = CaptureWriter(rec, red, max_file_bytes)
    py_paths = site_dirs(inner) if inner.source == "live" else []
    from .pyenv import interpreters

    # the application environments: their interpreters' answers, dist-info and libraries are
    # in commands.toml and fs/ already; the replay asks the same interpreters
    pythons = [{"path": red.apply_path(p), "origin": origin} for p, origin in interpreters(rec)
               if origin not in ("VIRTUAL_ENV", "CONDA_PREFIX")]
    res = writer.write(out, {"python_paths": [red.apply_path(p) for p in py_paths],
                             "python": pythons})
    fact_diffs: List[str] = []
    finding_diffs: List[str] = []
    replay = None
    if self_check:
        snap = SnapshotHost(out)
        try:
            replay = run_check(snap, config)
        finally:
            snap.close()
        want = normalize_for_replay(live.facts.to_dict(), red, writer.log_map)
        fact_diffs = compare_runs(want, replay.facts.to_dict())
        live_f = sorted((f.id, f.severity, f.subject, f.message) for f in live.findings)
        live_f = [tuple(normalize_for_replay(list(k), red, writer.log_map)) for k in live_f]
        got_f = finding_keys(replay.findings)
        finding_diffs = [f"live only: {k}" for k in live_f if k not in got_f] + \
                        [f"replay only: {k}" for k in got_f if k not in live_f]
    return CaptureRun(res, live, replay, fact_diffs, finding_diffs)


__all__ = ["RecordingHost", "CaptureWriter", "CaptureResult", "seed_redactor", "output_kind",
           "normalize_for_replay", "compare_runs", "run_capture", "CaptureRun",
           "DEFAULT_MAX_FILE_BYTES"]
