"""SnapshotHost and LiveHost on real trees: links, link stubs, commands, stat, archives."""

from __future__ import annotations

import os
import sys
import tarfile
import time

import pytest

from npu_doctor.errors import CommandNotFound, NotFound, SnapshotError
from npu_doctor.host import LiveHost, SnapshotHost, mode_allows, parse_id_output

from conftest import case_path, make_snapshot


def _board(tmp_path):
    """A small board: a device's power/control reached through a real symlink and a git
    stub, a plain file, two commands (one hung) and a device node's stat."""
    make_snapshot(tmp_path, files={
        "/sys/devices/platform/fdab0000.npu/power/control": "auto\n",
        # what git writes for a symlink when core.symlinks=false: the target, no newline
        "/sys/class/devfreq/stub-link": "../../devices/platform/fdab0000.npu",
        "/etc/hostname": "board",  # no newline, no slash: a plain file
    }, commands=[(["npu-smi", "info"], 0, "hello\n"), {"argv": ["hang"], "timed_out": True}],
        stat=[{"path": "/dev/accel/accel0", "type": "char", "mode": "0660", "uid": 0, "gid": 992,
               "rdev": "261:0"}])
    os.symlink("../../devices/platform/fdab0000.npu", tmp_path / "fs/sys/class/devfreq/real-link")
    return tmp_path


def test_real_symlink_and_git_stub_both_resolve(tmp_path):
    host = SnapshotHost(str(_board(tmp_path)))
    for link in ("real-link", "stub-link"):
        assert host.read_text(f"/sys/class/devfreq/{link}/power/control") == "auto\n"
        assert host.readlink(f"/sys/class/devfreq/{link}") == "../../devices/platform/fdab0000.npu"
        assert host.realpath(f"/sys/class/devfreq/{link}") == "/sys/devices/platform/fdab0000.npu"
    assert host.read_text("/etc/hostname") == "board"
    assert host.listdir("/sys/class/devfreq") == ["real-link", "stub-link"]


def test_glob_through_links(tmp_path):
    host = SnapshotHost(str(_board(tmp_path)))
    assert host.glob("/sys/class/devfreq/*/power/control") == [
        "/sys/class/devfreq/real-link/power/control", "/sys/class/devfreq/stub-link/power/control"]


def test_files_are_read_afresh(tmp_path):
    snap = _board(tmp_path)
    host = SnapshotHost(str(snap))
    assert host.read_attr("/sys/class/devfreq/real-link/power/control") == "auto"
    (snap / "fs/sys/devices/platform/fdab0000.npu/power/control").write_text("on\n")
    assert host.read_attr("/sys/class/devfreq/real-link/power/control") == "on"


def test_commands_exact_argv_and_not_found(tmp_path):
    host = SnapshotHost(str(_board(tmp_path)))
    res = host.run(["npu-smi", "info"])
    assert res.ok and res.stdout == "hello\n"
    with pytest.raises(CommandNotFound):
        host.run(["npu-smi", "info", "-t", "board"])
    start = time.monotonic()
    res = host.run(["hang"], timeout=0.2)
    assert res.timed_out and res.returncode is None
    assert time.monotonic() - start < 2


def test_stat_and_permissions_from_stat_toml(tmp_path):
    snap = _board(tmp_path)
    make_snapshot(snap, commands=[(["id"], 0, "uid=1000(u) gid=1000(u) groups=1000(u),27(sudo)")])
    host = SnapshotHost(str(snap))
    st = host.stat("/dev/accel/accel0")
    assert (st.type, st.mode, st.gid, st.rdev) == ("char", 0o660, 992, "261:0")
    assert host.exists("/dev/accel/accel0")
    assert host.can_open("/dev/accel/accel0") is False
    ident = parse_id_output("uid=1000(u) gid=1000(u) groups=1000(u),992(render)")
    assert mode_allows(st, ident) is True


def test_tar_gz_snapshot(tmp_path):
    snap = _board(tmp_path / "snap")
    archive = tmp_path / "board.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(snap, arcname="board")
    host = SnapshotHost(str(archive))
    assert host.read_attr("/sys/class/devfreq/real-link/power/control") == "auto"
    assert host.run(["npu-smi", "info"]).stdout == "hello\n"


def test_bad_snapshots_are_snapshot_errors(tmp_path):
    with pytest.raises(SnapshotError, match="no such file"):
        SnapshotHost(str(tmp_path / "nope"))
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(SnapshotError):
        SnapshotHost(str(junk))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "commands.toml").write_text("[[command]\nargv = ")
    with pytest.raises(SnapshotError, match="commands.toml"):
        SnapshotHost(str(bad))


def test_case_with_git_link_stubs_resolves_devfreq():
    host = SnapshotHost(str(case_path("k01-rk3588-npu-autosuspend")))
    assert host.read_attr("/sys/class/devfreq/fdab0000.npu/governor") == "performance"


def test_live_run_kills_the_whole_group_at_timeout():
    host = LiveHost()
    start = time.monotonic()
    res = host.run([sys.executable, "-c", "import subprocess,time; subprocess.Popen(['sleep','30']); time.sleep(30)"],
                   timeout=0.5)
    assert res.timed_out
    assert time.monotonic() - start < 5


def test_live_missing_command_and_file():
    host = LiveHost()
    with pytest.raises(CommandNotFound):
        host.run(["definitely-not-a-command-xyz"])
    with pytest.raises(NotFound):
        host.read_text("/nonexistent/file")


def test_signatures_look_only_at_the_start_of_a_very_long_line():
    import re

    from npu_doctor.collectors.logs import MAX_SCAN_LINE, match_signatures
    from npu_doctor.probes import Signature

    sig = Signature("needle", "runtime", re.compile(r"needle (?P<n>\d+)"), {})
    near = "needle 1 " + "a" * 200000
    far = "a" * (MAX_SCAN_LINE + 10) + " needle 2"
    events = match_signatures(near + "\n" + far + "\n", "logs/x.log", [sig], "runtime")
    assert [(e["n"], e["line_no"]) for e in events] == [("1", 1)]
