"""Why NVIDIA clocks are held down: clock event reasons of every driver generation, the R550+
time counters, power limits, a `-q` report pasted into a log, and the power-throttling /
thermal-throttling findings they give.

Real outputs: tests/data/nvidia (SOURCES.md) and the cases y201 (ollama#6163, 545.29.06) and
y202 (ollama#13552, 580.95.05).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.parsers.nvidia import parse_nvidia_smi_q
from npu_doctor.parsers.nvidia_clocks import counters, power_limits, power_reasons, reasons
from npu_doctor.parsers.nvidia_query import sample_record
from npu_doctor.tomlcompat import tomllib

from conftest import check_json, finding_ids, make_snapshot

DATA = Path(__file__).parent / "data" / "nvidia"
SMI_418 = (DATA / "smi-q-418.67-v100-sxm2.txt").read_text()
SMI_590 = (DATA / "smi-q-590.48.01-h100-idle.txt").read_text()
CASES = Path(__file__).parent / "cases"
Y201 = tomllib.loads((next(CASES.glob("y201-*")) / "commands.toml").read_text())["command"][0]["stdout"]
Y202 = (next(CASES.glob("y202-*")) / "logs" / "nvidia-smi-q.txt").read_text()


def _smi(text: str):
    return [{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]


# -- reasons ---------------------------------------------------------------------------------------
def test_545_sw_power_cap_is_a_power_reason():
    g = parse_nvidia_smi_q(Y201)["gpus"][0]
    assert g["clocks_event_reasons"] == ["SW Power Cap"]
    assert g["power_throttle_reasons"] == ["SW Power Cap"] and g["thermal_throttle_reasons"] == []
    assert "clocks_event_counters" not in g  # 545 prints no counters: unknown, not zero


def test_352_section_with_unknown_reason():
    # fangq/mcx#18 (driver 352.63): no sub-reasons under HW Slowdown, an "Unknown" entry
    sec = {"Idle": "Not Active", "Applications Clocks Setting": "Not Active",
           "SW Power Cap": "Not Active", "HW Slowdown": "Not Active", "Unknown": "Active"}
    assert reasons(sec) == {"active": ["Unknown"], "thermal": [], "power": []}
    assert reasons("N/A") is None


@pytest.mark.parametrize("active,power", [
    (["HW Slowdown"], ["HW Slowdown"]),                                   # R3xx: cause not named
    (["HW Slowdown", "HW Thermal Slowdown"], []),                         # thermal, not power
    (["HW Slowdown", "HW Power Brake Slowdown"], ["HW Power Brake Slowdown"]),
    (["SW Power Cap", "Idle"], ["SW Power Cap"]),
    (["SW Thermal Slowdown"], []),
])
def test_power_reasons(active, power):
    assert power_reasons(active) == power


def test_query_bitmask_names_unknown_and_power():
    rec = sample_record({"clocks_throttle_reasons.active": "0x8000000000000004"})
    assert rec["clocks_event_reasons"] == ["SW Power Cap", "Unknown"]
    assert rec["power_throttle_reasons"] == ["SW Power Cap"]


# -- counters --------------------------------------------------------------------------------------
def test_580_counters_in_seconds():
    g = parse_nvidia_smi_q(Y202)["gpus"][0]
    c = g["clocks_event_counters"]
    assert c["sw_thermal_s"] == pytest.approx(173.453) and c["hw_thermal_s"] == pytest.approx(0.404)
    assert c["sw_power_cap_s"] == 0 and c["hw_power_brake_s"] == 0
    assert c["thermal_s"] == pytest.approx(173.857) and c["power_s"] == 0
    assert g["clocks_event_reasons"] == [] and g["pci_address"] == "000f:01:00.0"


def test_590_idle_counters_are_zero():
    c = parse_nvidia_smi_q(SMI_590)["gpus"][0]["clocks_event_counters"]
    assert c["thermal_s"] == 0 and c["power_s"] == 0
    assert counters({"SW Power Capping": "N/A"}) is None


# -- power limits ------------------------------------------------------------------------------------
def test_power_limits_both_generations():
    g418 = parse_nvidia_smi_q(SMI_418)["gpus"][0]
    assert (g418["power_limit_w"], g418["power_limit_default_w"], g418["power_limit_max_w"]) == (300, 300, 300)
    assert "power_limit_below_default_w" not in g418
    g590 = parse_nvidia_smi_q(SMI_590)["gpus"][0]
    assert (g590["power_limit_w"], g590["power_limit_requested_w"], g590["power_limit_min_w"]) == (700, 700, 200)


def test_power_limit_below_default():
    num = {"400.00 W": 400.0, "700.00 W": 700.0}.get
    assert power_limits({"GPU Power Readings": {"Current Power Limit": "400.00 W",
                                                "Default Power Limit": "700.00 W"}},
                        num)["power_limit_below_default_w"] == 300


# -- findings ------------------------------------------------------------------------------------------
def test_sw_power_cap_is_info_at_default_limit_and_warning_below(tmp_path):
    rep = check_json(make_snapshot(tmp_path / "a", commands=_smi(Y201)))
    f = next(f for f in rep["findings"] if f["id"] == "power-throttling")
    assert f["severity"] == "info" and "SW Power Cap" in f["message"]
    assert "thermal-throttling" not in finding_ids(rep)

    capped = SMI_590.replace("SW Power Cap                                   : Not Active",
                             "SW Power Cap                                   : Active") \
                    .replace("Current Power Limit                            : 700.00 W",
                             "Current Power Limit                            : 450.00 W")
    assert capped.count(": 450.00 W") == 1 and "SW Power Cap                                   : Active" in capped
    rep = check_json(make_snapshot(tmp_path / "b", commands=_smi(capped)))
    f = next(f for f in rep["findings"] if f["id"] == "power-throttling")
    assert f["severity"] == "warning" and "250" in f["message"]


def test_hw_power_brake_is_power_not_thermal(tmp_path):
    text = SMI_590.replace("            HW Power Brake Slowdown                    : Not Active",
                           "            HW Power Brake Slowdown                    : Active")
    rep = check_json(make_snapshot(tmp_path, commands=_smi(text)))
    assert "power-throttling" in finding_ids(rep) and "thermal-throttling" not in finding_ids(rep)


def test_idle_590_counters_raise_nothing(tmp_path):
    rep = check_json(make_snapshot(tmp_path, commands=_smi(SMI_590)))
    assert not {"power-throttling", "thermal-throttling"} & finding_ids(rep)


def test_report_pasted_in_a_log_is_read_when_the_command_is_absent(tmp_path):
    rep = check_json(make_snapshot(tmp_path / "a", logs={"smi.txt": "$ nvidia-smi -q\n" + Y202 + "$ \n"}))
    assert "thermal-throttling" in finding_ids(rep)
    assert rep["facts"]["drivers"]["nvidia"]["version"] == "580.95.05"
    # the command, when recorded, is the source
    rep = check_json(make_snapshot(tmp_path / "b", commands=_smi(Y201), logs={"smi.txt": Y202}))
    assert rep["facts"]["drivers"]["nvidia"]["version"] == "545.29.06"


# -- a clock-reasons block pasted without the banner (cases d606, d607) ----------------------------
D606 = (next(CASES.glob("d606-*")) / "logs" / "nvidia-smi.log").read_text()
D607 = (next(CASES.glob("d607-*")) / "logs" / "nvidia-smi.log").read_text()


def test_block_without_banner_is_one_unnamed_gpu():
    g = parse_nvidia_smi_q(D606)["gpus"]
    assert len(g) == 1 and "pci_address" not in g[0]
    assert g[0]["power_throttle_reasons"] == ["SW Power Cap"] and g[0]["thermal_throttle_reasons"] == []
    # the R384 wording, grep'd, with the command line above it: Idle is not throttling
    g = parse_nvidia_smi_q(D607.split("\n", 1)[1])["gpus"][0]
    assert g["clocks_event_reasons"] == ["Idle"] and g["power_throttle_reasons"] == []
    with pytest.raises(ValueError):
        parse_nvidia_smi_q("    Temperature\n        GPU Current Temp : 77 C\n")


def test_pasted_block_raises_power_not_thermal_and_a_banner_wins(tmp_path):
    rep = check_json(make_snapshot(tmp_path / "a", logs={"smi.log": "training log\n" + D606 + "step 12\n"}))
    assert "power-throttling" in finding_ids(rep) and "thermal-throttling" not in finding_ids(rep)
    rep = check_json(make_snapshot(tmp_path / "b", logs={"smi.log": D607}))
    assert not {"power-throttling", "thermal-throttling"} & set(finding_ids(rep))
    # a whole report later in the log is the one read (its GPU has an address)
    rep = check_json(make_snapshot(tmp_path / "c", logs={"smi.log": D606 + "\n" + Y202}))
    assert rep["facts"]["drivers"]["nvidia"]["version"] == "580.95.05"


def test_pasted_block_goes_to_the_gpu_of_a_pasted_table(tmp_path):
    # a one-GPU table (n411, 384.66 TITAN Xp): the block's reasons are that GPU's
    one = next((next(CASES.glob("n411-*")) / "logs").glob("*")).read_text()
    rep = check_json(make_snapshot(tmp_path / "a", logs={"smi.log": one + "\n" + D606}))
    nv = [a for a in rep["facts"]["accelerators"] if a["vendor"] == "nvidia"]
    assert len(nv) == 1 and nv[0].get("name") and nv[0]["power_throttle_reasons"] == ["SW Power Cap"]
    assert "power-throttling" in finding_ids(rep)
    # two GPUs (n410, A800s): which one the block came from is unknown, so neither gets it
    two = next((next(CASES.glob("n410-*")) / "logs").glob("*")).read_text()
    rep = check_json(make_snapshot(tmp_path / "b", logs={"smi.log": two + "\n" + D606}))
    nv = [a for a in rep["facts"]["accelerators"] if a["vendor"] == "nvidia"]
    assert len(nv) == 2 and not any("power_throttle_reasons" in a for a in nv)
