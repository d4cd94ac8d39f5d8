"""Intel Core Ultra NPU: intel_vpu kernel logs of several kernels, firmware blob strings, package
versions, sysfs telemetry over a sample window, zeInit causes, and `check --snapshot` cases."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from npu_doctor import registry
from npu_doctor.collectors.intel_npu import npu_name
from npu_doctor.host import SnapshotHost
from npu_doctor.parsers.intel_npu import (firmware_blob_version, parse_kernel_log,
                                          soname_version, split_package_version)
from npu_doctor.probes import CommandCache, ProbeContext, ProbeSpec

from conftest import case_path, check_json, fact_values, finding_ids

DATA = Path(__file__).parent / "data" / "intel_npu"
PCI = "0000:00:0b.0"


def test_fallback_name_then_loaded():
    st = parse_kernel_log((DATA / "dmesg-ivpu-fallback-name-6.x.txt").read_text())[PCI]
    assert st["firmware"] == {"file": "intel/vpu/vpu_37xx_v0.0.bin", "version":
                              "20250306*MTL_CLIENT_SILICON-release*1130*ci_tag_ud202512_vpu_rc_20250306_1130*5064b5debc3"}
    assert st["firmware_failures"] == [{"name": "vpu_37xx.bin", "error": -2, "attempts": 3}]
    assert st["initialized"] is True and st["driver_version"] == "1.0.0" and st["minor"] == 0
    assert "firmware_request_error" not in st and "probe_error" not in st


@pytest.mark.parametrize("name", ["dmesg-ivpu-fw-request-fail.txt", "dmesg-ivpu-probe-6.x-format.txt"])
def test_request_failed_both_probe_line_formats(name):
    st = parse_kernel_log((DATA / name).read_text())[PCI]
    assert st["firmware_request_error"] == -2
    assert st["probe_error"] == -2 and st["initialized"] is False
    assert "firmware" not in st


def test_older_dated_init_and_lunar_lake_firmware_string():
    old = parse_kernel_log((DATA / "dmesg-ivpu-6.6-dated-init.txt").read_text())[PCI]
    assert (old["driver_version"], old["driver_date"]) == ("1.0.0", "20230117")
    assert old["firmware"]["version"].startswith("20231031*MTL_CLIENT_SILICON-release*")
    lnl = parse_kernel_log((DATA / "dmesg-ivpu-lnl-6.18.txt").read_text())[PCI]
    assert lnl["firmware"]["file"] == "intel/vpu/vpu_40xx_v1.bin"
    assert npu_name(lnl["firmware"]["file"]) == "Intel NPU 40xx (Lunar Lake)" and npu_name(None) == "Intel NPU"
    assert lnl["firmware"]["version"].startswith("Nov 13 2025*NPU40xx*ci_tag_ud202548")
    assert parse_kernel_log("unrelated line\n") == {}


def test_firmware_blob_strings_both_forms():
    mtl = b"\x00\x01" + b"20240611*MTL_CLIENT_SILICON-release*0003*ci_tag_ud202424_vpu_rc_20240611_0003*f3e8a8f2747" + b"\x00"
    assert firmware_blob_version(mtl).endswith("*f3e8a8f2747")
    lnl = b"\xff" + b"Mar  5 2026*NPU40xx*ci_tag_ud202612_vpu_rc_20260304_1901-2-gabc*abc123" + b"\x00"
    assert firmware_blob_version(lnl).startswith("Mar  5 2026*NPU40xx*")
    assert firmware_blob_version(b"\x00no version here\x00") is None


def test_package_and_soname_versions():
    assert split_package_version("1.5.1.20240708-9842236399") == {"version": "1.5.1", "build": "20240708-9842236399"}
    assert split_package_version("1.38.0.20260910-34487311128~ubuntu26.04")["version"] == "1.38.0"
    assert split_package_version("1.17.6-1")["version"] == "1.17.6"
    assert soname_version("libze_intel_npu.so.1.35.0", "libze_intel_npu.so") == "1.35.0"
    assert soname_version("libze_loader.so.1.24.2", "libze_loader.so") == "1.24.2"
    assert soname_version("libze_intel_npu.so.1", "libze_intel_npu.so") is None


def test_c2_01_fallback_is_benign():
    rep = check_json(case_path("c2-01"))
    ids = finding_ids(rep)
    assert not {"firmware-missing", "firmware-driver-mismatch", "driver-probe-failed",
                "no-accelerator-found"} & ids
    npu = [a for a in rep["facts"]["accelerators"] if a.get("vendor") == "intel-npu"][0]
    assert npu["pci_address"] == PCI and npu["driver"]["name"] == "intel_vpu"
    assert npu["firmware"]["version"].startswith("20250306*MTL_CLIENT_SILICON")
    assert npu["firmware"]["failed_names"][0]["name"] == "vpu_37xx.bin"
    assert npu["name"] == "Intel NPU 37xx (Meteor/Arrow Lake)"
    assert rep["facts"]["drivers"]["intel_vpu"]["version"] == "1.0.0"


def test_c2_02_request_failure_is_firmware_missing_and_probe_failure():
    rep = check_json(case_path("c2-02"))
    ids = finding_ids(rep)
    assert {"firmware-missing", "driver-probe-failed"} <= ids
    assert "no-accelerator-found" not in ids
    assert PCI in fact_values(rep["facts"], "accelerators.*.pci_address")
    fm = [f for f in rep["findings"] if f["id"] == "firmware-missing"][0]
    assert PCI in fm["message"] and any("intel-fw-npu" in x["text"] for x in fm["fixes"])


def test_c2_04_eacces_in_runtime_log():
    rep = check_json(case_path("c2-04"))
    ev = [e for e in rep["facts"].get("log_events", []) if e["signature"] == "accel-open-eacces"]
    assert ev and ev[0]["node"] == "/dev/accel/accel0"
    if "device-node-permission" not in {r for r in _rule_ids()}:
        pytest.skip("device-node-permission is not defined yet (owned by the accelerators rules)")
    assert "device-node-permission" in finding_ids(rep)


def _rule_ids():
    from npu_doctor.rules import load_rules
    return [r.id for r in load_rules().rules]


def _accel_snapshot(tmp_path: Path, busy: int = 1000000) -> Path:
    snap = tmp_path / "snap"
    dev = snap / "fs/sys/devices/pci0000:00" / PCI
    (dev / "power").mkdir(parents=True)
    (snap / "fs/sys/bus/pci/drivers/intel_vpu").mkdir(parents=True)
    os.symlink("../../../bus/pci/drivers/intel_vpu", dev / "driver")
    (dev / "power/runtime_status").write_text("active\n")
    (dev / "npu_busy_time_us").write_text(f"{busy}\n")
    (dev / "npu_current_frequency_mhz").write_text("1400\n")
    (dev / "npu_max_frequency_mhz").write_text("1400\n")
    (snap / "fs/sys/class/accel").mkdir(parents=True)
    (dev / "accel/accel0").mkdir(parents=True)
    os.symlink(f"../../devices/pci0000:00/{PCI}/accel/accel0", snap / "fs/sys/class/accel/accel0")
    os.symlink("../../../" + PCI, dev / "accel/accel0/device")
    return snap


def _run(snap: Path, sample_s: float = 0.0):
    registry.load_all()
    host = SnapshotHost(str(snap))
    spec = ProbeSpec(id="intel-npu", collector="intel_npu")
    ctx = ProbeContext(host, spec, CommandCache(host), {"sample_s": sample_s, "signatures": []})
    registry.COLLECTORS["intel_npu"](ctx)
    return ctx.facts


def test_sysfs_utilization_over_sample_window(tmp_path, monkeypatch):
    snap = _accel_snapshot(tmp_path)
    busy = snap / "fs/sys/devices/pci0000:00" / PCI / "npu_busy_time_us"
    import npu_doctor.collectors.intel_npu as mod
    real_sleep = time.sleep

    def sleep_while_busy(seconds):
        # the NPU works 0.3 s of the window: the counter moves while the collector waits
        busy.write_text("1300000\n")
        real_sleep(seconds)

    monkeypatch.setattr(mod.time, "sleep", sleep_while_busy)
    facts = _run(snap, sample_s=0.8)
    npu = facts.data["accelerators"][0]
    assert npu["vendor"] == "intel-npu" and npu["pci_address"] == PCI
    assert npu["freq"] == {"max_hz": 1400000000, "cur_hz": 1400000000}
    assert 25.0 <= npu["utilization_percent"] <= 45.0, npu
    assert facts.sources["accelerators[0].utilization_percent"].endswith("npu_busy_time_us")


def test_suspended_npu_frequency_zero_is_not_reported(tmp_path):
    snap = _accel_snapshot(tmp_path)
    dev = snap / "fs/sys/devices/pci0000:00" / PCI
    (dev / "power/runtime_status").write_text("suspended\n")
    (dev / "npu_current_frequency_mhz").write_text("0\n")
    npu = _run(snap).data["accelerators"][0]
    assert "cur_hz" not in npu["freq"] and "utilization_percent" not in npu


def test_zeinit_causes_ruled_out_by_facts(tmp_path):
    snap = _accel_snapshot(tmp_path)
    (snap / "logs").mkdir()
    shutil.copy(DATA / "umd-test-zeinit-1.23.txt", snap / "logs/umd.log")
    (snap / "commands.toml").write_text(
        "[[command]]\nargv = [\"dmesg\"]\nreturncode = 0\nstdout = '''\n"
        + (DATA / "dmesg-ivpu-lnl-6.18.txt").read_text() + "'''\n")
    rep = check_json(snap)
    f = [x for x in rep["findings"] if x["id"] == "runtime-init-failed"]
    assert f, rep["findings"]
    msg = f[0]["message"]
    # the device is on the bus and intel_vpu initialised it: BIOS and driver are ruled out
    assert "ruled out: the NPU is on the PCI bus (0000:00:0b.0)" in msg
    assert "ruled out: intel_vpu is bound" in msg
    still_open = msg.split("Causes still open:")[1].split("Ruled out")[0]
    assert "render group" in still_open and "BIOS" not in still_open


def test_zeinit_2024_format_matches():
    # both npu-umd-test spellings (`Which is: 0x78000001`, `Which is:
    # ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)`) are found by catalogs/level-zero.toml
    from npu_doctor.catalog import load_catalogs
    cats = load_catalogs()
    for name in ("umd-test-zeinit-2024.txt", "umd-test-zeinit-1.23.txt"):
        ev = cats.match_text((DATA / name).read_text(), name, ("runtime",), "runtime")
        hits = [e for e in ev if e["mnemonic"] == "ZE_RESULT_ERROR_UNINITIALIZED"]
        assert hits and hits[0]["rule"] == "runtime-init-failed", name


@pytest.mark.parametrize("release,expect", [("6.2.0-39-generic", True), ("6.5.0-41-generic", False), ("6.8.0-35-generic", False)])
def test_kernel_minimum_for_npu(tmp_path, release, expect):
    # 6.5.0-41 and 6.8.0-35 are linux-npu-driver v1.5.1's verified kernels (matrices.md §4.2)
    snap = _accel_snapshot(tmp_path)
    (snap / "fs/proc/sys/kernel").mkdir(parents=True)
    (snap / "fs/proc/sys/kernel/osrelease").write_text(release + "\n")
    rep = check_json(snap)
    assert rep["facts"]["kernel"]["release"] == release
    assert ("kernel-driver-incompatible" in finding_ids(rep)) is expect


def test_openvino_dist_not_confused_with_its_companions(tmp_path):
    from npu_doctor.collectors.rknn_runtime import python_dists
    site = tmp_path / "snap/fs/usr/lib/python3.12/site-packages"
    for name in ("openvino_genai-2024.2.0.0.dist-info", "openvino_telemetry-2024.1.0.dist-info",
                 "openvino-2024.2.0.dist-info"):
        (site / name).mkdir(parents=True)
    (site / "openvino-2024.2.0.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: openvino\nVersion: 2024.2.0\n")
    got = python_dists(SnapshotHost(str(tmp_path / "snap")), ("openvino",))
    assert got["openvino"][0] == "2024.2.0"


def test_umd_firmware_release_matrix():
    from npu_doctor.collectors.intel_npu import check_umd_firmware, firmware_date
    from npu_doctor.matrices import matrix_rows
    assert firmware_date("Nov 13 2025*NPU40xx*ci_tag") == "20251113"
    assert firmware_date("Mar  5 2026*NPU40xx*x") == "20260305"
    assert firmware_date("20240611*MTL_CLIENT_SILICON-release*0003") == "20240611"
    rows = matrix_rows("intel-npu-release")
    assert rows and all(r.get("source") and r.get("date") for r in rows)
    # v1.5.1's own firmware (release notes) is fine
    ok = check_umd_firmware("1.5.1", "20240611*MTL_CLIENT_SILICON-release*0003*ci_tag_ud202424_vpu_rc_20240611_0003*f3e8a8f2747", rows)
    assert ok["status"] == "ok"
    # the UMD of v1.39.1 with the firmware of c2-01 (20250306): older than its release's firmware
    bad = check_umd_firmware("1.39.1", "20250306*MTL_CLIENT_SILICON-release*1130*ci_tag_ud202512_vpu_rc_20250306_1130*5064b5debc3", rows)
    assert bad["status"] == "mismatch" and "20261028" in bad["detail"]
    # a UMD release the table does not know: info, never a mismatch
    assert check_umd_firmware("1.40.0", "20261201*MTL*x", rows)["status"] == "not-in-matrix"


def test_snapshot_umd_newer_than_running_firmware(tmp_path):
    snap = tmp_path / "c2-01"
    shutil.copytree(case_path("c2-01"), snap, symlinks=True)
    with open(snap / "commands.toml", "a") as f:
        # deb version form of the linux-npu-driver packages (matrices.md §4.1)
        f.write("\n[[command]]\nargv = [\"dpkg-query\", \"-W\"]\nreturncode = 0\n"
                "stdout = '''intel-level-zero-npu\t1.39.1.20261028-18717236112\nintel-fw-npu\t1.39.1.20261028-18717236112\n'''\n")
    rep = check_json(snap)
    assert rep["facts"]["sdks"]["npu_umd"]["version"] == "1.39.1"
    f = [x for x in rep["findings"] if x["id"] == "firmware-driver-mismatch"]
    assert f and f[0]["severity"] == "warning" and "20250306" in f[0]["message"], rep["findings"]
