"""RecordingHost: a Host that forwards to another and records everything the probes read,
opened, listed, stat()ed and ran, for `npu-doctor capture` (see npu_doctor.capture)."""

from __future__ import annotations

import threading
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Set, Tuple

from ..errors import AccessDenied, HostError
from .base import CommandResult, Host, Identity, StatInfo


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
        if getattr(inner, "reuse_outputs", False):
            inner.reuse_outputs = False  # type: ignore[attr-defined]  # record this moment's runs
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
        #: (name, local path, strict) of the log files read streamed (Host.log_files)
        self.log_paths: Optional[List[Tuple[str, str, bool]]] = None

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

    def log_files(self) -> Optional[List[Tuple[str, str, bool]]]:
        # capture copies these files, streamed (capture.logcopy); a host without files
        # hands over texts (logs_used)
        files = self.inner.log_files()
        with self._lock:
            self.log_paths = list(files) if files is not None else None
        if files is None:
            self.logs()
        return files

    def logs(self) -> List[Tuple[str, str]]:
        got = self.inner.logs()
        with self._lock:
            self.logs_used = list(got)
        return got

    def describe(self) -> Dict[str, str]:
        return self.inner.describe()
