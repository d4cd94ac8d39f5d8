"""`capture` copies a log streamed (capture.logcopy): past the old 8 MiB cut, redacted piece by
piece, into a directory or an archive; a log over the limit (per log, or the free disk space)
keeps its first whole lines and the cut is in snapshot.toml and in `check --snapshot`."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import pytest

from npu_doctor.capture import logcopy, run_capture
from npu_doctor.check import Config
from npu_doctor.host import SnapshotHost
from npu_doctor.tomlcompat import tomllib

from conftest import case_path, check_json

ROOT = Path(__file__).resolve().parent
ORT = ROOT / "data" / "fallback" / "ort_1.14_cuda_sherpa_onnx_163.log"
CASE = "c1-01-ascend-dcmi-8020-device-in-use"   # a small case to capture with a --log
NOISE = "[  12.345678] usb 1-1.2: new high-speed USB device number 3 using xhci_hcd\n"


@pytest.fixture(scope="module")
def config():
    return Config.load()


def _big_log(path: Path, mib: float, tail: str) -> str:
    text = NOISE * int(mib * (1 << 20) / len(NOISE)) + tail
    path.write_text(text)
    return text


def _capture(config, log: Path, out: Path, redact: bool = False):
    """Capture the small case with `log` given as --log; `out` a directory unless .tar.gz."""
    host = SnapshotHost(str(case_path(CASE)), extra_logs=[str(log)])
    dest = str(out) if out.name.endswith(".tar.gz") else str(out) + "/"
    try:
        return run_capture(host, config, dest, redact=redact)
    finally:
        host.close()


def test_a_log_past_8_mib_is_copied_whole_and_replays(tmp_path, config):
    log = tmp_path / "app.log"
    text = _big_log(log, 9, ORT.read_text())
    out = tmp_path / "snap"
    run = _capture(config, log, out)
    assert (out / "logs" / "app.log").read_text() == text
    assert run.fact_diffs == [] and run.finding_diffs == [], run.fact_diffs + run.finding_diffs
    assert run.live.facts.get("fallback.count") and run.result.truncated == []
    assert "truncated" not in tomllib.loads((out / "snapshot.toml").read_text())["snapshot"]
    assert not list(tmp_path.glob(".npu-doctor-capture-*"))  # the spool is gone


def test_a_log_over_the_limit_keeps_whole_first_lines_and_says_so(tmp_path, config, monkeypatch):
    monkeypatch.setattr(logcopy, "LOG_LIMIT_BYTES", 1 << 20)
    log = tmp_path / "app.log.gz"
    text = NOISE * 40000
    log.write_bytes(gzip.compress(text.encode()))
    out = tmp_path / "cap.tar.gz"
    run = _capture(config, log, out)
    with tarfile.open(out) as tf:
        kept = tf.extractfile("logs/app.log.gz").read().decode()
        meta = tomllib.loads(tf.extractfile("snapshot.toml").read().decode())["snapshot"]
    assert text.startswith(kept) and kept.endswith("\n") and (1 << 20) - len(NOISE) < len(kept) <= 1 << 20
    (rec,) = meta["truncated"]
    assert rec["source"] == "logs/app.log.gz" and rec["kept_bytes"] == len(kept)
    assert rec["size_bytes"] == log.stat().st_size and rec["what"] == "log"
    assert rec["message"] == ("logs/app.log.gz was cut at 1 MiB of a 10 KiB compressed file "
                              "when captured (the capture's limit of 1 MiB a log); what follows "
                              "was not checked")
    assert run.result.truncated == [rec["message"]]
    rep = check_json(out)
    got = [f for f in rep["findings"] if f["id"] == "input-truncated"]
    assert [(f["subject"], f["message"]) for f in got] == [("logs/app.log.gz", rec["message"])]
    # the replay has the finding the live run could not have: said, not hidden
    assert any("input-truncated" in d for d in run.finding_diffs)


def test_free_disk_space_sets_the_limit(tmp_path, config, monkeypatch):
    monkeypatch.setattr(logcopy, "_free", lambda path: logcopy.DISK_RESERVE_BYTES + (2 << 20))
    log = tmp_path / "app.log"
    _big_log(log, 3, "")
    out = tmp_path / "snap"
    run = _capture(config, log, out)
    assert (out / "logs" / "app.log").stat().st_size <= 1 << 20
    assert "free disk space" in run.result.truncated[0]


def test_recapture_keeps_the_cut_said(tmp_path, config, monkeypatch):
    monkeypatch.setattr(logcopy, "LOG_LIMIT_BYTES", 1 << 20)
    log = tmp_path / "app.log"
    _big_log(log, 2, "")
    first = tmp_path / "one"
    _capture(config, log, first)
    monkeypatch.setattr(logcopy, "LOG_LIMIT_BYTES", 1 << 30)
    host = SnapshotHost(str(first))
    try:
        run_capture(host, config, str(tmp_path / "two") + "/", redact=False)
    finally:
        host.close()
    meta = tomllib.loads((tmp_path / "two" / "snapshot.toml").read_text())["snapshot"]
    assert [r["source"] for r in meta["truncated"]] == ["logs/app.log"]


def test_streamed_log_is_redacted_across_pieces(tmp_path, config, monkeypatch):
    monkeypatch.setattr(logcopy, "REDACT_PIECE", 4096)
    log = tmp_path / "app.log"
    secret = "ssh connection from 10.20.30.40 to build-host-lab42 failed\n"
    text = (NOISE * 200 + secret) * 30
    log.write_text(text)
    out = tmp_path / "snap"
    _capture(config, log, out, redact=True)
    got = (out / "logs" / "app.log").read_text()
    assert "10.20.30.40" not in got and got.count("\n") == text.count("\n")
    assert got.count(NOISE) == text.count(NOISE)
