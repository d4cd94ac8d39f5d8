"""`npu-doctor service install | uninstall`: the systemd unit, the runtime-PM udev rule and a
default config, written from the package data of this installation.

What `install` writes (paths under `root`, "/" by default):
  /etc/systemd/system/npu-doctor.service       ExecStart = this interpreter -m npu_doctor watch
  /etc/udev/rules.d/70-npu-doctor-runtime-pm.rules
  /etc/npu-doctor/npu-doctor.env                site options (kept when it already exists)
  /etc/npu-doctor/installed.json                the manifest `uninstall` reads
and the textfile directory when it does not exist yet. `uninstall` removes exactly what the
manifest lists: a file whose content changed since (an edited config) is kept and named, a
directory only when empty. Every write is atomic (temporary file, then rename).
Errors: ServiceError (one line; the CLI exits 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

#: Debian's prometheus-node-exporter reads this directory (--collector.textfile.directory in
#: /etc/default/prometheus-node-exporter).
DEBIAN_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
UNIT_PATH = "/etc/systemd/system/npu-doctor.service"
UDEV_PATH = "/etc/udev/rules.d/70-npu-doctor-runtime-pm.rules"
CONFIG_PATH = "/etc/npu-doctor/npu-doctor.env"
MANIFEST_PATH = "/etc/npu-doctor/installed.json"
#: /dev/davinciN nodes allowed in the unit: Atlas 800/900 servers carry up to 16 chips.
ASCEND_CHIPS = 16


class ServiceError(Exception):
    """A one-line reason the install or uninstall could not be done."""


def data_path(name: str) -> str:
    """Absolute path of a file shipped in npu_doctor/deploy/systemd/ (package data)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "systemd", name)


def _read(name: str) -> str:
    with open(data_path(name), encoding="utf-8") as f:
        return f.read()


def _quote(arg: str) -> str:
    """Quote one ExecStart argument for systemd (C-style double quotes; % and $ escaped)."""
    out = arg.replace("%", "%%").replace("$", "$$")
    if out and not any(c in out for c in " \t\"'\\;"):
        return out
    return '"' + out.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_unit(python: str, textfile_dir: Optional[str], config: str = CONFIG_PATH) -> str:
    """The unit text for interpreter `python` (absolute) and metrics into `textfile_dir`
    (None: no metrics)."""
    argv = [python, "-m", "npu_doctor", "watch"]
    if textfile_dir:
        argv += ["--textfile-dir", textfile_dir]
    # $NPU_DOCTOR_WATCH_ARGS unquoted: systemd splits it into words (EnvironmentFile)
    execstart = " ".join(_quote(a) for a in argv) + " $NPU_DOCTOR_WATCH_ARGS"
    rw = (f"# node_exporter's textfile collector directory (the .prom file is renamed into it)\n"
          f"ReadWritePaths={_quote(textfile_dir)}") if textfile_dir else "# no textfile directory"
    chips = "\n".join(f"DeviceAllow=/dev/davinci{i} rw" for i in range(ASCEND_CHIPS))
    text = _read("npu-doctor.service.in")
    for key, value in (("@EXECSTART@", execstart), ("@CONFIG@", config), ("@READWRITE@", rw),
                       ("@ASCEND_CHIPS@", chips)):
        text = text.replace(key, value)
    return text


@dataclass
class Action:
    path: str          # absolute path on the target system (without root)
    what: str          # "wrote", "kept", "created", "removed", ...
    note: str = ""


@dataclass
class Plan:
    actions: List[Action] = field(default_factory=list)

    def add(self, path: str, what: str, note: str = "") -> None:
        self.actions.append(Action(path, what, note))

    def lines(self, root: str = "/") -> List[str]:
        """One line per action; paths as they are on this machine (under `root`)."""
        def shown(p: str) -> str:
            return _under(root, p) if p.startswith("/") and os.path.abspath(root) != "/" else p
        return [f"{a.what} {shown(a.path)}" + (f" ({a.note})" if a.note else "") for a in self.actions]


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _sha(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def _makedirs(root: str, path: str, made: Optional[List[str]] = None) -> None:
    """Create the missing directories of `path` (a path on the target, without root) under
    root, mode 0755, recording each one created in `made` (target paths, outermost first);
    root itself is never recorded (uninstall must not remove it)."""
    missing = []
    d = os.path.normpath(path)
    while d not in ("/", "") and not os.path.isdir(_under(root, d)):
        missing.append(d)
        d = os.path.dirname(d)
    os.makedirs(root, exist_ok=True)
    for d in reversed(missing):
        os.mkdir(_under(root, d), 0o755)
        os.chmod(_under(root, d), 0o755)
        if made is not None and d not in made:
            made.append(d)


def _atomic_write(path: str, data: bytes, mode: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)   # not subject to the umask
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def install(root: str = "/", textfile_dir: Optional[str] = DEBIAN_TEXTFILE_DIR,
            python: Optional[str] = None, daemon_reload: bool = False) -> Plan:
    """Write unit, udev rule, default config and manifest under `root`. Raises ServiceError."""
    python = os.path.abspath(python or sys.executable)
    if textfile_dir is not None and not os.path.isabs(textfile_dir):
        raise ServiceError(f"--textfile-dir {textfile_dir}: give an absolute path")
    plan = Plan()
    manifest: Dict[str, object] = {"python": python, "files": {}, "dirs": []}
    files: Dict[str, str] = manifest["files"]  # type: ignore[assignment]
    dirs: List[str] = manifest["dirs"]  # type: ignore[assignment]
    try:
        if textfile_dir and not os.path.isdir(_under(root, textfile_dir)):
            _makedirs(root, textfile_dir, dirs)
            plan.add(textfile_dir, "created", "directory for node_exporter's textfile collector")
        for path in (UNIT_PATH, UDEV_PATH, CONFIG_PATH, MANIFEST_PATH):
            _makedirs(root, os.path.dirname(path), dirs)   # uninstall removes them when empty
        for path, data, mode, what in (
                (UNIT_PATH, render_unit(python, textfile_dir), 0o644, "systemd unit"),
                (UDEV_PATH, _read("70-npu-doctor-runtime-pm.rules"), 0o644, "udev rule: accelerators stay out of runtime suspend")):
            raw = data.encode("utf-8")
            _atomic_write(_under(root, path), raw, mode)
            files[path] = _sha(raw)
            plan.add(path, "wrote", what)
        cfg = _under(root, CONFIG_PATH)
        if os.path.exists(cfg):
            plan.add(CONFIG_PATH, "kept", "already present; not overwritten")
        else:
            raw = _read("npu-doctor.env").encode("utf-8")
            _atomic_write(cfg, raw, 0o644)
            files[CONFIG_PATH] = _sha(raw)
            plan.add(CONFIG_PATH, "wrote", "site options for watch")
        old = _load_manifest(root)
        if old:  # keep what an earlier install created and this one found in place
            for p, h in old.get("files", {}).items():
                files.setdefault(p, h)
            for d in old.get("dirs", []):
                if d not in dirs:
                    dirs.insert(0, d)
        _atomic_write(_under(root, MANIFEST_PATH), (json.dumps(manifest, indent=2) + "\n").encode(), 0o644)
        plan.add(MANIFEST_PATH, "wrote", "what `npu-doctor service uninstall` removes")
    except OSError as e:
        raise ServiceError(f"{e.filename or root}: {e.strerror}") from None
    if daemon_reload:
        _systemctl(plan, root, ["daemon-reload"])
    return plan


def _load_manifest(root: str) -> Optional[Dict]:
    try:
        with open(_under(root, MANIFEST_PATH), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ServiceError(f"{MANIFEST_PATH}: unreadable ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ServiceError(f"{MANIFEST_PATH}: not an npu-doctor install manifest")
    return data


def uninstall(root: str = "/", daemon_reload: bool = False) -> Plan:
    """Remove what the manifest lists, then the directories install created once empty.
    Without a manifest (never installed, removed already) the plan says nothing to remove.
    Raises ServiceError for an unreadable manifest or a failed removal."""
    manifest = _load_manifest(root)
    plan = Plan()
    if manifest is None:   # never installed, or uninstalled already: nothing to do is success
        plan.add(MANIFEST_PATH, "nothing to remove:", "no install manifest, so nothing "
                 "`npu-doctor service install` wrote is left")
        return plan
    try:
        for path, digest in manifest["files"].items():
            full = _under(root, path)
            if not os.path.exists(full):
                plan.add(path, "already gone")
                continue
            with open(full, "rb") as f:
                if _sha(f.read()) != digest:
                    plan.add(path, "kept", "changed since install; remove it yourself")
                    continue
            os.unlink(full)
            plan.add(path, "removed")
        os.unlink(_under(root, MANIFEST_PATH))
        plan.add(MANIFEST_PATH, "removed")
        for d in sorted(set(manifest.get("dirs", [])) | {os.path.dirname(MANIFEST_PATH)}, key=len, reverse=True):
            if os.path.normpath(d) in ("/", "."):
                continue   # "/." from installs before 0.1.1: never the root itself
            full = _under(root, d)
            if os.path.isdir(full) and not os.listdir(full):
                os.rmdir(full)
                plan.add(d, "removed", "empty directory")
    except OSError as e:
        raise ServiceError(f"{e.filename or root}: {e.strerror}") from None
    if daemon_reload:
        _systemctl(plan, root, ["daemon-reload"])
    return plan


def _systemctl(plan: Plan, root: str, args: List[str]) -> None:
    if os.path.abspath(root) != "/":
        raise ServiceError("--daemon-reload talks to this system's systemd; it cannot go with --root")
    argv = ["systemctl"] + args
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ServiceError(f"{' '.join(argv)}: {e}") from None
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise ServiceError(f"{' '.join(argv)} failed: {msg[-1] if msg else 'exit %d' % res.returncode}")
    plan.add("systemctl " + " ".join(args), "ran")
