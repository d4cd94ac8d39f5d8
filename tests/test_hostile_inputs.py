"""Hostile snapshot directories and data files, each class with its minimal input: reads stay
inside the snapshot, special files neither hang nor exhaust memory, data files of the wrong
shape are ConfigError (exit 2 naming file and id), catastrophic regexes are refused at load."""

from __future__ import annotations

import os
import time

import pytest

from npu_doctor import rules as rules_mod
from npu_doctor.errors import ConfigError, HostError, SnapshotError
from npu_doctor.host.live import LiveHost
from npu_doctor.host.snapshot import SnapshotHost
from npu_doctor.probes import _load_spec_file
from npu_doctor.regexcheck import why_catastrophic
from npu_doctor.rule_loader import load_rule_file

from conftest import run_cli


@pytest.fixture
def snap(tmp_path):
    root = tmp_path / "snap"
    (root / "fs" / "etc").mkdir(parents=True)
    (root / "fs" / "etc" / "os-release").write_text("ID=debian\n")
    (root / "commands.toml").write_text('[[command]]\nargv = ["id"]\nstdout = "uid=0(root) gid=0(root)"\n')
    (root / "logs").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET-OUTSIDE\n")
    return root, outside


def test_fs_and_metadata_symlinked_out_are_refused(snap, tmp_path):
    root, outside = snap
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(str(root / "fs"), str(other / "fs"))
    with pytest.raises(SnapshotError, match="fs is a symlink"):
        SnapshotHost(str(other))
    (root / "commands.toml").unlink()
    os.symlink(str(outside), str(root / "commands.toml"))
    with pytest.raises(SnapshotError, match="commands.toml is a symlink"):
        SnapshotHost(str(root))


def test_logs_and_files_linked_out_are_not_read(snap):
    root, outside = snap
    os.symlink(str(outside), str(root / "logs" / "x"))
    os.link(str(outside), str(root / "logs" / "hard"))
    os.link(str(outside), str(root / "fs" / "etc" / "hard"))
    (root / "logs" / "ok.log").write_text("fine\n")
    host = SnapshotHost(str(root))
    assert host.logs() == [("logs/ok.log", "fine\n")]
    with pytest.raises(HostError, match="hard-linked"):
        host.read_text("/etc/hard")
    assert host.read_attr("/etc/hard") is None


def test_special_files_in_a_snapshot_neither_hang_nor_flood(snap):
    root, _ = snap
    os.mkfifo(str(root / "fs" / "etc" / "fifo"))
    os.symlink("/dev/zero", str(root / "fs" / "etc" / "zero-abs"))  # resolves to fs/dev/zero: absent
    os.mkfifo(str(root / "logs" / "fifo.log"))
    host = SnapshotHost(str(root))
    t = time.monotonic()
    with pytest.raises(HostError, match="FIFO"):
        host.read_bytes("/etc/fifo")
    assert host.read_attr("/etc/zero-abs") is None
    assert host.logs() == []
    assert time.monotonic() - t < 2
    (root / "stat.toml").unlink() if (root / "stat.toml").exists() else None
    os.mkfifo(str(root / "stat.toml"))
    with pytest.raises(SnapshotError, match="stat.toml"):
        SnapshotHost(str(root))


def test_log_argument_that_is_a_fifo_or_device_is_a_host_error(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    for p in (str(fifo), "/dev/zero"):
        with pytest.raises(HostError, match="not a regular file"):
            LiveHost(extra_logs=[p]).logs()


def test_cli_snapshot_or_log_that_is_a_fifo_device_or_garbage_is_exit_2_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(bytes(range(256)) * 4)
    for args, words in ((("--snapshot", str(fifo)), "(a FIFO)"),
                        (("--snapshot", "/dev/zero"), "(a character device)"),
                        (("--snapshot", str(garbage)), "not a tar, tar.gz"),
                        (("--log", str(fifo)), "not a regular file (a FIFO)"),
                        (("--log", "/dev/zero"), "not a regular file (a character device)")):
        out = run_cli("check", *args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, args
        assert len(out.stderr.strip().splitlines()) == 1 and words in out.stderr, (args, out.stderr)


def test_cli_python_that_runs_but_is_no_python_is_exit_2_one_line(tmp_path):
    script = tmp_path / "fakepy"
    script.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    script.chmod(0o755)
    for exe, words in (("/bin/false", "it exited 1"), (str(script), "it exited 3: boom"),
                       ("/bin/true", "no Python answer")):
        out = run_cli("check", "--python", exe, env={"NPU_DOCTOR_NO_CACHE": "1"})
        assert out.returncode == 2 and "Traceback" not in out.stderr, exe
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert f"--python {exe}: not a Python interpreter" in out.stderr and words in out.stderr


RULE = ('[[rule]]\nid = "r1"\nseverity = "warning"\ntitle = "t"\nexplain = "e"\n'
        'when = [{fact = "os.id", eq = "x"}]\nmessage = "m"\n')


@pytest.mark.parametrize("body, words", [
    (RULE + '[[rule.fix]]\nkind = "now"\ntext = "t"\nwhen = 5\n', ["r1", "fix.when"]),
    (RULE + '[[rule.fix]]\nkind = "now"\ntext = "t"\nsysfs_write = {path = 1, value = 2}\n',
     ["r1", "sysfs_write"]),
    ('[[matrix]]\nid = "m1"\nrow = [5]\n', ["m1", "row 1"]),
    ('[[matrix]]\nid = "m1"\nrow = 5\n', ["m1", "row"]),
    ("[" + ".".join(["a"] * 10000) + "]\nx = 1\n", ["nested"]),
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", ["nested"]),
    (RULE.replace('eq = "x"', 'matches = "^(a+)+$"'), ["r1", "backtrack"]),
])
def test_rules_file_of_the_wrong_shape_is_a_config_error(tmp_path, body, words):
    p = tmp_path / "site.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_rule_file(str(p))
    msg = str(e.value)
    assert "site.toml" in msg and "\n" not in msg
    for w in words:
        assert w in msg


@pytest.mark.parametrize("kind", ["fifo", "zero", "big"])
def test_data_file_that_is_special_or_huge_is_a_config_error(tmp_path, kind, monkeypatch):
    p = tmp_path / "site.toml"
    if kind == "fifo":
        os.mkfifo(str(p))
    elif kind == "zero":
        os.symlink("/dev/zero", str(p))
    else:
        from npu_doctor import safeio
        monkeypatch.setattr(safeio, "CAP_DATA_FILE", 1000)
        p.write_text("# pad\n" * 400)
    t = time.monotonic()
    with pytest.raises(ConfigError, match="site.toml"):
        load_rule_file(str(p))
    assert time.monotonic() - t < 2


def test_signature_regex_with_catastrophic_backtracking_is_refused(tmp_path):
    p = tmp_path / "site.toml"
    p.write_text('[[signature]]\nid = "evil"\nregex = "^(a+)+$"\n')
    with pytest.raises(ConfigError, match="evil.*backtrack"):
        _load_spec_file(str(p))


@pytest.mark.parametrize("rx, bad", [
    (r"^(a+)+$", True), (r"(a*)*", True), (r"(\w+\s?)*$", True), (r"(?:x+|y)+", True),
    (r"(?:\s+\S+)*", False), (r"(a+b)+", False), (r"(?:(\d+)\.)+", False), (r"\d+(\.\d+)*", False),
])
def test_nested_quantifier_detection(rx, bad):
    assert (why_catastrophic(rx) is not None) == bad


def test_operators_on_facts_of_another_type_do_not_hold():
    c = rules_mod._compare
    assert c("in", "a", "abc") is False          # in_fact naming a string
    assert c("not_in", "a", 5) is False
    assert c("contains", 5, "a") is False         # contains on a number
    assert c("contains", "abc", 5) is False
    assert c("contains", ["5"], 5) is True
    assert c("matches", "x", "(") is False        # matches_fact naming an invalid regex


def test_cli_bad_data_file_is_exit_2_one_line(tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "site.toml").write_text(RULE + '[[rule.fix]]\nkind = "now"\ntext = "t"\nwhen = 5\n')
    out = run_cli("rules", "list", "--rules", str(d))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "r1" in out.stderr


def test_watch_reload_that_raises_anything_is_config_rejected():
    from npu_doctor.watch.daemon import Watcher

    class Boom(Exception):
        pass

    def reload():
        raise Boom("unexpected\nsecond line")

    w = Watcher.__new__(Watcher)
    w.reload_config = reload
    w.config = object()
    events = []
    w.reload = __import__("threading").Event()
    w.emit = events.append
    w._reload_config()
    assert [e.event for e in events] == ["config-rejected"]
    assert "Boom: unexpected" in events[0].message and "\n" not in events[0].message
    assert w.config is not None
