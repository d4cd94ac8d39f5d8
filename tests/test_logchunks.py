"""The catalogs over a log in chunks (catalog.chunkmatch, collectors.logscan) give what the
line-by-line path gives (iter_lines, strip_prefix, match_line on every line), on the captured
logs of the repository's and the shared board cases, with chunk seams inside a colon-wrapped
message, a CRLF pair and a `#012` line."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from npu_doctor.catalog import iter_lines, load_catalogs, strip_prefix
from npu_doctor.catalog import needles as needles_mod
from npu_doctor.catalog.chunkmatch import LogClassifier
from npu_doctor.catalog.events import apply_cleared, group_by_subject
from npu_doctor.catalog.logtext import literal_needle_sets
from npu_doctor.catalog.needles import LineNeedles
from npu_doctor.catalog.schema import MAX_EVENTS_PER_ENTRY, MAX_SCAN_LINE
from npu_doctor.collectors import logscan
from npu_doctor.host import LiveHost
from npu_doctor.probes import load_signatures, load_specs

ROOT = Path(__file__).resolve().parent
CATS = load_catalogs()
SCOPES = ("kernel", "runtime")
LOGS = sorted(p for base in (ROOT / "cases", Path("/work/shared/cases")) if base.is_dir()
              for p in base.glob("*/logs/**/*") if p.is_file())
LOGS += sorted((ROOT / "data").rglob("*.log"))


def line_path(lines, source="x", scopes=SCOPES, log_scope="runtime") -> List[Dict[str, Any]]:
    """match_lines as it was: every line through iter_lines, strip_prefix and match_line."""
    events: List[Dict[str, Any]] = []
    by_key: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    per_entry: Dict[Tuple[str, str], int] = {}
    pending: Dict[str, List[Any]] = {}  # `by_device` lines: device -> (entry, groups, n, raw, msg)

    def add(entry, groups, n, raw, msg) -> None:
        k = (entry.catalog, entry.key, msg)
        if k in by_key:
            by_key[k]["count"] += 1
            return
        ek = (entry.catalog, entry.key)
        if per_entry.get(ek, 0) >= MAX_EVENTS_PER_ENTRY:
            return
        per_entry[ek] = per_entry.get(ek, 0) + 1
        by_key[k] = CATS._event(entry, groups, source, n, raw, log_scope)
        events.append(by_key[k])

    for n, raw in enumerate(iter_lines(lines), 1):
        raw = raw[:MAX_SCAN_LINE]
        msg = strip_prefix(raw)
        for entry, groups in CATS.match_line(msg, scopes):
            device = CATS.pending_device(entry, groups)
            if device is None:
                add(entry, groups, n, raw, msg)
            elif len(pending.setdefault(device, [])) < MAX_EVENTS_PER_ENTRY:
                pending[device].append((entry, groups, n, raw, msg))
    # a bus line about a device counts when an accelerator driver's line names that device
    owner: Dict[str, str] = {}
    for ev in list(events):
        name = ev.get("driver") if ev.get("driver") in CATS.drivers else ev.get("module")
        if name in CATS.drivers and ev.get("device"):
            owner.setdefault(ev["device"], name)
    for device, held in pending.items():
        for entry, groups, n, raw, msg in held if device in owner else ():
            add(entry, dict(groups, module=owner[device]), n, raw, msg)
    events.sort(key=lambda ev: ev["line_no"])
    apply_cleared(events, CATS._cleared)
    group_by_subject(events)
    for ev in events:
        if ev["count"] > 1:
            ev["message"] += f" ({ev['count']} times)"
    return events


def chunked(lines, sizes, source="x") -> List[Dict[str, Any]]:
    run = LogClassifier(CATS, source, SCOPES, "runtime")
    i = 0
    for size in sizes:
        run.feed(lines[i:i + size])
        i += size
    run.feed(lines[i:])
    return run.finish()


def _text(p: Path) -> str:
    from npu_doctor.host.logfile import decode_log

    return decode_log(p.read_bytes())


def tricky_log() -> str:
    """Every catalog example, each also wrapped after its last colon, behind an rsyslog `#012`
    escape and behind a dmesg prefix, with CRLF line ends in places and long lines."""
    rnd = random.Random(14)
    out: List[str] = []
    for e in CATS.entries():
        for ex in e.examples:
            out.append(ex)
            head, sep, rest = ex.rpartition(": ")
            if sep and rest[:1]:
                out.append(f"[   1.5] {head}:\n{rest[0].lower()}{rest[1:]}")
                out.append(f"Mar  4 10:00:00 host kernel: {head}:#012{rest}#011x")
            out.append(f"[{rnd.random() * 99:12.6f}] {ex}" + ("\r" if rnd.random() < 0.3 else ""))
            if rnd.random() < 0.05:
                out.append("x" * 5000 + ex)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_chunked_equals_line_path_on_captured_logs(path):
    lines = _text(path).splitlines()
    want = line_path(lines)
    assert CATS.match_lines(lines, "x", SCOPES, "runtime") == want
    rnd = random.Random(len(lines))
    assert chunked(lines, [rnd.randint(1, 7) for _ in range(len(lines) // 3)]) == want


def test_chunked_equals_line_path_with_seams_everywhere():
    lines = tricky_log().splitlines()
    want = line_path(lines)
    joined = list(iter_lines(lines))
    assert len(joined) > len(lines) and joined.count("") > 500  # #012 split, wrapped lines joined
    assert len(want) > 100
    for sizes in ([1] * len(lines), [2, 3, 1] * len(lines), [4096]):
        assert chunked(lines, sizes) == want


def test_scan_logs_chunk_seams_inside_wrapped_crlf_and_escaped_lines(tmp_path, monkeypatch):
    load_specs()
    sigs = load_signatures([])
    text = "\r\n".join(_text(p) for p in LOGS[:40]) + tricky_log()
    path = tmp_path / "app.log"
    path.write_bytes(text.encode())
    want = line_path(text.splitlines(), source=str(path))
    for size in (97, 4099, 65536):  # a seam every few lines, and a few seams in all
        monkeypatch.setattr("npu_doctor.host.logstream.CHUNK_BYTES", size)
        scan = logscan.scan_logs(LiveHost(extra_logs=[str(path)]), sigs, CATS)[0]
        assert scan.lines == len(text.splitlines())
        assert scan.catalog_events == want


def test_needles_never_hide_a_match_in_any_example_or_real_log_line():
    # the prefilter against no prefilter: every regex on every message of every catalog
    # example and every line of every real log we keep; where it matches, the line holds the
    # pattern's needle and one needle of each of its needle sets
    msgs = {strip_prefix(ex) for e in CATS.entries() for ex in e.examples}
    for path in LOGS:
        msgs.update(strip_prefix(line) for line in iter_lines(_text(path).splitlines()))
    lows = [(msg, msg.lower()) for msg in msgs if msg]
    assert len(lows) > 5000
    for m in CATS.matchers:
        sets = literal_needle_sets(m.rx.pattern, m.rx.flags) + ([m.needles] if m.needles else [])
        for msg, low in lows:
            if m.rx.search(msg):
                assert all(any(n in low for n in s) for s in sets), (m.rx.pattern, sets, msg)


def test_needle_sets_of_a_pattern():
    assert literal_needle_sets(r"rknn_\w+ ?(?:fail|error)\w* ret=(?P<code>-\d+)") == \
        [["rknn_"], ["error", "fail"], [" ret="]]
    got = literal_needle_sets(r"(?i)(?:result|error|code)[^\n]{0,40}?\b(?P<code>(?:1879|2013)\d{6})\b")
    assert got == [["code", "error", "result"], ["1879", "2013"]]
    assert literal_needle_sets(r"a+b") == []


def _engines():
    """Each scan path this install can run: str.find always, the others when installed."""
    out = ["find"]
    if needles_mod._ahocorasick is not None:
        out.append("automaton")
    if needles_mod._hyperscan() is not None:
        out.append("hyperscan")
    return out


def _scanner(needles, engine):
    return LineNeedles(needles, use_automaton=engine != "find",
                       engine="hyperscan" if engine == "hyperscan" else "automaton")


@pytest.mark.parametrize("engine", _engines())
def test_line_needles_per_line(engine):
    scanner = _scanner(["status", "tatus", "rknn_", "Err_", "café"], engine)
    # a non-ASCII letter before a needle: Hyperscan's offsets are of the UTF-8 bytes
    text = "Status ok\nnothing\nrknn_err_x rknn_\n\nlast tatus\n\u00e9t\u00e9 CAF\u00c9 status"
    got = {i: sorted(v) for i, v in scanner.scan(text.lower()).items()}
    assert got == {0: ["status", "tatus"], 2: ["err_", "rknn_"], 4: ["tatus"],
                   5: ["café", "status", "tatus"]}
    if engine == "hyperscan":
        assert scanner._hs, "the Hyperscan database was not built"


@pytest.mark.parametrize("engine", [e for e in _engines() if e != "find"])
def test_every_scan_path_finds_the_same_needles_in_real_logs(engine):
    # the needles logscan shares (catalogs, signatures, parser triggers) over every real log
    needles = sorted(set(logscan.PARSER_NEEDLES) | set(LogClassifier(CATS, "x", SCOPES, "runtime").needles.needles))
    ref, other = _scanner(needles, "find"), _scanner(needles, engine)
    for path in LOGS:
        low = path.read_text(errors="replace").lower()
        want = {i: sorted(v) for i, v in ref.scan(low).items()}
        assert {i: sorted(v) for i, v in other.scan(low).items()} == want, path


@pytest.mark.skipif(needles_mod._hyperscan() is None, reason="hyperscan not installed")
def test_hyperscan_takes_over_past_the_threshold(monkeypatch):
    monkeypatch.setattr(needles_mod, "HYPERSCAN_AFTER_CHARS", 30)
    scanner = LineNeedles(["status", "rknn_"])
    chunk = "x status\nrknn_ y\nnone"
    assert scanner.scan(chunk) == {0: ["status"], 1: ["rknn_"]} and scanner._hs is None
    assert scanner.scan(chunk) == {0: ["status"], 1: ["rknn_"]} and scanner._hs
