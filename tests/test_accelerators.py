"""Accelerator inventory and its rules, on real board cases and fixture trees copied from them.

Cases (../shared/cases): k01-k06 (constructed from the sysfs ABI), c1-04 (Rock 5B rknpu 0.9.6,
radxa-build/rock-5b#29), c1-07 (RK3588 load 429496 %, rockchip-linux/rknpu2#102), c1-12 (Coral
apex_0 without temp attributes, google-coral/edgetpu#498), c4-01 (RK3576 devfreq at 300 MHz,
radxa/kernel#432).
"""

from __future__ import annotations

import os
import shutil

import pytest

from npu_doctor import registry
from npu_doctor.collectors.accelerators import link_devfreq, link_thermal, parse_link_speed
from npu_doctor.errors import AccessDenied
from npu_doctor.facts import Facts
from npu_doctor.host import SnapshotHost
from npu_doctor.parsers.rknpu import parse_rknpu_load, parse_rknpu_version
from npu_doctor.probe_runner import run_probes
from npu_doctor.probes import load_specs
from npu_doctor.tomlcompat import tomllib

from conftest import case_path, check_json, copy_case, fact_values, finding_ids, run_cli

NPU = "fs/sys/devices/platform/fdab0000.npu"


def accel(report, vendor=None):
    accels = report["facts"].get("accelerators", [])
    if vendor:
        accels = [a for a in accels if a.get("vendor") == vendor]
    assert len(accels) == 1, accels
    return accels[0]


def finding(report, rid):
    hits = [f for f in report["findings"] if f["id"] == rid]
    assert hits, (rid, finding_ids(report))
    return hits[0]


# -- parsers -------------------------------------------------------------------------------
def test_rknpu_version_every_seen_form():
    # rknpu_debugger.c: seq_printf("%s: v%d.%d.%d\n", DRIVER_DESC, ...)
    assert parse_rknpu_version("RKNPU driver: v0.9.8\n") == {"version": "0.9.8",
                                                              "description": "RKNPU driver"}
    assert parse_rknpu_version("RKNPU driver: v0.9.6")["version"] == "0.9.6"
    assert parse_rknpu_version("RKNPU driver: v0.8.2\n")["version"] == "0.8.2"
    with pytest.raises(ValueError):
        parse_rknpu_version("cat: /sys/kernel/debug/rknpu/version: Permission denied")


def test_rknpu_load_multi_and_single_core_forms():
    # itsfoss.com/monitor-npu-linux (RK3588, idle)
    idle = parse_rknpu_load("NPU load:  Core0:  0%, Core1:  0%, Core2:  0%,\n")
    assert idle["cores_percent"] == [0, 0, 0] and idle["max_percent"] == 0
    # rockchip-linux/rknpu2#102: no trailing comma, an overflowed core kept raw
    bad = parse_rknpu_load("NPU load:  Core0: 99%, Core1: 99%, Core2: 429496%")
    assert bad["cores_percent"] == [99, 99, 429496] and bad["max_percent"] == 429496
    # single-core SoCs (RK3566/RK3568/RV1106) print no CoreN
    assert parse_rknpu_load("NPU load:  12%\n")["cores_percent"] == [12]
    # "%2.d" prints nothing for 0: an empty number is 0 %
    assert parse_rknpu_load("NPU load:  Core0:   %, Core1: 45%,")["cores_percent"] == [0, 45]
    assert parse_rknpu_load("NPU load:   %")["cores_percent"] == [0]
    two = parse_rknpu_load("NPU load:  Core0: 35%, Core1: 30%,")
    assert two["mean_percent"] == 32.5 and two["max_percent"] == 35
    for garbage in ("", "RKNPU driver: v0.9.8", "NPU load: n/a"):
        with pytest.raises(ValueError):
            parse_rknpu_load(garbage)


def test_pcie_link_speed_strings():
    # drivers/pci/pci-sysfs.c current_link_speed: "%s PCIe" of PCI_SPEED2STR since 5.x,
    # "8 GT/s" / "2.5 GT/s" before, "Unknown" when the link is down
    assert parse_link_speed("16.0 GT/s PCIe") == 16.0
    assert parse_link_speed("8 GT/s") == 8.0
    assert parse_link_speed("2.5 GT/s PCIe") == 2.5
    assert parse_link_speed("Unknown") is None
    assert parse_link_speed(None) is None


# -- real cases: expectations from case.toml, plus what they mean --------------------------
CASES = ["k01", "k02", "k03", "k04", "k05", "k06", "c1-04", "c1-07", "c1-12", "c4-01"]


@pytest.mark.parametrize("name", CASES)
def test_case_expectations(name):
    path = case_path(name)
    with open(path / "case.toml", "rb") as f:
        expect = tomllib.load(f)["expect"]
    report = check_json(path)
    ids = finding_ids(report)
    for rid in expect.get("findings", []):
        assert rid in ids, (rid, ids)
    for rid in expect.get("absent", []):
        assert rid not in ids, (rid, report["findings"])
    for fpath, want in expect.get("facts", {}).items():
        got = fact_values(report["facts"], fpath)
        assert any(str(g) == str(want) or (isinstance(want, (int, float)) and not isinstance(g, (str, dict, list))
                                          and abs(float(g) - want) <= 0.05) for g in got), (fpath, want, got)


def test_k01_autosuspend_evidence_and_fixes():
    report = check_json(case_path("k01"))
    a = accel(report, "rknpu")
    assert a["sysfs"] == "/sys/devices/platform/fdab0000.npu"
    assert a["power"] == {"control": "auto", "runtime_status": "suspended",
                          "autosuspend_delay_ms": 2000, "runtime_suspended_time_ms": 5532101,
                          "runtime_active_time_ms": 81234}
    assert a["driver"]["version"] == "0.9.8" and a["compatible"] == "rockchip,rk3588-rknpu"
    f = finding(report, "runtime-autosuspend")
    assert f["severity"] == "warning" and "2000 ms" in f["message"]
    ev = {e["fact"]: e for e in f["evidence"]}
    assert ev["accelerators[0].power.control"]["source"] == "/sys/devices/platform/fdab0000.npu/power/control"
    now = [x for x in f["fixes"] if x["kind"] == "now"][0]
    assert now["sysfs_write"] == {"path": "/sys/devices/platform/fdab0000.npu/power/control", "value": "on"}
    persist = [x for x in f["fixes"] if x["kind"] == "persist"][0]["text"]
    assert 'ACTION=="add", SUBSYSTEM=="platform", KERNEL=="fdab0000.npu", ATTR{power/control}="on"' in persist


def test_k02_utilization_is_the_busiest_core_and_freq_linked():
    report = check_json(case_path("k02"))
    a = accel(report, "rknpu")
    assert a["load"]["cores_percent"] == [98, 97, 97]
    assert a["utilization_percent"] == 98          # max, not the 97.3 mean
    assert a["freq"]["cur_hz"] == 600000000 and a["freq"]["max_hz"] == 1000000000
    assert a["freq"]["governor"] == "performance"
    assert a["thermal_zone"] and a["temperature_c"] == 87.5  # npu-thermal
    assert "governor-not-performance" not in finding_ids(report)  # clock held by heat


def test_k03_powersave_governor_fix():
    report = check_json(case_path("k03"))
    f = finding(report, "governor-not-performance")
    assert "powersave" in f["message"] and "300000000" in f["message"]
    now = [x for x in f["fixes"] if x["kind"] == "now"][0]
    assert now["sysfs_write"] == {"path": "/sys/class/devfreq/fdab0000.npu/governor", "value": "performance"}
    persist = [x["text"] for x in f["fixes"] if x["kind"] == "persist"][0]
    assert 'ACTION=="add", SUBSYSTEM=="devfreq", KERNEL=="fdab0000.npu", ATTR{governor}="performance"' in persist
    assert "tmpfiles" in persist


def test_k05_temperature_from_npu_thermal_zone():
    report = check_json(case_path("k05"))
    a = accel(report, "rknpu")
    assert a["temperature_c"] == 45.0 and a["sensors"]["temperature"]["zone_type"] == "npu-thermal"
    assert report["findings"] == [] or all(f["severity"] == "info" for f in report["findings"]), \
        report["findings"]


def test_k06_permission_names_group_user_and_udev_rule():
    report = check_json(case_path("k06"))
    a = accel(report, "intel-npu")
    node = a["dev_nodes"][0]
    assert node == {"path": "/dev/accel/accel0", "subsystem": "accel", "kernel": "accel0",
                    "exists": True, "type": "char", "mode": "0660", "uid": 0, "gid": 992,
                    "group": "render", "can_open": False}
    assert a["index"] == 0 and a["pci_id"] == "8086:7d1d"
    f = finding(report, "device-node-permission")
    assert f["subject"] == "/dev/accel/accel0"
    texts = " ".join(x["text"] for x in f["fixes"])
    assert "usermod -aG render user" in texts
    assert 'SUBSYSTEM=="accel", KERNEL=="accel*", GROUP="render", MODE="0660"' in texts


def test_c1_07_invalid_load_kept_raw_and_utilization_unknown():
    report = check_json(case_path("c1-07"))
    a = accel(report, "rknpu")
    assert a["load"]["cores_percent"] == [99, 99, 429496] and a["load"]["invalid"] is True
    assert "utilization_percent" not in a
    f = finding(report, "sensor-reading-invalid")
    assert "429496" in f["message"] and "Rockchip NPU" in f["subject"]


def test_c1_12_coral_without_temp_is_unknown_not_ok():
    report = check_json(case_path("c1-12"))
    a = accel(report, "coral")
    assert a["sensors"]["temperature"]["available"] is False
    assert "temperature_c" not in a and a["dev"] == "/dev/apex_0"
    assert "pci_address" not in a  # only a name in an ls listing: not claimed
    f = finding(report, "sensor-unavailable")
    assert "/sys/class/apex/apex_0/temp" in f["message"]
    assert any("gasket-dkms" in x["text"] for x in f["fixes"])


def test_c4_01_rk3576_at_min_without_governor_is_not_a_governor_finding():
    report = check_json(case_path("c4-01"))
    a = accel(report, "rknpu")
    assert a["name"] == "Rockchip RK3576 NPU" and a["freq"]["cur_hz"] == 300000000
    assert "governor" not in a["freq"]
    assert "governor-not-performance" not in finding_ids(report)


def test_c1_04_driver_only_in_debugfs():
    report = check_json(case_path("c1-04"))
    a = accel(report, "rknpu")
    assert a["driver"] == {"name": "rknpu", "version": "0.9.6", "bound": True}
    assert report["facts"]["drivers"]["rknpu"]["version"] == "0.9.6"


# -- fixture trees copied from the cases and edited -----------------------------------------
def test_power_control_on_clears_autosuspend(tmp_path):
    snap = copy_case("k01-rk3588-npu-autosuspend", tmp_path / "snap")
    (snap / NPU / "power/control").write_text("on\n")
    assert "runtime-autosuspend" not in finding_ids(check_json(snap))


def test_negative_autosuspend_delay_is_not_autosuspend(tmp_path):
    snap = copy_case("k01-rk3588-npu-autosuspend", tmp_path / "snap")
    (snap / NPU / "power/autosuspend_delay_ms").write_text("-1\n")
    assert "runtime-autosuspend" not in finding_ids(check_json(snap))


def _set_freq(snap, governor, cur, load=None):
    df = snap / NPU / "devfreq/fdab0000.npu"
    (df / "governor").write_text(governor + "\n")
    (df / "cur_freq").write_text(f"{cur}\n")
    if load is not None:
        (snap / "fs/sys/kernel/debug/rknpu/load").write_text(load + "\n")


@pytest.mark.parametrize("governor,cur,load,fires", [
    ("rknpu_ondemand", 300000000, "NPU load:  Core0:  0%, Core1:  0%, Core2:  0%,", False),
    ("simple_ondemand", 300000000, "NPU load:  Core0: 80%, Core1: 10%, Core2:  0%,", True),
    ("simple_ondemand", 700000000, "NPU load:  Core0: 80%, Core1: 10%, Core2:  0%,", False),
    ("userspace", 1000000000, None, False),
    ("userspace", 500000000, None, True),
    ("performance", 1000000000, None, False),
])
def test_governor_rule_reports_only_a_clock_pinned_below_max(tmp_path, governor, cur, load, fires):
    snap = copy_case("k05-rk3588-healthy", tmp_path / "snap")
    _set_freq(snap, governor, cur, load)
    assert ("governor-not-performance" in finding_ids(check_json(snap))) == fires


def test_busy_npu_clears_cpu_fallback(tmp_path):
    snap = copy_case("k04-rk3588-npu-idle-cpu-busy", tmp_path / "snap")
    (snap / "fs/sys/kernel/debug/rknpu/load").write_text("NPU load:  Core0: 60%, Core1: 0%, Core2: 0%,\n")
    report = check_json(snap)
    assert accel(report)["utilization_percent"] == 60
    assert "silent-cpu-fallback-suspected" not in finding_ids(report)


def test_valid_load_gives_utilization_and_no_invalid_reading(tmp_path):
    snap = copy_case("c1-07-rknpu-load-core2-overflow", tmp_path / "snap")
    (snap / "fs/sys/kernel/debug/rknpu/load").write_text("NPU load:  Core0: 99%, Core1: 99%, Core2: 12%")
    report = check_json(snap)
    assert accel(report)["utilization_percent"] == 99
    assert "sensor-reading-invalid" not in finding_ids(report)


def test_coral_with_gasket_temp_has_temperature(tmp_path):
    snap = copy_case("c1-12-coral-apex-no-thermal-attrs", tmp_path / "snap")
    apex = snap / "fs/sys/class/apex/apex_0"
    (apex / "temp").write_text("45500\n")  # millidegrees (coral.ai/docs/pcie-parameters)
    (apex / "trip_point0_temp").write_text("85000\n")
    report = check_json(snap)
    a = accel(report, "coral")
    assert a["temperature_c"] == 45.5 and a["trip_points_c"] == [85.0]
    assert "sensor-unavailable" not in finding_ids(report)


def test_without_stat_toml_permission_is_unknown_not_a_finding(tmp_path):
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    (snap / "stat.toml").unlink()
    report = check_json(snap)
    a = accel(report, "intel-npu")
    assert a["dev_nodes"][0]["exists"] is False and "can_open" not in a["dev_nodes"][0]
    assert "device-node-permission" not in finding_ids(report)


def test_user_in_render_group_can_open(tmp_path):
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    text = (snap / "commands.toml").read_text().replace("27(sudo)", "27(sudo),992(render)")
    (snap / "commands.toml").write_text(text)
    report = check_json(snap)
    assert accel(report)["access"]["can_open"] is True
    assert "device-node-permission" not in finding_ids(report)


def test_root_only_node_needs_a_udev_rule_not_just_a_group(tmp_path):
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    text = (snap / "stat.toml").read_text().replace('mode = "0660"', 'mode = "0600"').replace("gid = 992", "gid = 0")
    (snap / "stat.toml").write_text(text)
    f = finding(check_json(snap), "device-node-permission")
    texts = [x["text"] for x in f["fixes"]]
    assert not any(t.startswith("sudo usermod -aG root") for t in texts)
    assert any("chgrp render /dev/accel/accel0" in t for t in texts)


def test_unbound_pci_npu_is_driver_not_loaded(tmp_path):
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    os.remove(snap / "fs/sys/devices/pci0000:00/0000:00:0b.0/driver")
    shutil.rmtree(snap / "fs/sys/devices/pci0000:00/0000:00:0b.0/accel")
    os.remove(snap / "fs/sys/class/accel/accel0")
    report = check_json(snap)
    a = accel(report, "intel-npu")
    assert a["driver"]["bound"] is False and a["driver"]["expected"] == "intel_vpu"
    f = finding(report, "driver-not-loaded")
    assert any("modprobe intel_vpu" in x["text"] for x in f["fixes"])
    assert any("modules-load.d/intel_vpu.conf" in x["text"] for x in f["fixes"])
    assert "device-node-permission" not in finding_ids(report)


def _hailo_card(tmp_path, cur_speed, max_speed, cur_w, max_w):
    """A Hailo-8 M.2 card laid out like k06's PCI device, with PCIe link attributes."""
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    dev = snap / "fs/sys/devices/pci0000:00/0000:00:0b.0"
    (dev / "vendor").write_text("0x1e60\n")
    (dev / "device").write_text("0x2864\n")
    (dev / "class").write_text("0x128000\n")
    (dev / "current_link_speed").write_text(cur_speed + "\n")
    (dev / "max_link_speed").write_text(max_speed + "\n")
    (dev / "current_link_width").write_text(f"{cur_w}\n")
    (dev / "max_link_width").write_text(f"{max_w}\n")
    os.remove(dev / "driver")
    os.symlink("../../../bus/pci/drivers/hailo", dev / "driver")
    return snap


def test_pcie_link_degraded_on_a_narrow_slow_link(tmp_path):
    snap = _hailo_card(tmp_path, "5.0 GT/s PCIe", "8.0 GT/s PCIe", 1, 4)
    report = check_json(snap)
    a = accel(report, "hailo")
    assert a["pcie"] == {"cur_speed_gts": 5.0, "max_speed_gts": 8.0, "cur_width": 1, "max_width": 4}
    assert a["name"] == "Hailo-8 / Hailo-8L" and a["driver"]["name"] == "hailo"
    msgs = [f["message"] for f in report["findings"] if f["id"] == "pcie-link-degraded"]
    assert any("x1 of x4" in m for m in msgs) and any("5 GT/s of 8 GT/s" in m for m in msgs)


def test_full_pcie_link_is_not_degraded(tmp_path):
    snap = _hailo_card(tmp_path, "8.0 GT/s PCIe", "8.0 GT/s PCIe", 4, 4)
    assert "pcie-link-degraded" not in finding_ids(check_json(snap))


def test_empty_host_reports_no_accelerator(tmp_path):
    (tmp_path / "fs/etc").mkdir(parents=True)
    (tmp_path / "fs/etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    (tmp_path / "fs/sys/bus/pci/devices").mkdir(parents=True)  # a host with sysfs and no device
    report = check_json(tmp_path)
    assert report["facts"]["inventory"]["accelerator_count"] == 0
    f = finding(report, "no-accelerator-found")
    assert f["severity"] == "info"


def test_snapshot_without_sysfs_does_not_claim_no_accelerator(tmp_path):
    # a snapshot of logs and /etc only (a bug report) cannot say the host has no accelerator
    (tmp_path / "fs/etc").mkdir(parents=True)
    (tmp_path / "fs/etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    report = check_json(tmp_path)
    assert "accelerator_count" not in report["facts"].get("inventory", {})
    assert "no-accelerator-found" not in {f["id"] for f in report["findings"]}


def test_failed_vendor_tool_means_count_unknown(tmp_path):
    (tmp_path / "fs/etc").mkdir(parents=True)
    (tmp_path / "fs/etc/os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\n')
    (tmp_path / "commands.toml").write_text(
        '[[command]]\nargv = ["npu-smi", "info"]\nreturncode = 255\n'
        "stdout = ''\nstderr = '''dcmi module initialize failed. ret is -8005\n'''\n")
    report = check_json(tmp_path)
    assert report["facts"]["inventory"].get("unknown"), report["facts"]["inventory"]
    assert "accelerator_count" not in report["facts"]["inventory"]
    assert "no-accelerator-found" not in finding_ids(report)


def test_live_host_runs_and_is_right_about_accelerators():
    proc = run_cli("check", "--format", "json", "--fail-on", "never", "--select", "no-accelerator-found")
    assert proc.returncode == 0, proc.stderr
    import json
    report = json.loads(proc.stdout)
    probes = {p["id"]: p for p in report["probes"]}
    assert probes["accelerators"]["status"] in ("ok", "no_data")
    if report["facts"].get("accelerators"):
        assert "no-accelerator-found" not in finding_ids(report)
    else:
        # this CI machine: virtio devices only, no class 0x12, no /sys/class/accel
        assert "no-accelerator-found" in finding_ids(report)


# -- probes and derivers directly -----------------------------------------------------------
class DebugfsDenied(SnapshotHost):
    """A real snapshot in which /sys/kernel/debug is root-only, as on a board for a normal user."""

    def listdir(self, path):
        if path.startswith("/sys/kernel/debug"):
            raise AccessDenied(path, "permission denied")
        return super().listdir(path)

    def exists(self, path):
        if path.startswith("/sys/kernel/debug/"):
            return False
        return super().exists(path)

    def read_bytes(self, path, max_bytes=8 * 1024 * 1024):
        if path.startswith("/sys/kernel/debug"):
            raise AccessDenied(path, "permission denied")
        return super().read_bytes(path, max_bytes)


def _run(host, ids, options=None):
    specs = [s for s in load_specs() if s.id in ids]
    return run_probes(host, specs, options=options)


def test_unreadable_debugfs_on_a_rockchip_board_is_recorded(tmp_path):
    host = DebugfsDenied(str(case_path("k01")))
    facts, results = _run(host, {"accelerators", "rknpu-debugfs"})
    denied = facts.get("access.denied")
    assert denied and denied[0]["path"] == "/sys/kernel/debug/rknpu"
    a = facts.get("accelerators")[0]
    assert a["vendor"] == "rknpu" and "utilization_percent" not in a


def test_sampled_load_is_a_mean_over_the_window(tmp_path):
    host = SnapshotHost(str(case_path("k02")))
    facts, results = _run(host, {"rknpu-debugfs"}, options={"sample_s": 0.6})
    a = facts.get("accelerators")[0]
    assert a["utilization_percent"] == 98 and a["load"]["samples"] >= 2


def test_link_devfreq_by_parent_device_and_thermal_by_zone_type():
    f = Facts()
    f.add_accelerator({"vendor": "rknpu", "sysfs": "/sys/devices/platform/fdab0000.npu",
                       "sensors": {"temperature": {"zone_types": ["npu-thermal", "soc-thermal"]}}})
    f.set("devfreq.devices", [{"name": "dmc", "sysfs": "/sys/class/devfreq/dmc", "device": "/sys/devices/platform/dmc",
                               "cur_hz": 2112000000, "governor": "dmc_ondemand"},
                              {"name": "fdab0000.npu", "sysfs": "/sys/class/devfreq/fdab0000.npu",
                               "device": "/sys/devices/platform/fdab0000.npu", "cur_hz": 800000000,
                               "min_hz": 300000000, "max_hz": 1000000000, "governor": "rknpu_ondemand"}],
          "/sys/class/devfreq")
    f.set("thermal.zones", [{"zone": "thermal_zone0", "type": "soc-thermal", "temp_c": 50.0},
                            {"zone": "thermal_zone6", "type": "npu-thermal", "temp_c": 52.5}])
    link_devfreq(f, None)
    link_thermal(f, None)
    a = f.get("accelerators")[0]
    assert a["freq"] == {"devfreq": "/sys/class/devfreq/fdab0000.npu", "devfreq_name": "fdab0000.npu",
                         "udev_rule": 'ACTION=="add", SUBSYSTEM=="devfreq", KERNEL=="fdab0000.npu", '
                                      'ATTR{governor}="performance"',
                         "cur_hz": 800000000, "min_hz": 300000000, "max_hz": 1000000000,
                         "governor": "rknpu_ondemand"}
    assert a["temperature_c"] == 52.5 and a["thermal_zone"] == "thermal_zone6"


def test_thermal_zone_not_shared_between_two_devices_of_one_vendor():
    f = Facts()
    for n in (0, 1):
        f.add_accelerator({"vendor": "rknpu", "sysfs": f"/sys/devices/platform/npu{n}",
                           "sensors": {"temperature": {"zone_types": ["npu-thermal"]}}})
    f.set("thermal.zones", [{"zone": "thermal_zone6", "type": "npu-thermal", "temp_c": 52.5}])
    link_thermal(f, None)
    assert all("temperature_c" not in a for a in f.get("accelerators"))


def test_detection_tables_are_data():
    spec = [s for s in load_specs() if s.id == "accelerators"][0]
    ids = {row["id"] for row in spec.args["pci_ids"]}
    assert {"8086:7d1d", "1e60:2864", "1ac1:089a", "19e5:d802", "1022:17f0"} <= ids
    assert "rockchip,rk3588-rknpu" in {r["compatible"] for r in spec.args["compatible"]}
    assert registry.COLLECTORS["accelerators"] and registry.COLLECTORS["rknpu_debugfs"]


def test_shipped_udev_rule_file_sets_power_control_on():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(repo, "npu_doctor", "deploy", "systemd", "70-npu-doctor-runtime-pm.rules")).read()
    rules = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert rules and all(ln.startswith('ACTION=="add"') and ln.endswith('ATTR{power/control}="on"') for ln in rules)
    assert any("rknpu" in ln for ln in rules) and any('ATTR{class}=="0x12*"' in ln for ln in rules)


def test_npu_disabled_in_device_tree_is_named(tmp_path):
    snap = copy_case("k01-rk3588-npu-autosuspend", tmp_path / "snap")
    # the NPU left disabled (as rv1106.dtsi / some rk3588 board trees ship it): no platform
    # device, no devfreq, no debugfs
    shutil.rmtree(snap / NPU)
    os.remove(snap / "fs/sys/class/devfreq/fdab0000.npu")
    shutil.rmtree(snap / "fs/sys/kernel/debug/rknpu")
    node = snap / "fs/proc/device-tree/npu@fdab0000"
    node.mkdir()
    (node / "compatible").write_bytes(b"rockchip,rk3588-rknpu\x00")
    (node / "status").write_bytes(b"disabled\x00")
    report = check_json(snap)
    assert report["facts"]["inventory"]["disabled_in_devicetree"] == [
        {"node": "/npu@fdab0000", "compatible": "rockchip,rk3588-rknpu", "status": "disabled",
         "name": "Rockchip RK3588 NPU", "vendor": "rknpu"}]
    hits = [f for f in report["findings"] if f["id"] == "no-accelerator-found"]
    assert len(hits) == 1 and hits[0]["severity"] == "warning" and "disabled" in hits[0]["message"]
    (node / "status").write_bytes(b"okay\x00")
    report = check_json(snap)
    assert "disabled_in_devicetree" not in report["facts"]["inventory"]


def test_garbage_load_is_a_probe_error_and_the_version_is_kept(tmp_path):
    snap = copy_case("k01-rk3588-npu-autosuspend", tmp_path / "snap")
    (snap / "fs/sys/kernel/debug/rknpu/load").write_bytes(b"\xff\xfe garbage \x00\n")
    report = check_json(snap)
    probe = [p for p in report["probes"] if p["id"] == "rknpu-debugfs"][0]
    assert probe["status"] == "error" and "rknpu/load" in probe["error"]
    assert "probe-failed" in finding_ids(report)
    a = accel(report, "rknpu")
    assert a["driver"]["version"] == "0.9.8" and "utilization_percent" not in a
    assert "runtime-autosuspend" in finding_ids(report)  # the rest of the report still comes


def test_nvidia_gpu_function_found_audio_function_not_and_idle_link_speed_not_degraded(tmp_path):
    snap = copy_case("k06-intel-npu-user-not-in-render", tmp_path / "snap")
    dev = snap / "fs/sys/devices/pci0000:00/0000:00:0b.0"
    (dev / "vendor").write_text("0x10de\n")
    (dev / "device").write_text("0x2335\n")
    (dev / "class").write_text("0x030200\n")
    for name, val in (("current_link_speed", "2.5 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe"),
                      ("current_link_width", "16"), ("max_link_width", "16"), ("numa_node", "1")):
        (dev / name).write_text(val + "\n")
    os.remove(dev / "driver")
    os.symlink("../../../bus/pci/drivers/nvidia", dev / "driver")
    shutil.rmtree(dev / "accel")
    os.remove(snap / "fs/sys/class/accel/accel0")
    audio = snap / "fs/sys/devices/pci0000:00/0000:00:0b.1"
    audio.mkdir()
    (audio / "vendor").write_text("0x10de\n")
    (audio / "device").write_text("0x22e8\n")
    (audio / "class").write_text("0x040300\n")
    os.symlink("../../../devices/pci0000:00/0000:00:0b.1", snap / "fs/sys/bus/pci/devices/0000:00:0b.1")
    report = check_json(snap)
    a = accel(report)
    assert (a["vendor"], a["pci_address"], a["numa_node"]) == ("nvidia", "0000:00:0b.0", 1)
    assert a["pcie"]["cur_speed_gts"] == 2.5 and a["driver"]["name"] == "nvidia"
    # NVIDIA GPUs lower the link speed at idle; full width, so nothing is degraded
    assert "pcie-link-degraded" not in finding_ids(report)


def test_a_dangling_class_link_is_not_an_accelerator(tmp_path):
    # the device directory is gone (removed, fell off the bus) but a stale accel link stays
    snap = tmp_path / "snap"
    shutil.copytree(str(case_path("k06-intel-npu-user-not-in-render")), str(snap), symlinks=True)
    shutil.rmtree(str(snap / "fs/sys/devices/pci0000:00"))
    report = check_json(snap)
    assert report["facts"].get("accelerators", []) == []
