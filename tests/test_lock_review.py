"""The lockfile as a reviewable manifest (issue 11): hand edits are drift, not errors;
`lock --update` and `verify --accept` rewrite only what changed; only accelerator-relevant
kernel modules are pinned; --skip-path vs --ignore; a killed `lock -o` leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_doctor.host import SnapshotHost
from npu_doctor.lock.modules import accelerator_modules
from npu_doctor.tomlcompat import tomllib

from conftest import copy_case, run_cli
from test_lock import DRIVER_FILE, lock, verify_json, write

pytestmark = pytest.mark.cases

# /proc/modules of an x86 VM with an AMD XDNA NPU (amdxdna and the DRM helpers it uses) and
# the usual VM networking modules; format `name size refcount users state address`.
PROC_MODULES = """\
amdxdna 167936 0 - Live 0x0000000000000000
gpu_sched 61440 1 amdxdna, Live 0x0000000000000000
drm_shmem_helper 24576 1 amdxdna, Live 0x0000000000000000
drm 770048 4 amdxdna,gpu_sched,drm_shmem_helper, Live 0x0000000000000000
vxlan 131072 0 - Live 0x0000000000000000
ip6_udp_tunnel 16384 1 vxlan, Live 0x0000000000000000
bridge 421888 0 - Live 0x0000000000000000
stp 12288 1 bridge, Live 0x0000000000000000
tcp_cubic 16384 0 - Live 0x0000000000000000
"""
# MODULE_VERSION of those that have one (drivers/net/vxlan/vxlan_core.c "0.1",
# net/bridge/br.c BR_VERSION "2.3", net/ipv4/tcp_cubic.c "2.3")
MODULE_VERSIONS = {"vxlan": "0.1", "bridge": "2.3", "tcp_cubic": "2.3"}


@pytest.fixture
def k05(tmp_path):
    return copy_case("k05-rk3588-healthy", tmp_path / "k05")


def _vm(snap: Path) -> Path:
    write(snap / "fs/proc/modules", PROC_MODULES)
    for mod, ver in MODULE_VERSIONS.items():
        write(snap / f"fs/sys/module/{mod}/version", ver + "\n")
    return snap


def test_missing_digest_line_is_no_digest_not_an_error(k05, tmp_path):
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    lf.write_text("".join(ln for ln in lf.read_text().splitlines(True) if not ln.startswith("digest")))
    rc, report = verify_json(lf, k05)
    assert rc == 0
    [f] = report["findings"]
    assert f["severity"] == "info" and "no digest" in f["message"]


def test_update_rewrites_only_the_changed_pins_and_prints_the_diff(k05, tmp_path):
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    before = lf.read_text()
    write(k05 / DRIVER_FILE, "RKNPU driver: v0.9.6\n")
    proc = run_cli("lock", "--snapshot", str(k05), "-o", str(lf), "--update")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        '- accelerators."rknpu@/sys/devices/platform/fdab0000.npu".driver.version = "0.9.8"',
        '+ accelerators."rknpu@/sys/devices/platform/fdab0000.npu".driver.version = "0.9.6"',
        '- drivers.rknpu.version = "0.9.8"',
        '+ drivers.rknpu.version = "0.9.6"',
    ]
    assert "updated 2 pins" in proc.stderr
    old, new = before.splitlines(), lf.read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert len(old) == len(new) and len(changed) == 3        # two versions and the digest
    assert run_cli("verify", str(lf), "--snapshot", str(k05)).returncode == 0
    again = run_cli("lock", "--snapshot", str(k05), "-o", str(lf), "--update")
    assert again.stdout == "" and "no pin changed" in again.stderr


def test_accept_records_an_intended_change(k05, tmp_path):
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    write(k05 / DRIVER_FILE, "RKNPU driver: v0.9.6\n")
    write(k05 / "fs/sys/devices/platform/fdab0000.npu/power/control", "auto\n")
    proc = run_cli("verify", str(lf), "--snapshot", str(k05), "--accept", "drivers.rknpu",
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr       # the tunable left is a warning
    assert "accepted 2 changes" in proc.stderr and '+ drivers.rknpu.version = "0.9.6"' in proc.stderr
    report = json.loads(proc.stdout)
    assert [f["subject"].rsplit(".", 2)[-2:] for f in report["findings"]] == [["power", "control"]]
    data = tomllib.loads(lf.read_text())
    assert data["drivers"]["rknpu"]["version"] == "0.9.6"
    # digest renewed: no "edited since written"
    assert "lock.digest" not in {f["subject"] for f in report["findings"]}
    none = run_cli("verify", str(lf), "--snapshot", str(k05), "--accept", "drivers.rknpu")
    assert "nothing to accept" in none.stderr


def test_only_accelerator_modules_are_pinned(k05, tmp_path):
    _vm(k05)
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    drivers = tomllib.loads(lf.read_text())["drivers"]
    assert sorted(drivers) == ["rknpu"], drivers
    # a vxlan update is not a drift
    write(k05 / "fs/sys/module/vxlan/version", "0.2\n")
    rc, report = verify_json(lf, k05)
    assert rc == 0 and report["findings"] == []
    # ... unless the lockspec asks for it
    spec = tmp_path / "lockspec.toml"
    from npu_doctor.lock import default_spec_path

    spec.write_text(Path(default_spec_path()).read_text().replace("also = []", 'also = ["vxlan"]'))
    lock(k05, lf, "--lockspec", str(spec))
    assert sorted(tomllib.loads(lf.read_text())["drivers"]) == ["rknpu", "vxlan"]


def test_module_dependencies_of_an_accelerator_driver_are_kept(tmp_path):
    snap = _vm(tmp_path / "vm")
    host = SnapshotHost(str(snap))
    keep = accelerator_modules({"drivers": {}}, host)
    assert {"amdxdna", "gpu_sched", "drm_shmem_helper", "drm"} <= keep
    assert not {"vxlan", "bridge", "stp", "tcp_cubic", "ip6_udp_tunnel"} & keep


def test_ignore_takes_rule_ids_and_skip_path_lock_paths(k05, tmp_path):
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    write(k05 / DRIVER_FILE, "RKNPU driver: v0.9.6\n")
    proc = run_cli("verify", str(lf), "--snapshot", str(k05), "--ignore", "drivers.rknpu")
    assert proc.returncode == 2 and "--skip-path" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert run_cli("verify", str(lf), "--snapshot", str(k05), "--ignore", "lock-*").returncode == 0
    assert run_cli("verify", str(lf), "--snapshot", str(k05), "--skip-path", "drivers",
                   "--skip-path", "accelerators.*.driver").returncode == 0


def test_leftover_temp_files_of_a_killed_lock_are_cleaned(k05, tmp_path):
    lf = tmp_path / "npu-env.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / f".npu-env.lock.{dead.pid}-k1ll3d.tmp"
        busy = tmp_path / f".npu-env.lock.{alive.pid}-wr1t1ng.tmp"
        other = tmp_path / ".other.lock.1-x.tmp"
        for p in (stale, busy, other):
            p.write_text("partial")
        lock(k05, lf)
        assert not stale.exists()
        assert busy.exists() and other.exists()     # a running writer's, another file's
    finally:
        alive.kill()
        alive.wait()
