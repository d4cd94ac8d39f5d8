"""Sensors an accelerator's driver keeps on its own device, and other board layouts of the
machine-state kinds, on fixture trees copied from the repo's cases.

Cases (tests/cases): y10 (Coral apex_0 temp stuck at -87.9 °C, google-coral/edgetpu#843), y11
(apex_0 above trip_point0_temp, coral.ai/docs/pcie-parameters), y03 (RK3588 on the mainline
rocket driver: the facade platform device 'rknn' owns /dev/accel/accel0).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import check_json, finding_ids

REPO_CASES = Path(__file__).resolve().parent / "cases"
APEX = "fs/sys/devices/pci0000:00/0000:00:1c.0/0000:05:00.0/apex/apex_0"


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(REPO_CASES / name, dest, symlinks=True)
    return dest


def _coral(report):
    hits = [a for a in report["facts"]["accelerators"] if a.get("vendor") == "coral"]
    assert len(hits) == 1, hits
    return hits[0]


def test_apex_temperature_out_of_range_is_invalid_not_a_temperature():
    report = check_json(REPO_CASES / "y10-coral-m2-apex-temp-reads-minus-87-9")
    a = _coral(report)
    assert "temperature_c" not in a and "throttle_trip_c" not in a
    sensor = a["sensors"]["temperature"]
    assert sensor["reading_invalid"] is True and sensor["raw_c"] == -87.9
    ids = finding_ids(report)
    assert "sensor-reading-invalid" in ids and "thermal-throttling" not in ids
    f = [f for f in report["findings"] if f["id"] == "sensor-reading-invalid"][0]
    assert "/sys/class/apex/apex_0/temp reads -87.9" in f["message"]
    assert f["evidence"][0]["source"] == "/sys/class/apex/apex_0/temp"


def test_apex_throttle_trip_is_the_highest_one_reached(tmp_path):
    snap = _copy("y11-coral-pcie-apex-above-trip-point0-throttled", tmp_path / "snap")
    apex = snap / APEX
    report = check_json(snap)
    a = _coral(report)
    assert a["temperature_c"] == 87.25 and a["trip_points_c"] == [85.0, 90.0, 95.0]
    assert a["throttle_trip_c"] == 85.0
    f = [f for f in report["findings"] if f["id"] == "thermal-throttling"][0]
    assert "87.25 °C >= its throttle trip 85 °C" in f["message"]
    assert {"fact": "accelerators[0].throttle_trip_c", "value": 85.0,
            "source": "/sys/class/apex/apex_0/trip_point0_temp"} in f["evidence"]
    # past trip point 1 (125 MHz): that one is in force
    (apex / "temp").write_text("91000\n")
    report = check_json(snap)
    assert _coral(report)["throttle_trip_c"] == 90.0
    # below every trip: nothing
    (apex / "temp").write_text("61500\n")
    report = check_json(snap)
    assert "throttle_trip_c" not in _coral(report)
    assert "thermal-throttling" not in finding_ids(report)


def test_apex_truncated_trip_point_is_not_used(tmp_path):
    # '85' instead of '85000' would read as 0.085 °C and make every reading "throttled"
    snap = _copy("y11-coral-pcie-apex-above-trip-point0-throttled", tmp_path / "snap")
    apex = snap / APEX
    (apex / "temp").write_text("52000\n")
    (apex / "trip_point0_temp").write_text("85\n")
    report = check_json(snap)
    a = _coral(report)
    assert a["trip_points_c"] == [90.0, 95.0] and "throttle_trip_c" not in a
    assert "thermal-throttling" not in finding_ids(report)


def test_rocket_facade_owns_the_accel_node_and_is_an_rknpu():
    report = check_json(REPO_CASES / "y03-rk3588-mainline-rocket-accel-not-in-render")
    accels = report["facts"]["accelerators"]
    facade = [a for a in accels if a.get("sysfs") == "/sys/devices/platform/rknn"]
    assert len(facade) == 1 and facade[0]["vendor"] == "rknpu"
    assert facade[0]["dev"] == "/dev/accel/accel0" and facade[0]["driver"]["bound"] is True
    cores = [a for a in accels if a.get("compatible") == "rockchip,rk3588-rknn-core"]
    assert len(cores) == 3 and all(c["driver"]["name"] == "rocket" for c in cores)
    ids = finding_ids(report)
    assert "device-node-permission" in ids and "driver-not-loaded" not in ids
