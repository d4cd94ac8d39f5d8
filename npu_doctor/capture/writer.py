"""CaptureWriter: turns a RecordingHost's record into snapshot entries and writes them."""

from __future__ import annotations

import os
import posixpath
import time
from typing import Any, Dict, List, Optional, Tuple

from .. import __version__
from ..errors import HostError

from ..host.recording import RecordingHost
from .names import _hostname
from .output import _write_dir, _write_tar, output_kind
from .tree import CaptureResult, _merge_ranges, _safe_target, _Sparse, _Tree
from ..lazyregex import lazy

DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
SECRET_ENV_RE = lazy(r"(?i)TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION")
MAX_LINK_HOPS = 40


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
        #: the log files copied (capture.logcopy), in RecordingHost.log_paths order
        self.spooled: List[Any] = []
        self._spool = self._out_dir = ""

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
        """Lay out the snapshot under the writer's tree from what the recorder saw: whole files
        copied, ranged reads kept sparse (size and sha256 recorded), symlinks kept; a path that
        cannot be laid out goes to `left_out` with the reason. Raises OSError from the output."""
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
            if res.cut:  # the replay reports the cut as the live run did
                d["cut"] = dict(sorted(res.cut.items()))
            out.append(d)
        ident = self._identity_command()
        if ident:
            out.append(ident)
        return out

    def _learn(self, commands: List[Dict[str, Any]]) -> None:
        """First pass of redaction: learn every value from everything that will be written."""
        red = self.red
        for real, data in sorted(self.tree.files.items()):
            from ..redact import is_text

            if isinstance(data, bytes) and is_text(data):
                red.scan(data.decode("utf-8"), real)
        for c in commands:
            red.scan(" ".join(c["argv"]))
            red.scan(c["stdout"])
            red.scan(c["stderr"])
        for _name, text in self.rec.logs_used:
            red.scan(text)
        self._spool_logs()
        for k in sorted(self.rec.env_used):
            if k in self.rec.env_data:
                red.scan(f"{k}={self.rec.env_data[k]}")

    def _spool_logs(self) -> None:
        """Copy the log files the probes read (RecordingHost.log_paths) into spool files,
        streamed (capture.logcopy), the redactor learning them as they go. A log that cannot
        be read is left out (listed)."""
        from ..errors import HostError
        from .logcopy import log_limit, spool_log

        for i, (name, path, strict) in enumerate(self.rec.log_paths or []):
            limit, why = log_limit([self._spool, self._out_dir])
            try:
                self.spooled.append(spool_log(name, path, strict,
                                              os.path.join(self._spool, f"{i:04d}.log"),
                                              limit, why, self.red.scan))
            except HostError as e:
                self.left_out[name] = f"unreadable: {e.reason or e}"
            except OSError as e:  # reading it failed half-way: what was read is not kept
                self.left_out[name] = f"unreadable: {e.strerror or e}"

    def write(self, out: str, check_meta: Optional[Dict[str, Any]] = None) -> CaptureResult:
        """Write the snapshot to `out`: an archive or a directory, as `output_kind` decides.
        Raises OutputPathError for an output it refuses, OSError when writing fails."""
        import shutil

        from .logcopy import spool_dir

        self._spool = spool_dir(out)
        self._out_dir = os.path.dirname(os.path.abspath(out.rstrip("/") or out)) or "."
        try:
            return self._write(out, check_meta)
        finally:
            shutil.rmtree(self._spool, ignore_errors=True)

    def _write(self, out: str, check_meta: Optional[Dict[str, Any]]) -> CaptureResult:
        import tomli_w

        from ..redact import is_text
        from .logcopy import redact_spool, truncated_record

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
                "stdout": red.apply(c["stdout"]), "stderr": red.apply(c["stderr"]),
                **({"cut": c["cut"]} if "cut" in c else {})})
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
        logs: List[Tuple[str, Any]] = list(self.rec.logs_used) + \
            [(sp.name, sp) for sp in self.spooled]
        bases = []
        for name, _text in logs:
            rel = name[len("logs/"):] if name.startswith("logs/") else os.path.basename(name)
            bases.append(red.apply_path(rel) or "log")
        keep = bases == sorted(bases) and len(set(bases)) == len(bases)
        nlogs = 0
        truncated: List[Dict[str, Any]] = []
        for i, ((name, text), base) in enumerate(zip(logs, bases), 1):
            cand = base if keep else f"{i:02d}-{posixpath.basename(base)}"
            self.log_map[name] = "logs/" + cand
            if isinstance(text, str):  # a host that hands over texts only
                entries["logs/" + cand] = ("file", red.apply(text).encode("utf-8"))
            else:
                redact_spool(text, red)
                entries["logs/" + cand] = ("spool", text.spool)
                text.name = "logs/" + cand
                truncated += truncated_record(text) or self._cut_before(name, text.name)
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
        if truncated:
            meta["truncated"] = truncated
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
            redactions=red.summary(), truncated=[r["message"] for r in truncated])

    def _cut_before(self, name: str, snap_name: str) -> List[Dict[str, Any]]:
        """A log of a snapshot being captured again that was cut when first captured: its
        record, under its new name."""
        from ..truncation import from_snapshot

        base: Any = self.inner
        while getattr(base, "inner", None) is not None:  # a RecordingHost inside
            base = base.inner
        out = []
        for r in from_snapshot(base.snapshot_meta()):
            if r["source"] == name and r["what"] == "log":
                r["message"] = r["message"].replace(name, snap_name, 1)
                out.append(dict(r, source=snap_name))
        return out
