"""Host: the only code that touches the machine (the interface and its value types).

`LiveHost` (host.live) reads `/` and runs real commands; `SnapshotHost` (host.snapshot) reads
a snapshot directory or `.tar.gz` in the contract format (docs/architecture.md, "Contract: snapshot
format"); `RecordingHost` (host.recording) wraps either and records what was read for
`capture`. Probes, rules and tests go through this interface only, so the same code runs on a
board, in CI and on a laptop replaying a capture.

Paths given to a Host are absolute host paths (`/sys/class/thermal`), never snapshot paths.
Errors are the typed `HostError`s of `npu_doctor.errors`.
"""

from __future__ import annotations

import io
import posixpath
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from ..errors import HostError
from ..lazyregex import lazy
from ..namematch import filter_names

#: Largest command output kept, per stream (bytes). A vendor tool that floods stdout is cut,
#: and says so (CommandResult.cut): the first OUTPUT_CAP_BYTES are kept, but of a kernel log
#: (`dmesg`, `journalctl`: newest messages last) the last OUTPUT_CAP_BYTES, since what went
#: wrong with the device is most often what happened last (an old boot's noise is dropped).
#: Either way the cut falls on a line boundary, so no half line is parsed.
OUTPUT_CAP_BYTES = 4 * 1024 * 1024
#: Commands whose output is a log with the newest lines last (their last bytes are kept).
NEWEST_LAST = frozenset({"dmesg", "journalctl"})
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
    #: streams cut at OUTPUT_CAP_BYTES: {"stdout": bytes the command wrote, ...}; empty when
    #: the output is whole. Which end was kept: keeps_newest(argv).
    cut: Dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def keeps_newest(argv: Sequence[str]) -> bool:
    """Whether a cut output of argv keeps its last bytes (a log, newest last: NEWEST_LAST)
    rather than its first."""
    return bool(argv) and posixpath.basename(str(argv[0])) in NEWEST_LAST


def cap_output(data: bytes, newest: bool, cap: int = OUTPUT_CAP_BYTES) -> bytes:
    """`data` cut to at most `cap` bytes on a line boundary: its last lines when `newest`,
    else its first (data no longer than cap is returned as it is)."""
    if len(data) <= cap:
        return data
    if newest:
        part = data[len(data) - cap:]
        nl = part.find(b"\n")
        return part[nl + 1:] if 0 <= nl < len(part) - 1 else part
    part = data[:cap]
    nl = part.rfind(b"\n")
    return part[:nl + 1] if nl > 0 else part


def cap_text(text: str, newest: bool, cap: int = OUTPUT_CAP_BYTES) -> Tuple[str, int]:
    """(text cut as cap_output cuts its UTF-8 bytes, bytes it had) — (text, 0) when whole.
    For command output recorded as text (a snapshot's commands.toml)."""
    if len(text) <= cap // 4:  # 4 bytes a character at most: whole, without encoding it
        return text, 0
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= cap:
        return text, 0
    return cap_output(data, newest, cap).decode("utf-8", "replace"), len(data)


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


_ID_RE = lazy(r"(uid|gid|groups)=([^ ]+)")
_ID_ITEM_RE = lazy(r"(\d+)(?:\(([^)]*)\))?")


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

    def may_block(self) -> bool:
        """Whether a read or command can wait on something outside this process (a tool, a
        device, a hung command): then probes run in threads, each with its timeout. A host
        that only reads files of its own (a snapshot without a hung command) runs them one
        after another, which is faster than threads taking turns on the GIL."""
        return True

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

    def log_files(self) -> Optional[List[Tuple[str, str, bool]]]:
        """The same logs as (source name, local file path, strict), for reading them streamed
        (any size: host.logstream; strict: no symlink, one hard link, as for a snapshot's
        `log_dir`); None when this host only offers `logs()` (no `extra_logs`)."""
        if not hasattr(self, "extra_logs"):
            return None
        from .logstream import log_file_list

        return log_file_list(getattr(self, "log_dir", None), getattr(self, "extra_logs"))

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

    def glob(self, pattern: str, listings: Optional[Dict[str, List[str]]] = None) -> List[str]:
        """Absolute host paths matching a shell pattern (`*`, `?`, `[..]` per component).
        `listings` ({dir: names}, filled as it goes) lets many patterns over the same
        directories list each once (ten SDK globs in /usr/lib/x86_64-linux-gnu)."""
        parts = [p for p in pattern.split("/") if p]
        found = ["/"]
        for part in parts:
            nxt = []
            magic = any(c in part for c in "*?[")
            for base in found:
                if magic:
                    names = listings.get(base) if listings is not None else None
                    if names is None:
                        try:
                            names = self.listdir(base)
                        except HostError:
                            names = []
                        if listings is not None:
                            listings[base] = names
                    # listdir's names are sorted (its contract): no O(n) check per pattern
                    nxt.extend(posixpath.join(base, n) for n in filter_names(names, part, True)
                               if not n.startswith(".") or part.startswith("."))
                else:
                    cand = posixpath.join(base, part)
                    if self.exists(cand):
                        nxt.append(cand)
            found = nxt
            if not found:
                break
        return sorted(found)

    def snapshot_meta(self) -> Dict[str, Any]:
        """The `[snapshot]` table of a snapshot's snapshot.toml (created, tool_version,
        python_paths, sparse, denied, ...); {} for a live host or a snapshot without one."""
        return {}

    def describe(self) -> Dict[str, str]:
        return {"source": self.source, "path": self.path}



#: Capability bits (include/uapi/linux/capability.h) that let root ignore a file's mode.
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2

_CAP_EFF_RE = lazy(r"(?m)^CapEff:\s*([0-9a-fA-F]+)\s*$")


def parse_cap_eff(status_text: str) -> Optional[int]:
    """The effective capability mask from /proc/<pid>/status (`CapEff:\t0000003fffffffff`);
    None when the line is absent. Source: fs/proc/array.c render_cap_t()."""
    m = _CAP_EFF_RE.search(status_text or "")
    return int(m.group(1), 16) if m else None


def mode_allows(st: StatInfo, ident: Identity, write: bool = True,
                cap_eff: Optional[int] = None) -> bool:
    """Whether Unix permission bits let this identity open the node.

    Root passes through CAP_DAC_OVERRIDE (reads also through CAP_DAC_READ_SEARCH), not through
    its uid: with `cap_eff` (the effective capability mask) known and those bits clear (a
    container started with `--cap-drop ALL`, a pod with `capabilities: drop: [ALL]`), root is
    held to the mode like any other user. `cap_eff` None (unknown) keeps root allowed."""
    if ident.uid == 0:
        if cap_eff is None or cap_eff >> CAP_DAC_OVERRIDE & 1:
            return True
        if not write and cap_eff >> CAP_DAC_READ_SEARCH & 1:
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

