"""Hailo: identify and HailoRT error parsers on real outputs of several releases, and
`check --snapshot` on the real cases c1-09, c1-11 and c5-09.

Samples under tests/data/hailo/ are verbatim public outputs (tests/data/hailo/SOURCE).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.check import Config, run_check
from npu_doctor.host import SnapshotHost
from npu_doctor.parsers import hailo as P

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot

DATA = Path(__file__).resolve().parent / "data" / "hailo"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_identify_4_20_hailo8l_trusts_device_architecture():
    d = P.parse_identify(data("identify_4.20.0_hailo8l.txt"))
    assert d["pci_address"] == "0000:01:00.0"
    assert d["firmware_version"] == "4.20.0"
    assert d["firmware_flags"] == "release,app,extended context switch buffer"
    assert d["board_name"] == "Hailo-8" and d["architecture"] == "HAILO8L"
    assert d["control_protocol_version"] == "2" and d["part_number"] == "HM21LB1C2LAE"


def test_identify_4_21_excerpt():
    d = P.parse_identify(data("identify_4.21.0_excerpt.txt"))
    assert d["firmware_version"] == "4.21.0" and d["architecture"] == "HAILO8L"
    assert "pci_address" not in d


def test_identify_board_name_only_falls_back():
    d = P.parse_identify("Board Name: Hailo-8\nFirmware Version: 4.17.0 (release,app)\n")
    assert d["architecture"] == "HAILO8"


def test_identify_rejects_other_text():
    with pytest.raises(ValueError):
        P.parse_identify(data("identify_mismatch_4.23.0_vs_4.22.0.txt"))


@pytest.mark.parametrize("name,driver,library", [
    ("identify_mismatch_4.23.0_vs_4.22.0.txt", "4.23.0", "4.22.0"),
    ("mismatch_4.20.0_vs_4.19.0.txt", "4.20.0", "4.19.0"),
])
def test_driver_library_mismatch_lines(name, driver, library):
    e = P.parse_runtime_error(data(name))
    assert (e["driver_version"], e["library_version"]) == (driver, library)


def test_status_and_firmware_lines():
    e = P.parse_runtime_error(data("rpicam-hello_hef_arch.log"))
    assert e["status_name"] == "HAILO_INVALID_HEF" and e["status_code"] == 26
    e = P.parse_runtime_error(data("fw_unsupported_op_4.20_4.21.txt"))
    assert (e["fw_host_version"], e["fw_device_version"]) == ("4.20.0", "4.21.0")


def test_versions_and_families():
    assert P.parse_cli_version("HailoRT-CLI version 4.23.0\n") == "4.23.0"
    assert P.parse_cli_version("") is None
    assert P.library_version_from_name("/usr/lib/libhailort.so.4.23.0") == "4.23.0"
    assert P.library_version_from_name("/usr/lib/libhailort.so") is None
    assert P.family_of("4.23.0") == "hailo8" and P.family_of("5.1.1") == "hailo1x"
    assert P.arch_family("HAILO8L") == "hailo8" and P.arch_family("HAILO10H") == "hailo1x"
    assert P.same_minor("4.20.0", "4.20.1") is True and P.same_minor("4.20.0", "4.21.0") is False


# -- cases ------------------------------------------------------------------------------------
def test_case_c1_09_exit_76_is_runtime_driver_mismatch():
    rep = check_json(case_path("c1-09"))
    ids = finding_ids(rep)
    assert "runtime-driver-mismatch" in ids
    assert not ids & {"no-accelerator-found", "driver-not-loaded", "runtime-init-failed"}
    f = rep["facts"]
    assert f["drivers"]["hailo_pci"]["version"] == "4.23.0"
    assert f["sdks"]["hailort"]["version"] == "4.22.0"
    rdm = next(x for x in rep["findings"] if x["id"] == "runtime-driver-mismatch")
    assert "4.23.0" in rdm["message"] and "4.22.0" in rdm["message"]
    assert any("4.22.0" in fx["text"] for fx in rdm["fixes"] if fx["kind"] == "now")
    # other vendors' extensions of the same rule keep their documentation to themselves
    assert not [fx for fx in rdm["fixes"] if "nvidia" in fx["text"].lower() or "rknn" in fx["text"].lower()]


def test_case_c1_11_healthy_device_raises_nothing_of_the_stack():
    rep = check_json(case_path("c1-11"))
    ids = finding_ids(rep)
    assert not ids & {"no-accelerator-found", "runtime-driver-mismatch", "firmware-driver-mismatch",
                      "runtime-init-failed", "missing-shared-library"}
    f = rep["facts"]
    assert fact_values(f, "accelerators.*.vendor") == ["hailo"]
    assert fact_values(f, "accelerators.*.pci_address") == ["0000:01:00.0"]
    assert fact_values(f, "accelerators.*.firmware.version") == ["4.20.0"]
    assert fact_values(f, "accelerators.*.name") == ["HAILO8L"]
    assert f["sdks"]["tappas"]["version"] == "3.31.0"


def test_case_c5_09_hef_for_hailo8_on_hailo8l():
    rep = check_json(case_path("c5-09"))
    ids = finding_ids(rep)
    assert "toolkit-runtime-mismatch" in ids
    assert not ids & {"runtime-driver-mismatch", "firmware-driver-mismatch", "no-accelerator-found",
                      "runtime-init-failed"}
    trm = [x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch"]
    assert len(trm) == 1 and "HAILO8L" in trm[0]["message"] and "HAILO8 " in trm[0]["message"]
    assert fact_values(rep["facts"], "accelerators.*.architecture") == ["HAILO8L"]


# -- constructed snapshots from real samples -------------------------------------------------
def _snapshot(tmp_path, commands=(), files=None):
    return make_snapshot(tmp_path, files=files, commands=list(commands))


def _run(snap):
    res = run_check(SnapshotHost(str(snap)), Config.load())
    return res.facts.data, [f.to_json() for f in res.findings]


def test_sysfs_driver_and_library_file_exact_match(tmp_path):
    ident = ["hailortcli", "fw-control", "identify"]
    snap = _snapshot(tmp_path, [(ident, 0, data("identify_4.20.0_hailo8l.txt"), "")], files={
        "/sys/module/hailo_pci/version": "4.20.0\n", "/usr/lib/libhailort.so.4.20.0": ""})
    facts, findings = _run(snap)
    assert facts["compat"]["hailo-runtime-driver"]["status"] == "ok"
    assert not {f["id"] for f in findings} & {"runtime-driver-mismatch", "firmware-driver-mismatch"}
    acc = facts["accelerators"][0]
    assert acc["driver"] == {"name": "hailo_pci", "version": "4.20.0"}
    # a library of another release: exact match fails, even one revision apart
    tmp2 = tmp_path / "b"
    tmp2.mkdir()
    snap = _snapshot(tmp2, [(ident, 0, data("identify_4.20.0_hailo8l.txt"), "")], files={
        "/sys/module/hailo_pci/version": "4.20.1\n", "/usr/lib/libhailort.so.4.20.0": ""})
    facts, findings = _run(snap)
    assert facts["compat"]["hailo-runtime-driver"]["status"] == "mismatch"
    assert "runtime-driver-mismatch" in {f["id"] for f in findings}


def test_firmware_minor_differs_from_driver(tmp_path):
    ident = ["hailortcli", "fw-control", "identify"]
    snap = _snapshot(tmp_path, [(ident, 0, data("identify_4.20.0_hailo8l.txt"), "")], files={
        "/sys/module/hailo_pci/version": "4.21.0\n"})
    facts, findings = _run(snap)
    fdm = [f for f in findings if f["id"] == "firmware-driver-mismatch"]
    assert fdm and fdm[0]["severity"] == "warning" and "4.20.0" in fdm[0]["message"]


def test_identify_failure_other_than_76_is_runtime_init_failed(tmp_path):
    ident = ["hailortcli", "fw-control", "identify"]
    err = "[HailoRT] [error] Failed to open device file /dev/hailo0 with error 13\n"
    facts, findings = _run(_snapshot(tmp_path, [(ident, 1, "", err)]))
    assert facts["hailo"]["identify"]["status"] == "failed"
    rif = [f for f in findings if f["id"] == "runtime-init-failed"]
    assert rif and "/dev/hailo0" in rif[0]["message"]
    assert "runtime-driver-mismatch" not in {f["id"] for f in findings}


def test_hailo10h_with_4x_stack_is_family_mismatch(tmp_path):
    ident = ["hailortcli", "fw-control", "identify"]
    out = data("identify_4.20.0_hailo8l.txt").replace("HAILO8L", "HAILO10H")
    snap = _snapshot(tmp_path, [(ident, 0, out, "")], files={"/sys/module/hailo_pci/version": "4.20.0\n"})
    facts, findings = _run(snap)
    assert facts["compat"]["hailo-family"]["status"] == "mismatch"
    assert any("HAILO10H" in f["message"] for f in findings if f["id"] == "runtime-driver-mismatch")


def test_driver_version_from_kernel_log_meets_library(tmp_path):
    # the driver's own init line (hailo-ai/hailort-drivers: "hailo: Init module. driver version")
    ident = ["hailortcli", "fw-control", "identify"]
    snap = _snapshot(tmp_path, [(ident, 0, data("identify_4.20.0_hailo8l.txt"), ""),
                                (["dmesg"], 0, "[    5.123456] hailo: Init module. driver version 4.20.0\n", "")],
                     files={"/usr/lib/aarch64-linux-gnu/libhailort.so.4.19.0": ""})
    facts, findings = _run(snap)
    assert facts["drivers"]["hailo_pci"]["version"] == "4.20.0"
    assert facts["sdks"]["hailort"]["version"] == "4.19.0"
    rdm = [f for f in findings if f["id"] == "runtime-driver-mismatch"]
    assert len(rdm) == 1 and "4.20.0" in rdm[0]["message"] and "4.19.0" in rdm[0]["message"]


def test_identify_exit_0_unreadable_is_probe_error(tmp_path):
    ident = ["hailortcli", "fw-control", "identify"]
    facts, findings = _run(_snapshot(tmp_path, [(ident, 0, "something new\n", "")]))
    ids = {f["id"] for f in findings}
    assert "probe-failed" in ids and "runtime-init-failed" not in ids


def test_hailo1x_53_class_and_node_names(tmp_path):
    # constructed from hailort-drivers v5.3.0 linux/pcie/src/pcie.c: hailo1x_pci registers class
    # "hailo1x" and names its nodes "%s-%d" with HAILO_DEV_NAME "h1x" (up to 5.2: hailo_chardev, hailoN)
    snap = _snapshot(tmp_path, files={"/sys/class/hailo1x/h1x-0/dev": "509:0\n",
                                      "/sys/module/hailo1x_pci/version": "5.3.0\n"})
    facts, findings = _run(snap)
    devs = fact_values(facts, "accelerators.*.dev")
    assert "/dev/h1x-0" in devs
    assert "no-accelerator-found" not in {f["id"] for f in findings}
