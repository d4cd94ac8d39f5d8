"""Where a streamed log is cut into pieces: the fallback/RKNN parser windows overlap, so a
real ONNX Runtime `Node placements` block or RKNN layer table across a window seam reads as
in the whole text; a line with no break in sight is bounded (host.logstream.MAX_LINE_CHARS)
and said; the decoded text pieces capture copies add up to the whole log."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from npu_doctor.collectors import logscan
from npu_doctor.host import LiveHost, logstream
from npu_doctor.host.logfile import decode_log
from npu_doctor.parsers.fallback import parse_fallback_logs
from npu_doctor.parsers.rknn import parse_runtime_log

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data" / "fallback"
SHARED = Path("/work/shared/cases")
#: real captured blocks: ORT 1.14 placements (sherpa-onnx#163), RKNN build and runtime layer
#: tables, the torch_npu fallback warnings of a board case, an ORT verbose case log
BLOCKS = [DATA / "ort_1.14_cuda_sherpa_onnx_163.log", DATA / "rknn_build_layer_table_fp16.log",
          DATA / "rknn_runtime_log_level4_lenet_userguide.log"]
BLOCKS += [p for p in (SHARED / "c3-14-ort-verbose-node-placements/logs/onnxruntime.log",
                       SHARED / "c3-09-torch-npu-nms-isin-fallback/logs/torch_npu.log",
                       SHARED / "c3-04-rknn-vit-node-target-cpu/logs/rknn-toolkit2.log")
           if p.is_file()]
NOISE = "[  12.345678] usb 1-1.2: new high-speed USB device number {} using xhci_hcd"


def _windowed(text: str) -> logscan.LogScan:
    return logscan.scan_one("x", [text.splitlines()], [], None)


W = 32768


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 32 KiB (overlap at most 8 KiB) so a real block spans a seam."""
    monkeypatch.setattr(logscan, "WINDOW_CHARS", W)
    monkeypatch.setattr(logscan, "OVERLAP_CHARS", W // 4)


def _around_seam(block, drop: int, shift: int):
    """Noise, the block, noise: `drop` noise lines fewer before the block moves the block one
    line earlier against the first window seam (at W characters)."""
    head, acc = ["x" * shift], shift + 1
    while acc < W:  # the first window closes on the last line of head
        head.append(NOISE.format(len(head)))
        acc += len(head[-1]) + 1
    return head[: len(head) - drop] + block + [NOISE.format(i) for i in range(200)]


@pytest.mark.parametrize("path", BLOCKS, ids=lambda p: p.name)
def test_block_across_a_window_seam_reads_as_whole(path, small_windows):
    block = decode_log(path.read_bytes()).splitlines()
    assert parse_fallback_logs("\n".join(block)), "a block the parsers read"
    seams_inside = 0
    # the seam walks through the block: every line of it is the first after a seam once
    for drop in range(sum(len(x) + 1 for x in block) // len(NOISE) + 3):
        for shift in (0, 41):  # a seam at two places in each line
            lines = _around_seam(block, drop, shift)
            text = "\n".join(lines)
            scan = _windowed(text)
            assert scan.fallback_entries == parse_fallback_logs(text), (drop, shift)
            assert scan.rknn == parse_runtime_log(text)
            seams_inside += _seam_inside(lines, block)
    assert seams_inside >= min(3, len(block) - 1)


def _seam_inside(lines, block) -> bool:
    """Whether the first window closes inside the block."""
    acc, start = 0, len(lines) - 200 - len(block)
    for i, line in enumerate(lines):
        acc += len(line) + 1
        if acc >= W:
            return start <= i < start + len(block) - 1
    return False


def test_without_overlap_the_seam_splits_a_block(small_windows, monkeypatch):
    """The test above is about something: with no overlap, a table cut by a seam loses rows."""
    monkeypatch.setattr(logscan, "OVERLAP_LINES", 0)
    block = decode_log((DATA / "rknn_build_layer_table_fp16.log").read_bytes()).splitlines()
    differ = 0
    for drop in range(sum(len(x) + 1 for x in block) // len(NOISE) + 3):
        text = "\n".join(_around_seam(block, drop, 0))
        differ += _windowed(text).fallback_entries != parse_fallback_logs(text)
    assert differ


def test_overlap_and_tail_keep_line_numbers_on_a_big_log(monkeypatch):
    """Real window sizes: blocks every ~0.9 MiB in a 6 MiB log, entries at their lines."""
    block = decode_log(BLOCKS[1].read_bytes())
    noise = "\n".join(NOISE.format(i) for i in range(12000))
    text = "\n".join([noise, block] * 6)
    scan = _windowed(text)
    assert scan.lines == len(text.splitlines())
    # each block once: the RKNN parser counts a node once per log, and per window here
    got = [(e["line_no"], e["op"]) for e in scan.fallback_entries]
    assert got and len(got) == len(set(got))
    lines = text.splitlines()
    assert all(op in lines[n - 1] for n, op in got)
    assert "windows" in scan.notes[0]


# -- one line with no break in sight ---------------------------------------------------------
def test_line_without_breaks_is_cut_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(logstream, "MAX_LINE_CHARS", 10000)
    monkeypatch.setattr(logstream, "CHUNK_BYTES", 4096)
    ort = (DATA / "ort_1.14_cuda_sherpa_onnx_163.log").read_text()
    text = "first line\r\n" + "{\"k\": 1}" * 5000 + "\r\n" + ort + "z" * 25000
    path = tmp_path / "app.log"
    path.write_bytes(text.encode())
    cut = []
    got = [x for lines in logstream.iter_log_chunks(str(path), cut_lines=cut) for x in lines]
    want = text.splitlines()
    assert len(got) == len(want)
    assert got[1] == want[1][:10000] and got[-1] == want[-1][:10000]
    assert got[2:-1] == want[2:-1] and got[0] == want[0]
    assert cut == [{"line_no": 2, "chars": 40000, "kept_chars": 10000},
                   {"line_no": len(want), "chars": 25000, "kept_chars": 10000}]
    # through the runtime-log scan: the ORT block after the long line is read at its lines
    scan = logscan.scan_logs(LiveHost(extra_logs=[str(path)]), [], None)[0]
    assert scan.cut_lines == cut
    assert [e["line_no"] for e in scan.fallback_entries] == \
        [e["line_no"] + 2 for e in parse_fallback_logs(ort)]


def test_cut_line_ended_by_cr_and_crlf_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(logstream, "MAX_LINE_CHARS", 100)
    monkeypatch.setattr(logstream, "CHUNK_BYTES", 64)
    text = "a" * 150 + "\r" + "b" * 10 + "\r\n" + "c" * 300 + "\r\n" + "d\n"
    path = tmp_path / "x.log"
    path.write_bytes(text.encode())
    for size in (7, 64, 101, 151, 4096):
        monkeypatch.setattr(logstream, "CHUNK_BYTES", size)
        cut = []
        got = [x for lines in logstream.iter_log_chunks(str(path), cut_lines=cut) for x in lines]
        assert got == ["a" * 100, "b" * 10, "c" * 100, "d"], size
        assert [(c["line_no"], c["chars"]) for c in cut] == [(1, 150), (3, 300)], size


def test_a_gigantic_single_line_costs_bounded_memory(tmp_path):
    import tracemalloc

    path = tmp_path / "one.log.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        for _ in range(48):
            f.write(b"x" * (1 << 20))  # 48 MiB, no line break
    tracemalloc.start()
    cut = []
    n = sum(len(lines) for lines in logstream.iter_log_chunks(str(path), cut_lines=cut))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 1 and cut == [{"line_no": 1, "chars": 48 << 20, "kept_chars": 1 << 20}]
    assert peak < 12 << 20


# -- the text pieces capture copies -----------------------------------------------------------
@pytest.mark.parametrize("size", [5, 4099, 1 << 18])
def test_text_pieces_add_up_to_the_whole_log(tmp_path, monkeypatch, size):
    monkeypatch.setattr(logstream, "CHUNK_BYTES", size)
    monkeypatch.setattr(logstream, "MAX_LINE_CHARS", 3000)
    text = "\r\n".join(decode_log(p.read_bytes()) for p in BLOCKS) + "y" * 7000 + "\nend"
    path = tmp_path / "x.log.gz"
    path.write_bytes(gzip.compress(text.encode("utf-16")))
    pieces = list(logstream.iter_log_text(str(path)))
    assert "".join(pieces) == decode_log(path.read_bytes()) == text
    assert all(p.endswith("\n") or len(p) > 3000 for p in pieces[:-1])


def test_a_cut_line_is_an_info_finding(tmp_path):
    from conftest import check_json, make_snapshot

    ort = (DATA / "ort_1.14_cuda_sherpa_onnx_163.log").read_text()
    snap = make_snapshot(tmp_path / "s", logs={"app.log": "a" * (3 << 19) + "\n" + ort})
    rep = check_json(snap)
    got = [f for f in rep["findings"] if f["id"] == "input-truncated"]
    assert [(f["subject"], f["severity"]) for f in got] == [("logs/app.log:1", "info")]
    assert "1,572,864 characters long" in got[0]["message"]
    assert rep["facts"]["truncated"][0]["kept_chars"] == logstream.MAX_LINE_CHARS
    assert rep["facts"]["fallback"]["count"]  # the log after the cut line was read on
