"""One streamed pass over each runtime log (collectors.logscan): the same result as reading
the whole text, nothing cut at 8 MiB, compressed logs streamed, one pass shared by probes."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from npu_doctor.catalog import load_catalogs
from npu_doctor.collectors import logscan, pastes
from npu_doctor.host import LiveHost
from npu_doctor.host.logfile import decode_log
from npu_doctor.parsers.fallback import parse_fallback_logs
from npu_doctor.parsers.rknn import parse_runtime_log
from npu_doctor.probes import load_signatures, load_specs

DATA = Path(__file__).resolve().parent / "data"
ORT = DATA / "fallback" / "ort_1.14_cuda_sherpa_onnx_163.log"


@pytest.fixture(scope="module")
def config():
    load_specs()
    return load_signatures([]), load_catalogs()


def _whole(text, sigs, cats):
    """What the probes computed before: every consumer on the whole decoded text."""
    events = []
    counts = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line[:logscan.MAX_SCAN_LINE]
        for sig in [s for s in sigs if s.scope in ("runtime", "any")]:
            m = sig.regex.search(line)
            if m and sig.unless is not None and sig.unless.search(line):
                continue  # a line the signature's `unless` names is no event
            if m and counts.get(sig.id, 0) < logscan.MAX_EVENTS_PER_SIGNATURE:
                counts[sig.id] = counts.get(sig.id, 0) + 1
                ev = {"signature": sig.id, "scope": "runtime", "source": "x", "line_no": n,
                      "line": line.strip()[:logscan.MAX_LINE]}
                ev.update(sig.fields)
                ev.update({k: v for k, v in m.groupdict().items() if v is not None})
                events.append(ev)
    return (events, cats.match_text(text, "x", ("kernel", "runtime"), "runtime"),
            parse_fallback_logs(text), parse_runtime_log(text))


def _mixed_log() -> str:
    parts = [ORT.read_text(errors="replace")]
    for p in sorted((DATA / "rockchip").glob("*.log"))[:4] + sorted((DATA / "fallback").glob("*.log"))[:6]:
        parts.append(p.read_text(errors="replace"))
    cats = load_catalogs()
    parts.append("\n".join(x for e in cats.entries() for x in e.examples[:1]))
    return "\r\n".join(parts)


def test_streamed_pass_equals_reading_whole(config, tmp_path, monkeypatch):
    sigs, cats = config
    text = _mixed_log()
    path = tmp_path / "app.log.gz"
    path.write_bytes(gzip.compress(text.encode("utf-16")))
    monkeypatch.setattr("npu_doctor.host.logstream.CHUNK_BYTES", 4099)  # many chunk seams
    scan = logscan.scan_logs(LiveHost(extra_logs=[str(path)]), sigs, cats)[0]
    whole_text = decode_log(path.read_bytes())
    assert whole_text == text
    sig_ev, cat_ev, fb, rk = _whole(text, sigs, cats)
    for e in sig_ev + cat_ev:
        e["source"] = str(path) if e["source"] == "x" else e["source"]
    want_cat = cats.match_text(text, str(path), ("kernel", "runtime"), "runtime")
    assert scan.lines == len(text.splitlines())
    assert [e["line_no"] for e in scan.signature_events] == [e["line_no"] for e in sig_ev]
    assert scan.catalog_events == want_cat and len(want_cat) > 10
    assert scan.fallback_entries == fb and fb
    assert scan.rknn == rk


def test_nothing_cut_after_8_mib_and_pass_shared(config, tmp_path, monkeypatch):
    sigs, cats = config
    path = tmp_path / "big.log"
    noise = "[  12.345678] usb 1-1.2: new high-speed USB device number 3 using xhci_hcd\n"
    with open(path, "w") as f:
        f.write(noise * (9 * 1024 * 1024 // len(noise) + 1))  # past the old 8 MiB cut
        f.write(ORT.read_text(errors="replace"))
    host = LiveHost(extra_logs=[str(path)])
    calls = []
    real = logscan.scan_one
    monkeypatch.setattr(logscan, "scan_one", lambda *a: calls.append(1) or real(*a))
    first = logscan.scan_logs(host, sigs, cats)[0]
    again = logscan.scan_logs(host, sigs, cats)[0]
    assert len(calls) == 1  # the fallback, RKNN and runtime-log probes share one pass
    want = parse_fallback_logs(ORT.read_text(errors="replace"))
    off = 9 * 1024 * 1024 // len(noise) + 1
    assert [e["line_no"] - off for e in first.fallback_entries] == [e["line_no"] for e in want]
    assert again.fallback_entries == first.fallback_entries
    assert first.notes  # read in windows: said, not silent


def test_unreadable_log_is_a_host_error(config, tmp_path):
    from npu_doctor.errors import HostError

    with pytest.raises(HostError):
        logscan.scan_logs(LiveHost(extra_logs=[str(tmp_path / "missing.log")]), *config)


def test_pasted_table_keeps_only_lines_that_start_with_a_bar():
    # a "|" elsewhere in a line (a shell pipe, a markdown cell mid-line) is not the table
    t = pastes.PastedTable()
    lines = ["+---+", "ls | grep nvidia", "old | row", "  |  NVIDIA-SMI 535.54 Driver Version: 535.54 |",
             "\t| 0  Tesla T4  Off |", "foo"]
    t.feed(lines, "\n".join(lines))
    assert t.text() == "|  NVIDIA-SMI 535.54 Driver Version: 535.54 |\n| 0  Tesla T4  Off |"
    t.feed(["no bar here"], "no bar here")
    assert t.text().endswith("| 0  Tesla T4  Off |")


def test_pasted_proc_version_keeps_the_last_nvrm_line():
    p = pastes.PastedProcVersion()
    p.feed(["no version here"], "no version here")
    assert p.line is None
    lines = ["[x][h][0]:NVRM version: NVIDIA UNIX x86_64 Kernel Module  460.80  Fri May  7 06:55:54 UTC 2021",
             "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build", "tail"]
    p.feed(lines, "\n".join(lines))
    assert p.line == lines[1]
