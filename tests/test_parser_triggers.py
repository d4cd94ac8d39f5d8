"""The whole-text fallback parsers are given a log window only when it holds one of their
trigger literals (parsers.fallback.TRIGGERS, found by collectors.logscan's shared needle scan),
and inside a window they jump from one candidate line to the next (common.candidate_lines):
both must leave what they find unchanged, on every real log we keep."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from npu_doctor.catalog.needles import LineNeedles
from npu_doctor.collectors.logscan import PARSER_NEEDLES
from npu_doctor.host.logfile import decode_log
from npu_doctor.parsers.fallback import PARSERS, TRIGGERS, parse_fallback_logs
from npu_doctor.parsers.fallback.common import candidate_lines, clean_line, lines_with, log_lines

ROOT = Path(__file__).resolve().parent
LOGS = sorted((ROOT / "data" / "fallback").glob("*.log"))
LOGS += sorted(p for p in (ROOT / "cases").glob("*/logs/*") if p.is_file())


def _present(text: str):
    """The PARSER_NEEDLES a text holds, as the shared scan reports them."""
    scan = LineNeedles(sorted(PARSER_NEEDLES)).scan(text.lower())
    return {n for got in scan.values() for n in got}


def _text(path: Path) -> str:
    return "\n".join(decode_log(path.read_bytes()).splitlines())


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_parsers_given_only_their_triggered_windows_find_the_same(path):
    text = _text(path)
    assert parse_fallback_logs(text, _present(text)) == parse_fallback_logs(text)


def test_every_parser_finds_something_in_some_real_log_and_only_with_its_trigger():
    """Each parser's trigger literals are its real first test: on the logs where it finds
    entries, the text holds one of them (so the gate above is about something)."""
    found = {fn: 0 for fn in PARSERS}
    for path in LOGS:
        text = _text(path)
        present = _present(text)
        for fn in PARSERS:
            if fn(text):
                found[fn] += 1
                assert not present.isdisjoint(TRIGGERS[fn]), (fn.__name__, path)
    assert all(found.values()), {fn.__name__: n for fn, n in found.items()}


def test_a_colour_code_inside_a_trigger_still_reaches_the_parser():
    """clean_line removes ANSI escapes: a literal split by one is a literal once cleaned."""
    text = _text(ROOT / "data" / "fallback" / "ort_1.14_cuda_sherpa_onnx_163.log")
    coloured = text.replace("placed on [", "placed \x1b[1mon\x1b[0m [")
    assert "placed on [" not in coloured
    want = parse_fallback_logs(text)
    assert want
    got = parse_fallback_logs(coloured, _present(coloured))
    assert [(e["op"], e["line_no"]) for e in got] == [(e["op"], e["line_no"]) for e in want]


def test_candidate_lines_are_the_lines_a_line_by_line_test_finds():
    rnd = random.Random(7)
    words = ["placed on [", "Status", "usb 1-1", "OpType", "\x1b[0m", "x\ry", "", "Target:", "a"]
    needles = ("placed on [", "Status", "OpType", "Target:")
    for _ in range(300):
        text = "\n".join(" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 4)))
                         for _ in range(rnd.randint(1, 30)))
        raw = text.split("\n")
        assert lines_with(text, needles) == [i for i, s in enumerate(raw) if any(n in s for n in needles)]
        lines = log_lines(text)
        assert lines == [clean_line(x) for x in text.split("\n")]
        cands = set(candidate_lines(text, needles))
        assert {i for i, s in enumerate(lines) if any(n in s for n in needles)} <= cands
