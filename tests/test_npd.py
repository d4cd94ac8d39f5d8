"""Node Problem Detector: `check --format npd` run the way NPD's custom plugin monitor runs it
(its own process group, the configured timeout, stdout trimmed and cut to max_output_length,
exit 0 OK / 1 NonOK / anything else Unknown), and the shipped configs are current and cover
every rule."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import REPO, case_path

NPD_DIR = REPO / "deploy" / "node-problem-detector"


def load(name):
    return json.loads((NPD_DIR / name).read_text())


def duration(text):
    m = re.fullmatch(r"(\d+)s", text)
    assert m, text
    return int(m.group(1))


def run_like_npd(rule, cfg, snapshot):
    """NPD's plugin.go run(): the command in its own process group, killed on timeout; stdout
    read up to 4 KiB, trimmed, cut to max_output_length; status from the exit code."""
    argv = [sys.executable, "-m", "npu_doctor", *rule["args"], "--snapshot", str(snapshot)]
    timeout = duration(rule.get("timeout") or cfg["pluginConfig"]["timeout"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO),
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "Unknown", f"Timeout when running plugin {rule['path']}"
    raw = out[:4096].decode("utf-8", "replace").strip()
    message = raw.encode()[:cfg["pluginConfig"]["max_output_length"]].decode("utf-8", "ignore")
    assert len(raw.encode()) <= 80 and "\n" not in raw, raw   # we never rely on the cut
    return {0: "OK", 1: "NonOK"}.get(proc.returncode, "Unknown"), message


def conditions_of(case):
    cfg = load("npu-doctor-plugin-monitor.json")
    return {r["condition"]: run_like_npd(r, cfg, case_path(case)) for r in cfg["rules"]}


def test_healthy_board_is_ok_in_every_condition():
    got = conditions_of("k05-rk3588-healthy")
    assert {c: s for c, (s, _m) in got.items()} == {
        "NPUDriverProblem": "OK", "NPUVersionProblem": "OK", "NPUThermalProblem": "OK",
        "NPUPowerProblem": "OK", "NPUCPUFallback": "OK"}
    assert all(m.startswith("ok: ") for _s, m in got.values())


@pytest.mark.parametrize("case, condition, finding", [
    ("k01-rk3588-npu-autosuspend", "NPUPowerProblem", "runtime-autosuspend"),
    ("k02-rk3588-soc-thermal-throttling", "NPUThermalProblem", "thermal-throttling"),
    ("c2-04-ivpu-accel-permission-denied", "NPUDriverProblem", "device-node-permission"),
    ("c1-09-hailo-driver-423-lib-422", "NPUVersionProblem", "runtime-driver-mismatch"),
    ("c3-14-ort-verbose-node-placements", "NPUCPUFallback", "cpu-fallback-logged"),
])
def test_a_problem_sets_its_area_condition_and_names_the_finding(case, condition, finding):
    got = conditions_of(case)
    state, message = got[condition]
    assert state == "NonOK" and message.startswith(finding), (case, got)
    others = {c: s for c, (s, _m) in got.items() if c != condition}
    assert "NonOK" not in others.values() or case.startswith("c2-04"), others


def test_a_check_that_could_not_be_made_is_unknown_not_ok():
    state, message = conditions_of("c1-12-coral-apex-no-thermal-attrs")["NPUThermalProblem"]
    assert state == "Unknown" and message.startswith("sensor-unavailable")


def test_usage_error_is_unknown_with_a_line_on_stdout(tmp_path):
    res = subprocess.run([sys.executable, "-m", "npu_doctor", "check", "--format", "npd", "--snapshot",
                          str(tmp_path / "missing")], capture_output=True, text=True, cwd=str(REPO), timeout=60)
    assert res.returncode == 2 and res.stdout.startswith("unknown: ") and len(res.stdout.strip()) <= 80


def test_status_line_is_cut_to_80_bytes_with_non_ascii():
    from npu_doctor.deploy.npd import status

    class F:
        id, severity, subject = "thermal-throttling", "warning", "npu-thermal " + "°" * 60
        title = "A very long title"

    code, line = status([F(), F()], "warning")
    assert code == 1 and len(line.encode()) <= 80 and line.endswith("(+1 more)")
    assert status([F()], "error") == (0, "ok: no problem found (1 below error)")


def test_configs_are_current():
    res = subprocess.run([sys.executable, "-m", "npu_doctor.deploy.npd", "--check", str(NPD_DIR)],
                         capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "left out" not in res.stderr   # every shipped kernel signature is RE2-compatible


def test_every_rule_belongs_to_one_area_and_every_area_rule_exists():
    from npu_doctor.deploy.npd import AREAS, NOT_A_CONDITION, NOT_A_CONDITION_PREFIXES
    from npu_doctor.rules import load_rules

    known = {r.id for r in load_rules().rules if not r.id.startswith(NOT_A_CONDITION_PREFIXES)}
    placed = [rid for _c, _a, ids in AREAS for rid in ids]
    assert len(placed) == len(set(placed))
    assert set(placed) <= known, set(placed) - known
    assert known - set(placed) - NOT_A_CONDITION == set()
    cfg = load("npu-doctor-plugin-monitor.json")
    assert {c["type"] for c in cfg["conditions"]} == {r["condition"] for r in cfg["rules"]}
    for r in cfg["rules"]:
        assert duration(r["timeout"]) <= duration(cfg["pluginConfig"]["timeout"])   # NPD validation


def _dmesg_lines(case):
    from npu_doctor.tomlcompat import tomllib

    with open(case_path(case) / "commands.toml", "rb") as f:
        cmds = tomllib.load(f).get("command", [])
    for c in cmds:
        if c.get("argv") == ["dmesg"]:
            for line in c.get("stdout", "").splitlines():
                # /dev/kmsg records carry the text without dmesg's "[   12.345678] " stamp
                yield re.sub(r"^\[\s*[0-9.]+\]\s*", "", line)


def test_kernel_monitor_matches_the_kernel_lines_of_the_cases_as_npd_does():
    """Every kernel line of a case that a catalog entry raises a rule for is a line the
    generated NPD monitor matches too (NPD matches the message without the dmesg prefix)."""
    from npu_doctor.catalog import load_catalogs, strip_prefix

    cs = load_catalogs()
    rules = load("npu-doctor-kernel-monitor.json")["rules"]
    # NPD: regexp.MustCompile(pattern + `\z`).MatchString(message); Python spells \z as \Z
    compiled = [(r, re.compile(r["pattern"].replace(r"\z", r"\Z") + r"\Z")) for r in rules]
    checked = 0
    cases = [p.name for p in case_path("k05-rk3588-healthy").parent.iterdir() if (p / "commands.toml").exists()]
    for case in cases:
        for line in _dmesg_lines(case):
            msg = strip_prefix(line)
            hits = [e.key for e, _ in cs.match_line(msg, ("kernel",)) if e.rule]
            if not hits:
                continue
            npd = [r["reason"] for r, rx in compiled if rx.search(msg)]
            assert npd, (case, line, hits)
            checked += 1
    assert checked >= 5


def test_kernel_monitor_matches_every_catalog_example_it_carries():
    """Each example of a rule-raising kernel catalog entry is matched by the NPD monitor
    (generic classes only for the accelerator drivers they are narrowed to; not the
    `by_device` lines, whose device only the whole log attributes)."""
    from npu_doctor.catalog import load_catalogs, strip_prefix

    cs = load_catalogs()
    rules = {r["pattern"] for r in load("npu-doctor-kernel-monitor.json")["rules"]}
    compiled = [re.compile(p.replace(r"\z", r"\Z") + r"\Z") for p in rules]
    checked = 0
    for e in cs.entries():
        if e.benign or not e.rule or e.scope not in ("kernel", "any") or e.by_device:
            continue
        cat = next(c for c in cs.catalogs if c.id == e.catalog)
        if cat.scope not in ("kernel", "any"):
            continue
        for ex in e.examples:
            if cs.entry_matches(e, ex) is None:
                continue
            msg = strip_prefix(ex)
            assert any(rx.search(msg) for rx in compiled), (e.catalog, e.key, ex)
            checked += 1
    assert checked >= 100
