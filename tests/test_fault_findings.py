"""Findings the fault matrix showed to be wrong, each with its minimal input."""

from __future__ import annotations

import shutil

from npu_doctor.parsers.thermal import build_zone, parse_int
from npu_doctor.parsers.timeouts import says_only_timed_out

from conftest import check_json, copy_case, finding_ids, run_cli


def test_truncated_trip_point_is_not_a_passive_trip():
    z = build_zone("thermal_zone0", {"type": "soc-thermal", "temp": "45000",
                                     "trip_point_0_type": "passive", "trip_point_0_temp": "120"})
    assert "passive_trip_c" not in z and "throttle_trip_c" not in z
    assert z["trips"][0]["temp_c"] == 0.12  # kept as read, not used


def test_huge_numbers_are_unknown_not_exceptions():
    z = build_zone("tz", {"temp": "9" * 5000, "trip_point_0_type": "passive",
                          "trip_point_0_temp": "1" * 5000})
    assert "temp_c" not in z and z["read_error"] and z["trips"] == []
    assert parse_int("6" * 4400) is None


def test_timeout_only_output_is_not_an_init_failure():
    assert says_only_timed_out("Error: Timeout\n")
    assert says_only_timed_out("npu-smi: timed out waiting for the device")
    assert not says_only_timed_out("dcmi module initialize failed. ret is -8005")
    assert not says_only_timed_out("all fine")


def test_missing_devfreq_dir_is_not_driver_not_loaded(tmp_path):
    snap = copy_case("k01", tmp_path / "snap")
    shutil.rmtree(snap / "fs/sys/devices/platform/fdab0000.npu/devfreq")
    (snap / "fs/sys/class/devfreq/fdab0000.npu").unlink()
    assert "driver-not-loaded" not in finding_ids(check_json(snap))


def test_empty_os_release_is_no_data_and_a_failed_probe_is_not_fine(tmp_path):
    snap = copy_case("k01", tmp_path / "snap")
    (snap / "fs/etc").mkdir(exist_ok=True)
    (snap / "fs/etc/os-release").write_text("")
    report = check_json(snap)
    probe = next(p for p in report["probes"] if p["id"] == "os-release")
    assert probe["status"] == "no_data"
    (snap / "fs/etc/os-release").write_text("garbage without equals\n")
    report = check_json(snap)
    probe = next(p for p in report["probes"] if p["id"] == "os-release")
    assert probe["status"] == "error" and "internal" not in probe.get("error_kind", "")
    text = run_cli("check", "--snapshot", str(snap), "--fail-on", "never").stdout
    system = next(ln for ln in text.splitlines() if "System" in ln)
    assert "[✓]" not in system
