"""A command's output over host.base.OUTPUT_CAP_BYTES is cut on a line boundary and said:
CommandResult.cut, a `truncated` fact, an `input-truncated` info finding. Of a kernel log
(`dmesg`) the newest lines are kept, so a driver error at the end of a long log is found."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.host.base import OUTPUT_CAP_BYTES, cap_output, cap_text
from npu_doctor.truncation import human_bytes

from conftest import check_json, make_snapshot, run_cli

ROOT = Path(__file__).resolve().parent
#: the NVRM lines of a real report (tests/cases/h02-...): driver-not-loaded
H02 = ROOT / "cases" / "h02-nvidia-probe-not-called-nouveau" / "commands.toml"


def _real_dmesg_tail() -> str:
    from npu_doctor.tomlcompat import tomllib

    return tomllib.loads(H02.read_text())["command"][0]["stdout"]


def _noise(n_bytes: int) -> str:
    """Boot noise in dmesg format, newest last, about n_bytes long."""
    out, size, i = [], 0, 0
    while size < n_bytes:
        line = f"[{i / 1000:12.6f}] usb 1-1.{i % 4}: new high-speed USB device number {i % 128} using xhci_hcd"
        out.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(out) + "\n"


def _tool(tmp_path: Path, name: str, text: str) -> Path:
    """A tiny script `name` on PATH that prints `text` (a file beside it)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    data = tmp_path / f"{name}.out"
    data.write_text(text)
    script = bindir / name
    script.write_text(f"#!/bin/sh\nexec cat '{data}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


def test_cap_output_cuts_on_line_boundaries():
    data = b"".join(b"line %d\n" % i for i in range(1000))
    first = cap_output(data, newest=False, cap=100)
    last = cap_output(data, newest=True, cap=100)
    assert first.startswith(b"line 0\n") and first.endswith(b"\n") and len(first) <= 100
    assert last.endswith(b"line 999\n") and data.endswith(last) and len(last) <= 100
    assert last.startswith(b"line ") and data[: len(data) - len(last)].endswith(b"\n")
    assert cap_output(data, True, len(data)) is data
    assert cap_text("é" * 30, True, cap=40) == ("é" * 20, 60)


def test_live_dmesg_over_the_cap_keeps_the_newest_lines(tmp_path, monkeypatch):
    text = _noise(OUTPUT_CAP_BYTES + (1 << 20)) + _real_dmesg_tail()
    monkeypatch.setenv("PATH", f"{_tool(tmp_path, 'dmesg', text)}{os.pathsep}{os.environ['PATH']}")
    res = LiveHost().run(["dmesg"], timeout=30)
    size = len(text.encode())
    assert res.ok and res.cut == {"stdout": size}
    assert len(res.stdout.encode()) <= OUTPUT_CAP_BYTES
    assert text.endswith(res.stdout) and res.stdout.startswith("[")  # whole lines, newest kept
    assert "probe routine was not called" in res.stdout


def test_live_tool_over_the_cap_keeps_its_first_part(tmp_path, monkeypatch):
    text = "\n".join(f"    GPU 0000:{i:04x}:00.0 Product Name : NVIDIA H100" for i in range(90000)) + "\n"
    monkeypatch.setenv("PATH", f"{_tool(tmp_path, 'nvidia-smi', text)}{os.pathsep}{os.environ['PATH']}")
    res = LiveHost().run(["nvidia-smi", "-q"], timeout=30)
    assert res.cut == {"stdout": len(text)} and len(text) > OUTPUT_CAP_BYTES
    assert text.startswith(res.stdout) and res.stdout.endswith("H100\n")
    small = LiveHost().run(["nvidia-smi", "-q"][:1], timeout=30)
    assert small.cut  # the same tool: argv[0] decides what is kept, not the arguments


def test_snapshot_dmesg_over_the_cap_is_reported_and_its_end_read(tmp_path):
    text = _noise(OUTPUT_CAP_BYTES + (1 << 20)) + _real_dmesg_tail()
    snap = make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, text)])
    rep = check_json(snap)
    cut = [f for f in rep["findings"] if f["id"] == "input-truncated"]
    assert [f["subject"] for f in cut] == ["dmesg"]
    assert f"cut at 4 MiB of {human_bytes(len(text))}" in cut[0]["message"]
    assert human_bytes(len(text)) == "5 MiB"
    assert "newest lines are kept" in cut[0]["message"] and cut[0]["severity"] == "info"
    assert "driver-not-loaded" in {f["id"] for f in rep["findings"]}  # the NVRM lines, last
    assert rep["facts"]["truncated"] == [{
        "source": "dmesg", "what": "stdout", "kept": "newest", "size_bytes": len(text),
        "kept_bytes": rep["facts"]["truncated"][0]["kept_bytes"],
        "message": cut[0]["message"]}]
    assert OUTPUT_CAP_BYTES - 200 < rep["facts"]["truncated"][0]["kept_bytes"] <= OUTPUT_CAP_BYTES


def test_snapshot_records_a_cut_made_when_captured(tmp_path):
    snap = make_snapshot(tmp_path / "s", commands=[
        {"argv": ["dmesg"], "returncode": 0, "stdout": _real_dmesg_tail(), "stderr": "",
         "cut": {"stdout": 9_000_000}}])
    res = SnapshotHost(str(snap)).run(["dmesg"])
    assert res.cut == {"stdout": 9_000_000}
    rep = check_json(snap)
    msg = [f["message"] for f in rep["findings"] if f["id"] == "input-truncated"]
    assert msg == [f"output of `dmesg` cut at {len(res.stdout.encode())} bytes of 8.6 MiB; the "
                   "newest lines are kept; older messages were not checked"]


@pytest.mark.parametrize("cut", ['"all"', '{stdout = "x"}', '{stdin = 3}', '{stdout = -1}'])
def test_snapshot_bad_cut_table_is_one_line(tmp_path, cut):
    snap = tmp_path / "s"
    snap.mkdir()
    (snap / "commands.toml").write_text(
        f'[[command]]\nargv = ["dmesg"]\nstdout = "x"\ncut = {cut}\n')
    r = run_cli("check", "--snapshot", str(snap))
    assert r.returncode == 2 and "cut must be a table" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
