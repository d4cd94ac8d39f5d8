"""AMD XDNA: xrt-smi / xbutil examine in the 2.17, 2.18, 2.19 and 2.21 layouts, amdxdna kernel
logs, dpkg-query output, firmware directories, and `check --snapshot` on real cases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from npu_doctor.parsers.dpkg import parse_dpkg_query, select, upstream_version
from npu_doctor.parsers.xdna import firmware_dir_name, parse_examine, parse_kernel_log

from conftest import case_path, check_json, fact_values, finding_ids

DATA = Path(__file__).parent / "data" / "xdna"


def test_examine_2_17_xbutil_layout():
    rep = parse_examine((DATA / "xrt-smi-examine-2.17-xbutil.txt").read_text())
    assert rep["xrt"]["version"] == "2.17.0" and rep["xrt"]["branch"] == "2024.1"
    assert rep["drivers"]["amdxdna"] == {"version": "0.1"}
    assert rep["drivers"]["xocl"]["version"] == "2.17.0"
    assert "firmware_version" not in rep  # "N/A" is unknown, not a version
    assert rep["devices"] == [{"pci_address": "0000:c7:00.1", "name": "RyzenAI-npu1"}]
    assert rep["system"]["glibc"] == "2.38"


def test_examine_2_18_no_device_and_alveo_warning():
    rep = parse_examine((DATA / "xrt-smi-examine-2.18-no-device.txt").read_text())
    assert rep["xrt"]["version"] == "2.18.0"
    assert rep["drivers"]["amdxdna"]["version"] == "2.18.0_20240712"
    assert rep["drivers"]["xclmgmt"] == {}
    assert rep["devices"] == [] and rep["device_count"] == 0
    assert rep["warnings"] and "xclmgmt version is unknown" in rep["warnings"][0]
    assert rep["errors"] == []


def test_examine_2_19_table_layout():
    rep = parse_examine((DATA / "xrt-smi-examine-2.19.txt").read_text())
    assert rep["xrt"]["version"] == "2.19.0"
    assert rep["drivers"]["amdxdna"] == {"version": "2.19.0_20250330",
                                         "hash": "7c1d273ef9946848a9f236f1216cfda10d9465cb"}
    assert rep["firmware_version"] == "1.0.0.63"
    assert rep["devices"] == [{"pci_address": "0000:67:00.1", "name": "RyzenAI-npu4"}]


def test_examine_2_21_root_and_failing_user_run():
    root = parse_examine((DATA / "xrt-smi-examine-2.21-root.txt").read_text())
    assert root["firmware_version"] == "255.0.5.35"
    assert root["devices"] == [{"pci_address": "0000:05:00.1", "name": "NPU Krackan"}]
    user = parse_examine((DATA / "xrt-smi-examine-2.21-user-mmap-eagain.txt").read_text())
    assert user["xrt"]["version"] == "2.21.0"
    assert user["header"]["UID"] == "1000"
    assert user["devices"] == [] and "device_count" not in user  # unknown, not 0
    assert "err=-11" in user["errors"][0]


def test_examine_rejects_other_text():
    with pytest.raises(ValueError):
        parse_examine("bash: xrt-smi: command not found\n")


def test_kernel_logs():
    bad = parse_kernel_log((DATA / "dmesg-amdxdna-mbox-magic.txt").read_text())["0000:c6:00.1"]
    assert bad["mbox_magic"] == "0x30ec000" and bad["firmware_not_alive"] is True
    assert bad["probe_error"] == -22 and bad["initialized"] is False
    ok = parse_kernel_log((DATA / "dmesg-amdxdna-initialized.txt").read_text())
    assert ok["0000:c2:00.1"]["drm_version"] == "0.0.0"
    assert ok["0000:c6:00.1"]["drm_version"] == "0.6.0" and ok["0000:c6:00.1"]["minor"] == 0


def test_firmware_dir_name():
    assert firmware_dir_name("0x1502", "0x00") == "1502_00"
    assert firmware_dir_name("0x17f0", "0x10") == "17f0_10"
    assert firmware_dir_name(None, "0x00") is None


def test_dpkg_query_output():
    # the c1-04 board's packages (radxa-build/rock-5b#29) plus a removed package (empty version)
    text = ("linux-image-6.1.43-20-rk2312\t6.1.43-20-3e26818dc\nlinux-image-rock-5b\t6.1.43-20-5bdd6ed\n"
            "libze1:amd64\t1.17.6-1\nold-package\t\n")
    pkgs = parse_dpkg_query(text)
    assert pkgs == {"linux-image-6.1.43-20-rk2312": "6.1.43-20-3e26818dc",
                    "linux-image-rock-5b": "6.1.43-20-5bdd6ed", "libze1": "1.17.6-1"}
    assert [p["name"] for p in select(pkgs, ["linux-image-*"])] == [
        "linux-image-6.1.43-20-rk2312", "linux-image-rock-5b"]
    assert upstream_version("1:2024.2.0-15519") == "2024.2.0"
    with pytest.raises(ValueError):
        parse_dpkg_query("this is not dpkg output\n")


def test_c2_06_healthy_with_xclmgmt_warning():
    rep = check_json(case_path("c2-06"))
    f = rep["facts"]
    assert f["sdks"]["xrt"]["version"] == "2.19.0"
    assert f["drivers"]["amdxdna"]["version"] == "2.19.0_20250330"
    npu = [a for a in f["accelerators"] if a.get("vendor") == "amd-xdna"]
    assert len(npu) == 1
    assert (npu[0]["name"], npu[0]["pci_address"], npu[0]["firmware"]["version"]) == (
        "RyzenAI-npu4", "0000:67:00.1", "1.0.0.63")
    assert not {"no-accelerator-found", "driver-not-loaded", "runtime-driver-mismatch",
                "runtime-init-failed", "firmware-driver-mismatch", "probe-failed"} & finding_ids(rep)
    assert f["xrt"]["warnings"]  # kept as a fact, not a finding


def test_c2_07_wrong_firmware():
    rep = check_json(case_path("c2-07"))
    ids = finding_ids(rep)
    assert {"firmware-driver-mismatch", "driver-probe-failed"} <= ids
    assert not {"firmware-missing", "no-accelerator-found"} & ids
    assert "0000:c6:00.1" in fact_values(rep["facts"], "accelerators.*.pci_address")
    fdm = [x for x in rep["findings"] if x["id"] == "firmware-driver-mismatch"][0]
    assert "0x30ec000" in fdm["message"] and any("amdnpu" in x["text"] for x in fdm["fixes"])


def test_c2_08_memlock_not_permission():
    rep = check_json(case_path("c2-08"))
    ids = finding_ids(rep)
    assert "memlock-limit-low" in ids and "device-node-permission" not in ids
    assert rep["facts"]["sdks"]["xrt"]["version"] == "2.21.0"
    assert rep["facts"]["xrt"]["returncode"] == 1


def test_snapshot_sysfs_and_firmware_dir(tmp_path):
    snap = tmp_path / "snap"
    pci = "0000:c6:00.1"
    dev = snap / "fs/sys/devices/pci0000:00/0000:00:08.2" / pci
    (dev / "accel/accel0").mkdir(parents=True)
    (snap / "fs/sys/bus/pci/drivers/amdxdna").mkdir(parents=True)
    os.symlink("../../../../bus/pci/drivers/amdxdna", dev / "driver")
    (dev / "device").write_text("0x1502\n")
    (dev / "revision").write_text("0x00\n")
    (dev / "vendor").write_text("0x1022\n")
    os.symlink("../../../" + pci, dev / "accel/accel0/device")
    (snap / "fs/sys/class/accel").mkdir(parents=True)
    os.symlink(f"../../devices/pci0000:00/0000:00:08.2/{pci}/accel/accel0", snap / "fs/sys/class/accel/accel0")
    fw = snap / "fs/lib/firmware/amdnpu/1502_00"
    fw.mkdir(parents=True)
    (fw / "npu.sbin").write_bytes(b"\x00" * 16)
    rep = check_json(snap)
    npu = [a for a in rep["facts"]["accelerators"] if a.get("vendor") == "amd-xdna"]
    assert npu and npu[0]["pci_address"] == pci
    assert npu[0]["firmware"]["dir"] == "/lib/firmware/amdnpu/1502_00"
    assert npu[0]["firmware"]["files"] == ["npu.sbin"]


@pytest.mark.parametrize("name,pci,key,value", [
    ("dmesg-amdxdna-fw-request-intree-6.14.txt", "0000:64:00.1", "firmware_file", "amdnpu/17f0_10/npu.sbin"),
    ("dmesg-amdxdna-fw-request-oot-6.10.txt", "0000:c5:00.1", "firmware_request_error", -2),
    ("dmesg-amdxdna-fw-protocol-6.19.txt", "0000:c7:00.1", "firmware_protocol", "7.3"),
    ("dmesg-amdxdna-fw-validate-2024.txt", "0000:66:00.1", "firmware_validate_error", -5),
])
def test_kernel_log_firmware_failures(name, pci, key, value):
    st = parse_kernel_log((DATA / name).read_text())[pci]
    assert st[key] == value


def _dmesg_snapshot(tmp_path, name):
    snap = tmp_path / "snap"
    (snap / "fs").mkdir(parents=True)
    (snap / "commands.toml").write_text(
        "[[command]]\nargv = [\"dmesg\"]\nreturncode = 0\nstdout = '''\n" + (DATA / name).read_text() + "'''\n")
    return snap


@pytest.mark.parametrize("name,present,absent", [
    ("dmesg-amdxdna-fw-request-intree-6.14.txt", {"firmware-missing", "driver-probe-failed"},
     {"firmware-driver-mismatch", "no-accelerator-found"}),
    ("dmesg-amdxdna-fw-validate-2024.txt", {"firmware-driver-mismatch", "driver-probe-failed"},
     {"firmware-missing"}),
    ("dmesg-amdxdna-fw-protocol-6.19.txt", {"firmware-driver-mismatch"}, {"firmware-missing"}),
    ("dmesg-amdxdna-initialized.txt", set(),
     {"firmware-missing", "firmware-driver-mismatch", "driver-probe-failed", "no-accelerator-found"}),
])
def test_kernel_log_findings(tmp_path, name, present, absent):
    ids = finding_ids(check_json(_dmesg_snapshot(tmp_path, name)))
    assert present <= ids and not (absent & ids), ids


def test_unreadable_xrt_smi_output_is_one_probe_error(tmp_path):
    snap = tmp_path / "snap"
    (snap / "fs").mkdir(parents=True)
    (snap / "commands.toml").write_text(
        "[[command]]\nargv = [\"xrt-smi\", \"examine\"]\nreturncode = 0\nstdout = '''garbage\\n'''\n")
    rep = check_json(snap)
    probe = [p for p in rep["probes"] if p["id"] == "xdna"][0]
    assert probe["status"] == "error" and "unparsable" in probe["error"]
    assert "probe-failed" in finding_ids(rep)
