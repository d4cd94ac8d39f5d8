"""SnapshotHost: a snapshot read as if it were the machine it was captured on."""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
import time
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from ..errors import AccessDenied, CommandNotFound, HostError, NotFound, SnapshotError
from .base import (READ_CAP_BYTES, CommandResult, Host, Identity, StatInfo, cap_text, keeps_newest,
                   mode_allows, parse_cap_eff, parse_id_output)
from .logfile import decode_log
from .snapshotfiles import command_entries, stat_entries
from ..safeio import CAP_SNAPSHOT_META, NotRegularFile, loads_toml, open_regular, read_regular, special_kind
from ..lazyregex import lazy

# A symlink checked out by git with core.symlinks=false (or copied by a tool that does not keep
# links) becomes a small file holding the target and no newline. sysfs is full of links, so a
# snapshot treats such a file as the link it was.
_LINK_STUB_RE = lazy(r"^(?:\.\.?/|/)?[\w.:+@,-]+(?:/[\w.:+@,-]+)*/?$")


class SnapshotHost(Host):
    """A snapshot directory or `.tar.gz` (docs/architecture.md, "Contract: snapshot format").

    Files are read afresh at every access so a test can change them while a watch runs.
    Raises SnapshotError when the snapshot is missing or unreadable.
    """

    source = "snapshot"

    def __init__(self, path: str, extra_logs: Sequence[str] = ()) -> None:
        self.path, self.extra_logs = path, list(extra_logs)
        self._tmp: Optional[Any] = None  # a tempfile.TemporaryDirectory for an archive
        self._stub_cache: Dict[str, Tuple[Tuple[int, int], Optional[str]]] = {}
        if not os.path.exists(path):
            raise SnapshotError(f"snapshot {path}: no such file or directory")
        if os.path.isdir(path):
            self.root = os.path.abspath(path)
        else:
            from .archive import extract_archive, is_tarfile  # tarfile: only for an archive

            try:  # a FIFO or a device would be read for ever
                kind = special_kind(path)
            except OSError as e:
                raise SnapshotError(f"snapshot {path}: {e.strerror or e}") from None
            if kind is not None:
                raise SnapshotError(f"snapshot {path}: neither a directory nor a .tar.gz archive (a {kind})")

            if not (path.endswith((".tar.gz", ".tgz", ".tar")) or is_tarfile(path)):
                raise SnapshotError(f"snapshot {path}: neither a directory nor a .tar.gz archive")
            self._tmp, self.root = extract_archive(path)
        self.fs = os.path.join(self.root, "fs")
        self.log_dir = os.path.join(self.root, "logs")  # streamed by Host.log_files
        for sub in ("fs", "logs"):
            if os.path.islink(os.path.join(self.root, sub)):
                raise SnapshotError(f"snapshot {path}: {sub} is a symlink (refused: every file "
                                    "of a snapshot must be inside it)")
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
        if not os.path.lexists(p):
            return None
        if os.path.islink(p):
            raise SnapshotError(f"snapshot {self.path}: {name} is a symlink (refused: every file "
                                "of a snapshot must be inside it)")
        try:
            return loads_toml(read_regular(p, CAP_SNAPSHOT_META, follow=False,
                                           single_link=True).decode("utf-8"))
        except OSError as e:
            raise SnapshotError(f"snapshot {self.path}: {name}: {e.strerror or e}") from None
        except (ValueError, UnicodeDecodeError) as e:  # tomllib.TOMLDecodeError is a ValueError
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SnapshotError(f"snapshot {self.path}: {name}: {msg}") from None

    def snapshot_meta(self) -> Dict[str, Any]:
        """The `[snapshot]` table of snapshot.toml; {} when absent or unreadable (the
        metadata is optional in the contract)."""
        try:
            meta = (self._toml("snapshot.toml") or {}).get("snapshot", {})
        except SnapshotError:
            return {}
        return meta if isinstance(meta, dict) else {}

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

    def _open_local(self, path: str) -> int:
        """An fd on the regular file a host path resolves to inside fs/. A FIFO, device,
        directory, symlink left unresolved or hard-linked file is refused (HostError), so a
        snapshot can neither hang a read nor show a file from outside it."""
        self._check_denied(path)
        local = self._local(path)
        try:
            return open_regular(local, follow=False, single_link=True)
        except FileNotFoundError:
            raise NotFound(path, "no such file") from None
        except PermissionError:
            raise AccessDenied(path, "permission denied") from None
        except NotRegularFile as e:
            raise HostError(path, "is a directory" if "directory" in e.strerror else e.strerror) from None
        except OSError as e:
            raise HostError(path, e.strerror or str(e)) from None

    def read_bytes(self, path: str, max_bytes: int = READ_CAP_BYTES) -> bytes:
        fd = self._open_local(path)
        try:
            with os.fdopen(fd, "rb") as f:
                return f.read(max_bytes)
        except OSError as e:
            raise HostError(path, e.strerror or str(e)) from None

    def open_binary(self, path: str) -> BinaryIO:
        return os.fdopen(self._open_local(path), "rb")

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
        out = stat_entries(self._toml("stat.toml") or {}, f"snapshot {self.path}: stat.toml")
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
        cmds = command_entries(self._toml("commands.toml") or {}, f"snapshot {self.path}: commands.toml")
        self._commands_cache = (mtime, cmds)
        return cmds

    def may_block(self) -> bool:  # only a command recorded as hung waits
        return any(c.get("timed_out") or c.get("sleep_s") for c in self._commands())

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult:
        argv = [str(a) for a in argv]
        for c in self._commands():
            if [str(a) for a in c["argv"]] == argv:
                timed_out = bool(c.get("timed_out", False))
                if timed_out:
                    # A command that hung costs its timeout, as on the board.
                    time.sleep(min(timeout, float(c.get("sleep_s", timeout))))
                # the live cap, and what the capture already cut (`cut = {stdout = BYTES}`)
                newest = keeps_newest(argv)
                out, n_out = cap_text(str(c.get("stdout", "")), newest)
                err, n_err = cap_text(str(c.get("stderr", "")), newest)
                cut = {k: n for k, n in (("stdout", n_out), ("stderr", n_err)) if n}
                for k, n in (c.get("cut") or {}).items():
                    cut[k] = max(n, cut.get(k, 0))
                return CommandResult(
                    argv=argv,
                    returncode=None if timed_out else int(c.get("returncode", 0)),
                    stdout=out,
                    stderr=err,
                    timed_out=timed_out,
                    source="$ " + " ".join(argv),
                    cut=cut,
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
        cap_eff = None
        if ident.uid == 0:  # root without CAP_DAC_OVERRIDE is held to the mode
            try:
                cap_eff = parse_cap_eff(self.read_text("/proc/self/status", 65536))
            except HostError:
                cap_eff = None
        return mode_allows(st, ident, write, cap_eff)

    def logs(self) -> List[Tuple[str, str]]:
        out = []
        logdir = os.path.join(self.root, "logs")
        if os.path.isdir(logdir):
            for dirpath, _dirs, files in os.walk(logdir):
                for name in sorted(files):
                    p = os.path.join(dirpath, name)
                    try:  # regular files only: a link out of the snapshot or a FIFO is skipped
                        text = decode_log(read_regular(p, 0, follow=False, single_link=True,
                                                       limit=READ_CAP_BYTES))
                    except OSError:
                        continue
                    out.append(("logs/" + os.path.relpath(p, logdir), text))
        for p in self.extra_logs:
            try:
                out.append((p, decode_log(read_regular(p, 0, limit=READ_CAP_BYTES))))
            except OSError as e:
                raise HostError(p, e.strerror or str(e)) from None
        return sorted(out)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp, tmp = None, self._tmp
            tmp.cleanup()

