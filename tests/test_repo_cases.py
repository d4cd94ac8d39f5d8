"""Replay the real cases kept in tests/cases/ (same format and comparison as case-check)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from npu_doctor.tomlcompat import tomllib

from conftest import check_json, fact_values, finding_ids

HERE = Path(__file__).resolve().parent / "cases"
CASES = sorted(p for p in HERE.iterdir() if (p / "case.toml").is_file()) if HERE.is_dir() else []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_replays_as_expected(case):
    with open(case / "case.toml", "rb") as f:
        spec = tomllib.load(f)
    assert spec["case"]["source"].startswith(("https://", "constructed:"))
    exp = spec.get("expect", {})
    rep = check_json(case)
    ids = finding_ids(rep)
    assert set(exp.get("findings", [])) <= ids, sorted(ids)
    assert not set(exp.get("absent", [])) & ids, sorted(ids)
    for path, want in exp.get("facts", {}).items():
        got = fact_values(rep["facts"], path)
        if isinstance(want, str) and any(ch in want for ch in "*?["):
            assert any(isinstance(g, str) and fnmatch.fnmatchcase(g, want) for g in got), (path, got)
        else:
            assert want in got, (path, got)
