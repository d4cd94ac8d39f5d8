"""Output at the edges: any stdout encoding, TERM=dumb, /dev/full, a closed pipe, bare
`npu-doctor`, and machine text that must not forge lines (journal and text report)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from npu_doctor.textsafe import escape_controls
from npu_doctor.watch.events import Event

from conftest import REPO, case_path, run_cli, run_cli_subprocess


@pytest.fixture(scope="module")
def snap():
    return str(case_path("k02"))


def test_ascii_stdout_gets_ascii_marks_not_a_traceback(snap):
    out = run_cli_subprocess("check", "--snapshot", snap, env={"PYTHONIOENCODING": "ascii"})  # a real stdout
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr
    out.stdout.encode("ascii")
    assert "[x]" in out.stdout or "[ok]" in out.stdout


def test_term_dumb_means_no_colour(snap):
    out = run_cli("check", "--snapshot", snap, "--color", "auto", env={"TERM": "dumb"})
    assert "\x1b[" not in out.stdout


@pytest.mark.parametrize("args", [["check", "--snapshot", "SNAP"], ["rules", "list"],
                                  ["lock", "-o", "-", "--snapshot", "SNAP"]])
def test_full_disk_is_one_line_exit_2_and_closed_pipe_exit_0(snap, args):
    args = [snap if a == "SNAP" else a for a in args]
    cmd = [sys.executable, "-m", "npu_doctor", *args]
    with open("/dev/full", "w") as full:
        p = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, cwd=str(REPO))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "cannot write output" in p.stderr
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and "Traceback" not in err and err == ""


def test_rules_explain_into_a_closed_pipe_exits_0():
    cmd = [sys.executable, "-m", "npu_doctor", "rules", "explain", "thermal-throttling"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    proc.stdout.read(5)
    proc.stdout.close()
    assert proc.wait() == 0 and proc.stderr.read() == b""


def test_bare_command_prints_short_usage_on_stdout_exit_0():
    out = run_cli_subprocess()
    assert out.returncode == 0 and out.stdout.startswith("Usage:") and out.stderr == ""
    assert len(out.stdout.splitlines()) < 15


def test_journal_line_escapes_a_forged_newline():
    ev = Event("throttling-start", "soc\n<3>device-removed npu", "warning", "86 C\x1b[2J")
    line = ev.journal_line()
    assert "\n" not in line and "\x1b" not in line
    assert line.startswith("<4>throttling-start soc\\n<3>device-removed")


def test_escape_controls():
    assert escape_controls("a\nb\tc\x00\x9b") == "a\\nb\tc\\x00\\x9b"
    assert escape_controls("fix:\n  cmd", keep_newlines=True) == "fix:\n  cmd"
