"""The unit as `npu-doctor service install --root DIR` writes it: Type=notify with a watchdog,
every vendor's device nodes allowed, hardened to exposure <= 3.0, and clean under
`systemd-analyze verify`; `service uninstall` removes exactly what install wrote."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import REPO, run_cli


def directives(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out




@pytest.fixture
def installed(tmp_path):
    root = tmp_path / "root"
    res = run_cli("service", "install", "--root", str(root))
    assert res.returncode == 0, res.stderr
    return root, res.stdout


def unit_of(root):
    return root / "etc/systemd/system/npu-doctor.service"


def test_install_prints_what_it_wrote_and_runs_this_interpreter(installed):
    root, out = installed
    wrote = [ln.split()[1] for ln in out.splitlines() if ln.startswith(("wrote ", "created "))]
    # the paths as they are on this machine: under --root
    assert f"{root}/etc/systemd/system/npu-doctor.service" in wrote
    assert f"{root}/etc/udev/rules.d/70-npu-doctor-runtime-pm.rules" in wrote
    assert f"{root}/etc/npu-doctor/npu-doctor.env" in wrote
    for path in wrote:
        assert os.path.exists(path), path
    d = directives(unit_of(root).read_text())
    exec_start = d["ExecStart"][0].split()
    assert exec_start[0] == os.path.abspath(sys.executable) and os.path.isabs(exec_start[0])
    assert exec_start[1:4] == ["-m", "npu_doctor", "watch"]
    assert exec_start[4:6] == ["--textfile-dir", "/var/lib/prometheus/node-exporter"]
    assert d["ReadWritePaths"] == ["/var/lib/prometheus/node-exporter"]
    assert (root / "var/lib/prometheus/node-exporter").is_dir()
    udev = (root / "etc/udev/rules.d/70-npu-doctor-runtime-pm.rules").read_text()
    assert 'ATTR{power/control}="on"' in udev
    for rel in ("etc/systemd/system/npu-doctor.service", "etc/npu-doctor/npu-doctor.env"):
        assert stat.S_IMODE((root / rel).stat().st_mode) == 0o644


def test_unit_is_notify_with_watchdog_and_reload(installed):
    d = directives(unit_of(installed[0]).read_text())
    assert d["Type"] == ["notify"]
    assert d["NotifyAccess"] == ["main"]
    assert d["WatchdogSec"] and d["Restart"] == ["on-failure"]
    assert "-HUP" in d["ExecReload"][0]
    assert d["ProtectHome"] == ["read-only"]
    # what would break the doctor (research/ecosystem.md section 3) stays off
    for forbidden in ("PrivateDevices", "ProtectKernelModules", "ProtectKernelLogs", "ProtectProc"):
        assert forbidden not in d, forbidden


def test_every_vendor_device_node_is_allowed_with_a_reason(installed):
    text = unit_of(installed[0]).read_text()
    d = directives(text)
    allowed = {v.split()[0]: v.split()[1] for v in d["DeviceAllow"]}
    for node in ("char-hailo", "char-hailo1x", "char-nvidia-frontend", "char-nvidia-uvm", "char-nvidia-caps",
                 "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/davinci0", "/dev/davinci15",
                 "char-accel", "char-drm", "char-apex", "/dev/rknpu", "char-usb_device"):
        assert node in allowed, node
    assert allowed["/dev/kmsg"] == "r"
    assert set(allowed.values()) <= {"r", "rw"}   # never m (mknod)
    lines = text.splitlines()
    for i, line in enumerate(lines):   # each group of DeviceAllow lines follows a comment
        if line.startswith("DeviceAllow=") and not lines[i - 1].startswith("DeviceAllow="):
            assert lines[i - 1].startswith("# "), line


def test_install_without_textfile_and_a_path_with_spaces(tmp_path):
    root = tmp_path / "r"
    res = run_cli("service", "install", "--root", str(root), "--textfile-dir", "/srv/node exporter/tf")
    assert res.returncode == 0, res.stderr
    d = directives(unit_of(root).read_text())
    assert '"/srv/node exporter/tf"' in d["ExecStart"][0] and d["ReadWritePaths"] == ['"/srv/node exporter/tf"']
    res = run_cli("service", "install", "--root", str(tmp_path / "r2"), "--no-textfile")
    d = directives(unit_of(tmp_path / "r2").read_text())
    assert "--textfile-dir" not in d["ExecStart"][0] and "ReadWritePaths" not in d
    res = run_cli("service", "install", "--root", str(tmp_path / "r3"), "--textfile-dir", "relative/dir")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "absolute" in res.stderr


def test_uninstall_removes_exactly_what_install_wrote(installed):
    root, _ = installed
    (root / "etc/udev/rules.d/99-other.rules").write_text("# not ours\n")
    cfg = root / "etc/npu-doctor/npu-doctor.env"
    cfg.write_text(cfg.read_text() + "NPU_DOCTOR_WATCH_ARGS=--interval 1\n")   # a site edit
    res = run_cli("service", "uninstall", "--root", str(root))
    assert res.returncode == 0, res.stderr
    assert not unit_of(root).exists()
    assert not (root / "etc/udev/rules.d/70-npu-doctor-runtime-pm.rules").exists()
    assert not (root / "etc/npu-doctor/installed.json").exists()
    assert (root / "etc/udev/rules.d/99-other.rules").exists()
    assert cfg.exists() and f"kept {root}/etc/npu-doctor/npu-doctor.env" in res.stdout
    assert not (root / "var").exists()   # created by install, empty: removed
    assert (root / "etc/udev/rules.d").is_dir() and (root / "etc/npu-doctor").is_dir()
    assert not (root / "etc/systemd").exists()
    again = run_cli("service", "uninstall", "--root", str(root))   # nothing left: fine
    assert again.returncode == 0 and "nothing to remove" in again.stdout, again.stderr


def test_reinstall_keeps_the_site_config(installed):
    root, _ = installed
    cfg = root / "etc/npu-doctor/npu-doctor.env"
    cfg.write_text("NPU_DOCTOR_WATCH_ARGS=--interval 1\n")
    res = run_cli("service", "install", "--root", str(root))
    assert res.returncode == 0 and f"kept {root}/etc/npu-doctor/npu-doctor.env" in res.stdout
    assert cfg.read_text() == "NPU_DOCTOR_WATCH_ARGS=--interval 1\n"
    manifest = json.loads((root / "etc/npu-doctor/installed.json").read_text())
    assert "/var/lib/prometheus/node-exporter" in manifest["dirs"]


def _analyze():
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed (.ci/run installs it)")


def test_systemd_analyze_verify_is_clean(installed):
    _analyze()
    out = subprocess.run(["systemd-analyze", "verify", str(unit_of(installed[0]))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-800:] + out.stderr[-800:]
    assert "npu-doctor.service" not in out.stdout + out.stderr, out.stdout + out.stderr


def test_exposure_is_at_most_3_0(installed):
    _analyze()
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=30",
                          str(unit_of(installed[0]))], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-800:] + out.stderr[-800:]
    level = [ln for ln in out.stdout.splitlines() if "Overall exposure level" in ln]
    assert level, out.stdout[-500:]
    assert float(level[0].split(":")[-1].split()[0]) <= 3.0


def test_unit_and_udev_rule_are_package_data():
    from npu_doctor.deploy.service import data_path

    for name in ("npu-doctor.service.in", "70-npu-doctor-runtime-pm.rules", "npu-doctor.env"):
        p = data_path(name)
        assert os.path.isfile(p) and p.startswith(str(REPO / "npu_doctor")), p
