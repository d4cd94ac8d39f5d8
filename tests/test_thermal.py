"""Thermal zones, cooling devices, devfreq and the thermal rules, on the real RK3588 cases
(k01-k05) and on fixture snapshots copied from them (a zone heated past a trip, a sensor that
reads garbage, a temp that cannot be read)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from npu_doctor import registry
from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.parsers.thermal import build_devfreq, build_zone, millideg_to_c
from npu_doctor.probe_runner import _run_one
from npu_doctor.probes import CommandCache, ProbeSpec
from npu_doctor.rules import RuleSet, evaluate, load_rule_file

from conftest import REPO, case_path, check_json, copy_case, finding_ids

registry.load_all()
THERMAL_IDS = {"thermal-throttling", "thermal-headroom-low", "sensor-reading-invalid"}


def probe(host, collector):
    spec = ProbeSpec(id=collector, collector=collector)
    return _run_one(spec, host, CommandCache(host), {})


def zone_file(snap: Path, zone: str, attr: str) -> Path:
    return snap / "fs/sys/class/thermal" / zone / attr


def thermal_rules() -> RuleSet:
    rules, _ = load_rule_file(str(REPO / "rules" / "thermal.toml"))
    return RuleSet(rules)


def findings(snap) -> list:
    host = SnapshotHost(str(snap))
    res = probe(host, "thermal")
    return evaluate(thermal_rules(), res.facts, [])


def zones_by_type(res) -> dict:
    return {z["type"]: z for z in res.facts.get("thermal.zones")}


# -- real cases -----------------------------------------------------------------------------
def test_k02_zones_trips_and_throttling():
    res = probe(SnapshotHost(str(case_path("k02"))), "thermal")
    assert res.status == "ok"
    zones = zones_by_type(res)
    assert len(zones) == 7
    soc = zones["soc-thermal"]
    assert soc["zone"] == "thermal_zone0"
    assert soc["temp_c"] == 86.25
    assert soc["trips"] == [
        {"index": 0, "type": "passive", "temp_c": 75.0, "hyst_c": 2.0},
        {"index": 1, "type": "passive", "temp_c": 85.0, "hyst_c": 2.0},
        {"index": 2, "type": "critical", "temp_c": 115.0, "hyst_c": 2.0}]
    assert soc["passive_trip_c"] == 75.0 and soc["critical_trip_c"] == 115.0
    assert soc["headroom_c"] == -11.25 and soc["throttle_trip_c"] == 85.0
    assert soc["policy"] == "step_wise" and soc["mode"] == "enabled"
    npu = zones["npu-thermal"]
    assert npu["temp_c"] == 87.5 and "passive_trip_c" not in npu and "headroom_c" not in npu
    assert res.facts.source_of("thermal.zones[0].temp_c") == "/sys/class/thermal/thermal_zone0/temp"
    assert res.facts.source_of("thermal.zones[0].throttle_trip_c") == "/sys/class/thermal/thermal_zone0/trip_point_1_temp"
    assert res.facts.source_of("thermal.zones[0].passive_trip_c") == "/sys/class/thermal/thermal_zone0/trip_point_0_temp"

    found = evaluate(thermal_rules(), res.facts, [])
    assert [f.id for f in found] == ["thermal-throttling"]
    f = found[0]
    assert f.message.startswith("soc-thermal at 86.25 °C >= passive trip 85 °C")
    assert f.subject == "soc-thermal (thermal_zone0)"
    assert {e["fact"]: e["value"] for e in f.evidence}["thermal.zones[0].temp_c"] == 86.25
    kinds = [x["kind"] for x in f.fixes]
    assert kinds[0] == "now" and {"now", "persist", "doc"} == set(kinds)
    assert "cooling_device" in f.fixes[0]["text"]  # first: is the fan being driven?
    assert "/sys/class/thermal/thermal_zone0/temp" in f.fixes[0]["text"]
    assert any("heatsink" in x["text"] and x["kind"] == "persist" for x in f.fixes)
    assert not any("raise" in x["text"].lower() for x in f.fixes)  # never "raise the trip point"
    assert any("sysfs-class-thermal" in x["text"] for x in f.fixes if x["kind"] == "doc")


@pytest.mark.parametrize("case", ["k01", "k03", "k04", "k05"])
def test_cool_rk3588_boards_have_no_thermal_finding(case):
    assert findings(case_path(case)) == []


def test_k02_and_k05_end_to_end():
    assert "thermal-throttling" in finding_ids(check_json(case_path("k02")))
    assert not finding_ids(check_json(case_path("k05"))) & THERMAL_IDS


def test_k02_devfreq_belongs_to_the_npu_device():
    res = probe(SnapshotHost(str(case_path("k02"))), "devfreq")
    devs = res.facts.get("devfreq.devices")
    assert devs == [{
        "name": "fdab0000.npu", "cur_hz": 600000000, "min_hz": 300000000, "max_hz": 1000000000,
        "governor": "performance",
        "available_governors": ["rknpu_ondemand", "userspace", "powersave", "performance", "simple_ondemand"],
        "available_hz": [300000000 + 100000000 * i for i in range(8)],
        "sysfs": "/sys/class/devfreq/fdab0000.npu", "device": "/sys/devices/platform/fdab0000.npu"}]
    assert res.facts.source_of("devfreq.devices[0].cur_hz") == "/sys/class/devfreq/fdab0000.npu/cur_freq"


def test_k03_devfreq_powersave():
    devs = probe(SnapshotHost(str(case_path("k03"))), "devfreq").facts.get("devfreq.devices")
    assert devs[0]["governor"] == "powersave" and devs[0]["cur_hz"] == 300000000


# -- fixtures from the real cases -----------------------------------------------------------
@pytest.mark.parametrize("millideg, expect", [
    ("75000", {"thermal-throttling"}),        # exactly at the first passive trip
    ("72000", {"thermal-headroom-low"}),      # 3 °C below it
    ("70000", {"thermal-headroom-low"}),      # 5 °C below: still low
    ("69000", set()),                         # 6 °C: fine
])
def test_soc_zone_heated_towards_its_trips(tmp_path, millideg, expect):
    snap = copy_case("k05", tmp_path / "snap")
    zone_file(snap, "thermal_zone0", "temp").write_text(millideg + "\n")
    assert {f.id for f in findings(snap)} == expect


def test_headroom_message_names_the_trip(tmp_path):
    snap = copy_case("k05", tmp_path / "snap")
    zone_file(snap, "thermal_zone0", "temp").write_text("71500\n")
    (f,) = findings(snap)
    assert f.message == "soc-thermal at 71.5 °C is 3.5 °C below its passive trip 75 °C"


def test_critical_trip_is_an_error(tmp_path):
    snap = copy_case("k05", tmp_path / "snap")
    zone_file(snap, "thermal_zone6", "temp").write_text("115000\n")  # npu-thermal: critical only
    (f,) = findings(snap)
    assert f.id == "thermal-throttling" and f.severity == "error"
    assert "critical trip 115 °C" in f.message


@pytest.mark.parametrize("raw", ["-273150", "429496729", "250000"])
def test_impossible_readings_are_invalid_not_throttling(tmp_path, raw):
    snap = copy_case("k02", tmp_path / "snap")
    zone_file(snap, "thermal_zone0", "temp").write_text(raw + "\n")
    found = findings(snap)
    invalid = [f for f in found if f.id == "sensor-reading-invalid"]
    assert [f.subject for f in invalid] == ["soc-thermal (thermal_zone0)"]
    # soc-thermal no longer throttles on a bogus value; other zones are unaffected
    assert not any(f.id == "thermal-throttling" and f.subject.startswith("soc-thermal") for f in found)
    soc = zones_by_type(probe(SnapshotHost(str(snap)), "thermal"))["soc-thermal"]
    assert soc["reading_invalid"] is True and "headroom_c" not in soc


def test_garbage_temp_keeps_the_zone_without_a_temperature(tmp_path):
    snap = copy_case("k02", tmp_path / "snap")
    zone_file(snap, "thermal_zone0", "temp").write_text("\x00\xffgarbage\n")
    res = probe(SnapshotHost(str(snap)), "thermal")
    assert res.status == "ok"
    soc = zones_by_type(res)["soc-thermal"]
    assert "temp_c" not in soc and "not a millidegree" in soc["read_error"]
    assert soc["passive_trip_c"] == 75.0  # trips still read
    # no throttling from a reading that is not one; the zone is reported as unreadable
    assert [(f.id, f.subject) for f in findings(snap)] == [("sensor-unavailable", "soc-thermal (thermal_zone0)")]


def test_unreadable_temp_is_a_read_error(tmp_path):
    # tests run as root, so chmod 000 would not stop a read: a directory where the file
    # should be fails the read the way EIO/EINVAL does on a live sensor
    snap = copy_case("k02", tmp_path / "snap")
    temp = zone_file(snap, "thermal_zone0", "temp")
    temp.unlink()
    temp.mkdir()
    res = probe(SnapshotHost(str(snap)), "thermal")
    assert res.status == "ok"
    zones = zones_by_type(res)
    assert zones["soc-thermal"]["read_error"] == "is a directory"
    assert "temp_c" not in zones["soc-thermal"]
    assert zones["npu-thermal"]["temp_c"] == 87.5
    # the zone that was throttling is now unknown, not OK: sensor-unavailable, no throttling
    report = check_json(snap)
    unavailable = [f for f in report["findings"] if f["id"] == "sensor-unavailable"]
    assert [f["subject"] for f in unavailable] == ["soc-thermal (thermal_zone0)"]
    assert "is a directory" in unavailable[0]["message"]
    assert not [f for f in report["findings"] if f["id"] == "thermal-throttling"
                and "soc-thermal" in f["subject"]]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_permission_denied_temp_is_recorded(tmp_path):
    snap = copy_case("k02", tmp_path / "snap")
    temp = zone_file(snap, "thermal_zone0", "temp")
    temp.chmod(0)
    res = probe(SnapshotHost(str(snap)), "thermal")
    assert zones_by_type(res)["soc-thermal"]["read_error"] == "permission denied"
    assert res.facts.get("access.denied")[0]["path"] == "/sys/class/thermal/thermal_zone0/temp"


def test_bad_trip_points_are_skipped(tmp_path):
    snap = copy_case("k05", tmp_path / "snap")
    zone_file(snap, "thermal_zone0", "trip_point_0_temp").write_text("n/a\n")
    zone_file(snap, "thermal_zone0", "trip_point_1_type").unlink()
    soc = zones_by_type(probe(SnapshotHost(str(snap)), "thermal"))["soc-thermal"]
    assert [t["index"] for t in soc["trips"]] == [1, 2]
    assert "type" not in soc["trips"][0]
    assert "passive_trip_c" not in soc and soc["critical_trip_c"] == 115.0


def test_cooling_devices(tmp_path):
    snap = copy_case("k02", tmp_path / "snap")
    fan = snap / "fs/sys/devices/virtual/thermal/cooling_device0"
    fan.mkdir(parents=True)
    (fan / "type").write_text("pwm-fan\n")
    (fan / "cur_state").write_text("0\n")
    (fan / "max_state").write_text("4\n")
    os.symlink("../../devices/virtual/thermal/cooling_device0",
               snap / "fs/sys/class/thermal/cooling_device0")
    res = probe(SnapshotHost(str(snap)), "thermal")
    assert res.facts.get("thermal.cooling_devices") == [{
        "name": "cooling_device0", "sysfs": "/sys/class/thermal/cooling_device0",
        "type": "pwm-fan", "cur_state": 0, "max_state": 4}]
    assert len(res.facts.get("thermal.zones")) == 7


def test_no_thermal_class_is_no_data(tmp_path):
    (tmp_path / "fs").mkdir()
    assert probe(SnapshotHost(str(tmp_path)), "thermal").status == "no_data"
    assert probe(SnapshotHost(str(tmp_path)), "devfreq").status == "no_data"


def test_live_thermal_and_devfreq_do_not_fail():
    host = LiveHost()
    for name, path in (("thermal", "/sys/class/thermal"), ("devfreq", "/sys/class/devfreq")):
        res = probe(host, name)
        assert res.status in ("ok", "no_data"), res.error
        if res.status == "ok" and name == "thermal":
            for z in res.facts.get("thermal.zones") or []:
                assert "temp_c" in z or "read_error" in z


# -- devfreq fixtures -----------------------------------------------------------------------
def test_devfreq_device_link_wins(tmp_path):
    snap = copy_case("k02", tmp_path / "snap")
    real = snap / "fs/sys/devices/platform/fdab0000.npu/devfreq/fdab0000.npu"
    os.symlink("../../../fdab0000.npu", real / "device")
    res = probe(SnapshotHost(str(snap)), "devfreq")
    assert res.facts.get("devfreq.devices[0].device") == "/sys/devices/platform/fdab0000.npu"


def test_devfreq_of_a_gpu_directly_under_its_device(tmp_path):
    # the Mali/Jetson layout: /sys/class/devfreq/NAME -> /sys/devices/platform/NAME.gpu/devfreq/NAME
    # and a devfreq entry that is a plain directory (a snapshot that lost its links): no device
    snap = copy_case("k02", tmp_path / "snap")
    gpu = snap / "fs/sys/devices/platform/fb000000.gpu/devfreq/fb000000.gpu"
    gpu.mkdir(parents=True)
    (gpu / "cur_freq").write_text("garbage\n")
    (gpu / "governor").write_text("simple_ondemand\n")
    os.symlink("../../devices/platform/fb000000.gpu/devfreq/fb000000.gpu",
               snap / "fs/sys/class/devfreq/fb000000.gpu")
    plain = snap / "fs/sys/class/devfreq/dmc"
    plain.mkdir()
    (plain / "cur_freq").write_text("2112000000\n")
    devs = {d["name"]: d for d in probe(SnapshotHost(str(snap)), "devfreq").facts.get("devfreq.devices")}
    assert devs["fb000000.gpu"]["device"] == "/sys/devices/platform/fb000000.gpu"
    assert "cur_hz" not in devs["fb000000.gpu"]  # garbage is unknown, not 0
    assert devs["dmc"]["cur_hz"] == 2112000000 and "device" not in devs["dmc"]


# -- pure parsers ---------------------------------------------------------------------------
def test_millidegrees():
    assert millideg_to_c("86250\n") == 86.25
    assert millideg_to_c("-273150") == -273.15
    for bad in ("", "86.25", "abc", "0x10"):
        with pytest.raises(ValueError):
            millideg_to_c(bad)


def test_build_zone_and_devfreq_without_attributes():
    z = build_zone("thermal_zone9", {"type": "acpitz", "temp": "27800"})
    assert z == {"zone": "thermal_zone9", "type": "acpitz", "temp_c": 27.8, "trips": []}
    assert build_devfreq("x", {}) == {"name": "x"}


# -- Raspberry Pi firmware throttle word (vcgencmd get_throttled; case d601) -----------------------
def test_rpi_get_throttled_bits_from_command_sysfs_and_log(tmp_path):
    from conftest import make_snapshot

    d601 = next((Path(__file__).parent / "cases").glob("d601-*")) / "logs" / "vcgencmd.log"
    cmd = [{"argv": ["vcgencmd", "get_throttled"], "returncode": 0, "stdout": "throttled=0x50005\n"}]
    rep = check_json(make_snapshot(tmp_path / "a", commands=cmd))
    assert rep["facts"]["power"]["rpi_throttled"] == "0x50005"
    assert "power-throttling" in finding_ids(rep) and "thermal-throttling" not in finding_ids(rep)
    # the firmware driver's sysfs copy ("%x", no 0x): soft temperature limit now and since boot
    rep = check_json(make_snapshot(tmp_path / "b", files={
        "/sys/devices/platform/soc/soc:firmware/get_throttled": "80008\n"}))
    assert rep["facts"]["power"]["rpi_throttled"] == "0x80008"
    assert "thermal-throttling" in finding_ids(rep) and "power-throttling" not in finding_ids(rep)
    rep = check_json(make_snapshot(tmp_path / "c", files={
        "/sys/devices/platform/soc/soc:firmware/get_throttled": "0\n"}))
    assert not {"thermal-throttling", "power-throttling"} & set(finding_ids(rep))
    # the same output pasted in a log
    rep = check_json(make_snapshot(tmp_path / "d", logs={"vcgencmd.log": d601.read_text()}))
    assert "power-throttling" in finding_ids(rep) and "thermal-throttling" not in finding_ids(rep)
