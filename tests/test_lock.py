"""`npu-doctor lock` / `verify` on real board cases: determinism, drift, bad lockfiles, crashes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npu_doctor.cli.common import plural
from npu_doctor.lock import (check_arch, diff, display_path, load_spec,
                             parse_ignore, read_lockfile)
from npu_doctor.tomlcompat import tomllib

from conftest import REPO, copy_case, run_cli, run_cli_subprocess

DRIVER_FILE = "fs/sys/kernel/debug/rknpu/version"
CONTROL_FILE = "fs/sys/devices/platform/fdab0000.npu/power/control"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_text(text)


def lock(snapshot, out, *extra, env=None):
    proc = run_cli("lock", "--snapshot", str(snapshot), "-o", str(out), *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def verify_json(lockfile, snapshot, *extra):
    proc = run_cli("verify", str(lockfile), "--snapshot", str(snapshot), "--format", "json", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def k05(tmp_path):
    return copy_case("k05-rk3588-healthy", tmp_path / "k05")


def test_lock_pins_the_case_and_is_byte_identical(k05, tmp_path):
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    lock(k05, a)
    lock(k05, b)
    assert a.read_bytes() == b.read_bytes()
    data = tomllib.loads(a.read_text())
    assert data["lock"]["schema"] == "npu-doctor/lock/v1"
    assert data["drivers"]["rknpu"]["version"] == "0.9.8"          # from debugfs
    accel = data["accelerators"]["rknpu@/sys/devices/platform/fdab0000.npu"]
    assert accel["driver"]["version"] == "0.9.8"
    assert accel["power"]["control"] == "on"
    assert data["os"]["id"] == "debian"
    assert "created" not in data["lock"]                            # nothing that changes per run
    # the lock of the unchanged snapshot verifies clean
    proc = run_cli("verify", str(a), "--snapshot", str(k05))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no drift" in proc.stdout


def test_plain_lock_refuses_to_replace_a_hand_edited_lockfile(k05, tmp_path):
    out = tmp_path / "npu-env.lock"
    lock(k05, out)
    lock(k05, out)  # as npu-doctor wrote it: replaced (same bytes)
    edited = out.read_text().replace('version = "0.9.8"', 'version = "0.9.7"', 1)
    out.write_text(edited)
    proc = run_cli("lock", "--snapshot", str(k05), "-o", str(out))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "was edited since npu-doctor wrote it" in proc.stderr and "--update" in proc.stderr
    assert out.read_text() == edited                     # nothing lost
    lock(k05, out, "--update")                           # the way it points to works
    assert out.read_text() != edited


def test_driver_change_is_exactly_one_error_drift(k05, tmp_path):
    lf = tmp_path / "npu-env.lock"
    lock(k05, lf)
    changed = copy_case("k05-rk3588-healthy", tmp_path / "changed")
    write(changed / DRIVER_FILE, "RKNPU driver: v0.9.6\n")
    rc, report = verify_json(lf, changed)
    assert rc == 1
    assert len(report["findings"]) == 1, report["findings"]
    f = report["findings"][0]
    assert f["id"] == "lock-drift" and f["severity"] == "error"
    assert "from 0.9.8 to 0.9.6" in f["message"]
    facts = {e["fact"]: (e["locked"], e["value"]) for e in f["evidence"]}
    assert facts["drivers.rknpu.version"] == ("0.9.8", "0.9.6")
    assert report["lock"]["differences"] == 1
    # letting the driver float silences it
    rc, report = verify_json(lf, changed, "--skip-path", "drivers.rknpu", "--skip-path",
                             "accelerators.*.driver.version")
    assert rc == 0 and report["findings"] == []


def test_tunable_is_warning_and_fail_on_controls_exit(k05, tmp_path):
    lf = tmp_path / "npu-env.lock"
    lock(k05, lf)
    changed = copy_case("k05-rk3588-healthy", tmp_path / "changed")
    write(changed / CONTROL_FILE, "auto\n")
    rc, report = verify_json(lf, changed)
    assert rc == 0
    assert [(f["severity"], f["evidence"][0]["locked"], f["evidence"][0]["value"])
            for f in report["findings"]] == [("warning", "on", "auto")]
    proc = run_cli_subprocess("verify", str(lf), "--snapshot", str(changed), "--fail-on", "warning")
    assert proc.returncode == 1
    assert "power.control changed from on to auto" in proc.stdout


def test_added_package_is_info_changed_is_warning_removed_is_error(k05, tmp_path):
    site = k05 / "fs/usr/lib/python3/dist-packages"
    (site / "onnxruntime-1.17.0.dist-info").mkdir(parents=True)
    (site / "rknn_toolkit_lite2-2.3.0.dist-info").mkdir()
    (site / "requests-2.31.0.dist-info").mkdir()                    # not an SDK: not pinned
    lf = tmp_path / "npu-env.lock"
    lock(k05, lf)
    data = tomllib.loads(lf.read_text())
    assert data["python"]["packages"] == {"onnxruntime": "1.17.0", "rknn-toolkit-lite2": "2.3.0"}
    os.rename(site / "onnxruntime-1.17.0.dist-info", site / "onnxruntime-1.18.1.dist-info")
    shutil.rmtree(site / "rknn_toolkit_lite2-2.3.0.dist-info")
    (site / "hailort-4.20.0.dist-info").mkdir()
    rc, report = verify_json(lf, k05)
    got = sorted((f["severity"], f["subject"]) for f in report["findings"]
                 if f["subject"].startswith("python."))
    # a probe that reads the same dist-info as an SDK version (sdks.rknn_toolkit_lite2) may
    # report its disappearance too: an SDK removed is an error
    assert all(f["severity"] == "error" for f in report["findings"]
               if f["subject"].startswith("sdks.") and "was" in f["message"])
    assert got == [("error", "python.packages.rknn-toolkit-lite2"),
                   ("info", "python.packages.hailort"),
                   ("warning", "python.packages.onnxruntime")]
    assert rc == 1


def test_library_content_change_is_an_error(tmp_path):
    """A real ELF at the Rockchip runtime's path: same name, different bytes -> error."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not available")
    snap = copy_case("k05-rk3588-healthy", tmp_path / "snap")
    src = tmp_path / "rt.c"
    src.write_text("int rknn_init(void) { return 0; }\n")
    lib = snap / "fs/usr/lib/librknnrt.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    lf = tmp_path / "npu-env.lock"
    lock(snap, lf)
    data = tomllib.loads(lf.read_text())
    if "/usr/lib/librknnrt.so" not in data.get("files", {}):
        pytest.fail("the library probe did not report /usr/lib/librknnrt.so in libraries[]: "
                    + json.dumps(sorted(data.get("files", {}))))
    entry = data["files"]["/usr/lib/librknnrt.so"]
    assert entry["kind"] == "library" and entry["size"] == lib.stat().st_size
    src.write_text("int rknn_init(void) { return 1; }\nint rknn_query(void) { return 2; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    rc, report = verify_json(lf, snap)
    libs = [f for f in report["findings"] if "librknnrt" in f["subject"]]
    assert rc == 1 and len(libs) == 1 and libs[0]["severity"] == "error"
    assert "sha256" in libs[0]["subject"]


@pytest.mark.parametrize("kind", ["garbage", "truncated", "future", "not-a-lock", "wrong-shape"])
def test_bad_lockfile_is_exit_2_and_one_line(k05, tmp_path, kind):
    good = tmp_path / "good.lock"
    lock(k05, good)
    text = good.read_text()
    bad = tmp_path / "bad.lock"
    if kind == "garbage":
        bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    elif kind == "truncated":
        bad.write_text(text[: len(text) // 2])
    elif kind == "future":
        bad.write_text(text.replace("npu-doctor/lock/v1", "npu-doctor/lock/v2"))
    elif kind == "not-a-lock":
        bad.write_text('[tool]\nname = "something else"\n')
    else:  # `accelerators` a string: was an IndexError traceback
        bad.write_text('accelerators = "rknpu"\n' + text)
    proc = run_cli("verify", str(bad), "--snapshot", str(k05))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-doctor: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    if kind == "future":
        assert "npu-doctor/lock/v2" in lines[0]


def test_truncated_at_a_line_boundary_is_compared_and_flagged(k05, tmp_path):
    """A file cut between two tables is still valid TOML: the digest advisory says it changed
    and the pins it lost read as not in the lock."""
    good = tmp_path / "good.lock"
    lock(k05, good)
    text = good.read_text()
    cut = text[: text.index("[kernel]")]
    tomllib.loads(cut)  # parses fine
    bad = tmp_path / "cut.lock"
    bad.write_text(cut)
    rc, report = verify_json(bad, k05)
    subjects = {f["subject"]: f for f in report["findings"]}
    assert subjects["lock.digest"]["severity"] == "info"
    assert "kernel.release" in subjects


def test_other_architecture_is_exit_2(tmp_path):
    arm = copy_case("k05-rk3588-healthy", tmp_path / "arm")
    x86 = copy_case("k05-rk3588-healthy", tmp_path / "x86")
    for snap, machine in ((arm, "aarch64"), (x86, "x86_64")):
        write(snap / "commands.toml",
              f'[[command]]\nargv = ["uname", "-m"]\nreturncode = 0\nstdout = "{machine}\\n"\n')
    lf = tmp_path / "arm.lock"
    lock(arm, lf)
    assert tomllib.loads(lf.read_text())["lock"]["arch"] == "aarch64"
    proc = run_cli("verify", str(lf), "--snapshot", str(x86))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "aarch64" in proc.stderr and "x86_64" in proc.stderr


def test_lock_killed_mid_write_leaves_old_file(k05, tmp_path):
    lf = tmp_path / "npu-env.lock"
    lock(k05, lf)
    old = lf.read_bytes()
    changed = copy_case("k05-rk3588-healthy", tmp_path / "changed")
    write(changed / DRIVER_FILE, "RKNPU driver: v0.9.6\n")
    env = dict(os.environ, NPU_DOCTOR_LOCK_TEST_DELAY_S="60")
    proc = subprocess.Popen([sys.executable, "-m", "npu_doctor", "lock", "--snapshot", str(changed),
                             "-o", str(lf)], cwd=str(REPO), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        tmp = []
        while time.time() < deadline and not tmp:
            tmp = [p for p in tmp_path.iterdir() if p.name.startswith(".npu-env.lock.")
                   and p.stat().st_size > 0]
            time.sleep(0.1)
        assert tmp, "lock never wrote its temp file"
        assert b"0.9.6" in tmp[0].read_bytes()          # the new content is fully written ...
        proc.send_signal(signal.SIGKILL)                 # ... and the process dies before rename
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lf.read_bytes() == old
    read_lockfile(str(lf))
    assert run_cli("verify", str(lf), "--snapshot", str(k05)).returncode == 0


def test_lock_to_stdout_and_rules_explain(k05, tmp_path):
    proc = run_cli("rules", "explain", "lock-drift")
    assert proc.returncode == 0 and "lock-drift (error)" in proc.stdout
    assert "[now]" in proc.stdout and "[persist]" in proc.stdout
    out = run_cli_subprocess("lock", "--snapshot", str(k05), "-o", "-")  # bytes on a real stdout
    assert out.returncode == 0
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    assert out.stdout == lf.read_text()


def test_ignore_patterns_and_display_paths():
    assert display_path(("accelerators", "rknpu@0000:01:00.0", "power", "control")) == \
        'accelerators."rknpu@0000:01:00.0".power.control'
    assert parse_ignore('accelerators."rknpu@0000:01:00.0".power') == \
        ["accelerators", "rknpu@0000:01:00.0", "power"]
    assert parse_ignore("accelerators[*].power.control") == ["accelerators", "*", "power", "control"]
    spec = load_spec()
    old = {"lock": {}, "sdks": {"cann": {"version": "8.0.0", "build": "b1"}}}
    new = {"lock": {}, "sdks": {"cann": {"version": "8.0.0", "build": "b2"}}}
    assert [d.display for d in diff(old, new, spec)] == ["sdks.cann.build"]
    assert diff(old, new, spec, ["sdks.*.build"]) == []
    assert diff(old, new, spec, ["sdks"]) == []


# -- output paths: symlinks followed, special files refused ------------------------------------
def test_lock_output_symlink_replaces_the_final_target(k05, tmp_path):
    """`lock -o LINK` keeps the link and atomically replaces what it points to (through a
    chain of two links, into another directory)."""
    real_dir = tmp_path / "etc"
    real_dir.mkdir()
    target = real_dir / "npu-env.lock"
    target.write_text("old contents\n")
    hop = tmp_path / "hop.lock"
    hop.symlink_to(target)
    link = tmp_path / "npu-env.lock"
    link.symlink_to("hop.lock")
    proc = lock(k05, link)
    assert "npu-env.lock" in proc.stderr
    assert link.is_symlink() and os.readlink(link) == "hop.lock"
    assert hop.is_symlink() and os.readlink(hop) == str(target)
    read_lockfile(str(target))                        # the real file holds the new lock
    assert sorted(p.name for p in real_dir.iterdir()) == ["npu-env.lock"]   # no temp left
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert run_cli("verify", str(link), "--snapshot", str(k05)).returncode == 0
    # a dangling link is written through: the target is created, the link stays
    dangling = tmp_path / "dangling.lock"
    dangling.symlink_to(real_dir / "new.lock")
    lock(k05, dangling)
    assert dangling.is_symlink() and (real_dir / "new.lock").is_file()
    read_lockfile(str(real_dir / "new.lock"))


def _special_outputs(tmp_path: Path):
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(str(fifo))
    yield "fifo", fifo
    link = tmp_path / "to-fifo.lock"
    link.symlink_to(fifo)
    yield "fifo", link
    d = tmp_path / "adir"
    d.mkdir()
    yield "directory", d
    dev = tmp_path / "full"
    try:  # the same device numbers as /dev/full (1, 7); needs CAP_MKNOD
        os.mknod(str(dev), 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except (PermissionError, OSError):
        return
    yield "character device", dev


def test_lock_refuses_an_output_that_is_not_a_regular_file(k05, tmp_path):
    """As root `lock -o /dev/full` used to turn /dev/full into a regular file."""
    seen = []
    for kind, path in _special_outputs(tmp_path):
        real = os.path.realpath(path)
        before = os.lstat(real)
        proc = run_cli("lock", "--snapshot", str(k05), "-o", str(path))
        assert proc.returncode == 2, (kind, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("npu-doctor: error: "), proc.stderr
        assert kind in lines[0] and "Traceback" not in proc.stderr
        after = os.lstat(real)
        assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
        assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
        if str(path) != real:
            assert os.path.islink(path)
        seen.append(kind)
    assert [k for k in seen if k == "fifo"] == ["fifo", "fifo"] and "directory" in seen
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_edited_lockfile_is_drift_not_an_error(k05, tmp_path):
    """Editing a pinned value is a drift (exit 1) plus an info "edited since written"."""
    good = tmp_path / "good.lock"
    lock(k05, good)
    bad = tmp_path / "edited.lock"
    bad.write_text(good.read_text().replace('control = "on"', 'control = "auto"'))
    proc = run_cli("verify", str(bad), "--snapshot", str(k05), "--fail-on", "warning")
    assert proc.returncode == 1, proc.stderr
    assert "edited since npu-doctor wrote it" in proc.stdout
    assert "power.control changed from auto to on" in proc.stdout
    # the edit alone is never a failure: fail-on error passes
    assert run_cli("verify", str(bad), "--snapshot", str(k05)).returncode == 0


# -- unknown architecture --------------------------------------------------------------------
def test_unknown_architecture_is_not_recorded_and_verify_says_so(tmp_path):
    """k05 has no `uname -m`, no /proc/sys/kernel/arch and no ELF binary: nothing tells the
    architecture. The lock leaves it out (no `arch = "unknown"`), and verify says it could
    not compare it instead of passing silently; exit status stays 0 (no difference)."""
    k05 = copy_case("k05-rk3588-healthy", tmp_path / "k05")
    lf = tmp_path / "k05.lock"
    proc = lock(k05, lf)
    assert "arch" not in tomllib.loads(lf.read_text())["lock"]
    assert "architecture unknown" in proc.stderr
    proc = run_cli("verify", str(lf), "--snapshot", str(k05))
    assert proc.returncode == 0, proc.stderr
    assert "architecture not compared" in proc.stdout and "no drift" in proc.stdout
    rc, report = verify_json(lf, k05)
    assert rc == 0 and report["lock"]["arch_compared"] is False
    assert any("architecture not compared" in n for n in report["lock"]["notes"])
    # a lock that knows its architecture, verified against a snapshot that does not tell it
    arm = copy_case("k05-rk3588-healthy", tmp_path / "arm")
    write(arm / "commands.toml",
          '[[command]]\nargv = ["uname", "-m"]\nreturncode = 0\nstdout = "aarch64\\n"\n')
    arm_lock = tmp_path / "arm.lock"
    lock(arm, arm_lock)
    assert tomllib.loads(arm_lock.read_text())["lock"]["arch"] == "aarch64"
    rc, report = verify_json(arm_lock, k05)
    assert rc == 0 and report["lock"]["arch_compared"] is False
    assert "aarch64" in report["lock"]["notes"][0]
    # ... and against one that does: compared, no note
    rc, report = verify_json(arm_lock, arm)
    assert rc == 0 and report["lock"]["arch_compared"] is True and report["lock"]["notes"] == []
    proc = run_cli("verify", str(arm_lock), "--snapshot", str(arm))
    assert "not compared" not in proc.stdout
    # locks written before this change carry arch = "unknown": treated as not recorded
    assert "not compared" in check_arch({"lock": {"arch": "unknown"}},
                                        {"lock": {"arch": "aarch64"}}, "old.lock")


def test_counts_are_pluralised(k05, tmp_path):
    assert [plural(n, "finding") for n in (0, 1, 2)] == ["0 findings", "1 finding", "2 findings"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    lf = tmp_path / "a.lock"
    lock(k05, lf)
    changed = copy_case("k05-rk3588-healthy", tmp_path / "changed")
    write(changed / CONTROL_FILE, "auto\n")
    proc = run_cli("verify", str(lf), "--snapshot", str(changed))
    assert proc.returncode in (0, 1), proc.stderr
    assert "1 difference: " in proc.stdout and "(s)" not in proc.stdout
