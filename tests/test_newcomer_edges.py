"""What a newcomer ran into (tester report): each edge, its right behaviour."""

from __future__ import annotations

import re
import shutil

from conftest import case_path, check_json, run_cli


def test_deep_refuses_a_snapshot_whose_runs_would_be_this_machines():
    proc = run_cli("check", "--snapshot", str(case_path("k01-rk3588")), "--deep")
    assert proc.returncode == 2 and "cannot apply to a snapshot" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_that_is_no_interpreter_is_a_usage_error(tmp_path):
    text = tmp_path / "hostname"
    text.write_text("board\n")
    for bad, why in ((text, "not an"), (tmp_path, "without bin/python")):
        proc = run_cli("check", "--python", str(bad))
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr


def test_explain_matches_whole_words_only():
    # `cudaErrorStreamCaptureInvalidated` holds "INVAL" inside a word: not a match for EINVAL
    # (an entry whose meaning names EINVAL as a word is)
    proc = run_cli("explain", "EINVAL")
    assert "cudaErrorStreamCapture" not in proc.stdout
    for block in proc.stdout.split("\n\n"):
        assert not block.strip() or re.search(r"(?<!\w)EINVAL(?!\w)", block), block
    assert run_cli("explain", "NVAL").returncode == 1


def test_log_lines_do_not_add_hardware_to_a_machine_whose_sys_was_read(tmp_path):
    # a healthy RK3588 (sysfs captured) given a log from some NVIDIA host
    board = tmp_path / "board"
    shutil.copytree(str(case_path("k05-rk3588-healthy")), str(board), symlinks=True)
    (board / "logs").mkdir(exist_ok=True)
    (board / "logs" / "other.log").write_text(
        "Mar 12 10:15:22 gpuhost kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    rep = check_json(board)
    assert {a.get("vendor") for a in rep["facts"]["accelerators"]} == {"rknpu"}
    assert "device-unresponsive" in {f["id"] for f in rep["findings"]}  # the log is still read


def test_logs_line_of_the_summary_counts_problem_lines():
    proc = run_cli("check", "--snapshot", str(case_path("d02-hailo8l")))
    logs = next(line for line in proc.stdout.splitlines() if "Logs" in line)
    assert "problem line" in logs and "dmesg" in logs and "nothing notable" not in logs
