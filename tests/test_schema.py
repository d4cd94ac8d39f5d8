"""The JSON Schemas (2020-12) of `check --format json` and `watch --log-format json` events:
the report of every real board case and of this host validates, and so does every event."""

from __future__ import annotations

import json

import pytest

from conftest import CASES, REPO, run_cli
from test_watch import Daemon, board, write, zone_temp_file  # noqa: F401  (board: fixture)

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_DIR = REPO / "npu_doctor" / "schema"
REPO_CASES = REPO / "tests" / "cases"


def validator(name):
    schema = json.loads((SCHEMA_DIR / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def errors_of(v, doc):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)][:5]


def check_json(*args):
    res = run_cli("check", "--format", "json", *args)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def test_report_names_its_schema_and_the_schema_is_shipped():
    from npu_doctor.check import SCHEMA_URL

    schema = json.loads((SCHEMA_DIR / "report-v1.json").read_text())
    assert schema["$id"] == SCHEMA_URL and schema["$schema"].endswith("2020-12/schema")


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases not present")
def test_every_case_report_validates():
    v = validator("report-v1.json")
    cases = sorted(p for d in (CASES, REPO_CASES) if d.is_dir() for p in d.iterdir()
                   if (p / "case.toml").exists())
    assert len(cases) >= 10
    # the configuration is loaded once and each case's report rendered as `check --format json`
    # renders it (a CLI run per case re-reads every data file: ~1 s each under Python 3.8, for
    # 800+ cases in one test that xdist cannot spread); the CLI's own JSON path is
    # test_cli_json_is_the_rendered_report below
    from npu_doctor.check import Config, run_check
    from npu_doctor.host.snapshot import SnapshotHost
    from npu_doctor.report import render_json

    config = Config.load()
    bad = {}
    for case in cases:
        host = SnapshotHost(str(case))
        try:
            report = json.loads(render_json(run_check(host, config)))
        finally:
            host.close()
        assert report["$schema"].endswith("/report-v1.json")
        errs = errors_of(v, report)
        if errs:
            bad[case.name] = errs
    assert not bad, bad


def test_cli_json_is_the_rendered_report():
    """`check --format json` prints what render_json makes of the check (volatile fields aside)."""
    from npu_doctor.check import Config, run_check
    from npu_doctor.host.snapshot import SnapshotHost
    from npu_doctor.report import render_json

    case = sorted(p for p in REPO_CASES.iterdir() if (p / "case.toml").exists())[0]
    cli = check_json("--snapshot", str(case))
    host = SnapshotHost(str(case))
    try:
        direct = json.loads(render_json(run_check(host, Config.load())))
    finally:
        host.close()
    volatile = {"generated_at", "duration_s", "probes"}
    assert {k: v for k, v in cli.items() if k not in volatile} == \
        {k: v for k, v in direct.items() if k not in volatile}


def test_this_hosts_report_validates():
    v = validator("report-v1.json")
    report = check_json()
    assert report["host"]["source"] == "live"
    assert errors_of(v, report) == []


def test_schema_rejects_what_the_contract_forbids():
    v = validator("report-v1.json")
    report = check_json("--snapshot", str(CASES / "k01-rk3588-npu-autosuspend")) if CASES.is_dir() else None
    if report is None:
        pytest.skip("../shared/cases not present")
    assert report["findings"]
    broken = json.loads(json.dumps(report))
    broken["findings"][0]["severity"] = "critical"
    broken["facts"]["accelerators"][0]["vendor"] = "rockchip"
    broken["probes"][0]["status"] = "fine"
    msgs = " ".join(errors_of(v, broken))
    assert "critical" in msgs and "rockchip" in msgs and "fine" in msgs


def test_watch_events_validate(board):  # noqa: F811
    v = validator("event-v1.json")
    d = Daemon(board, "--interval", "0.2", "--check-interval", "1")
    try:
        d.wait_note("READY=1")
        write(zone_temp_file(board, "soc-thermal"), "90000\n")
        events = [d.wait_event("throttling-start")]
        write(zone_temp_file(board, "soc-thermal"), "40000\n")
        events.append(d.wait_event("throttling-end"))
        npu = board / "fs/sys/devices/platform/fdab0000.npu/power"
        write(npu / "autosuspend_delay_ms", "2000\n")
        write(npu / "control", "auto\n")
        events.append(d.wait_event("finding-raised", 15))
        events += d.drain_events(0.5)
    finally:
        d.close()
    for ev in events:
        assert errors_of(v, ev) == [], ev
    bad = dict(events[0], event="exploded")
    assert errors_of(v, bad)


def test_verify_report_validates_with_its_lock_section(tmp_path):
    import jsonschema

    from conftest import case_path

    case = case_path("k05-rk3588-healthy")
    lock = tmp_path / "k.lock"
    assert run_cli("lock", "--snapshot", str(case), "-o", str(lock)).returncode == 0
    proc = run_cli("verify", str(lock), "--snapshot", str(case), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["lock"]["differences"] == 0
    schema = json.loads((REPO / "npu_doctor/schema/report-v1.json").read_text())
    jsonschema.validate(rep, schema)
