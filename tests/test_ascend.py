"""Huawei Ascend: npu-smi parsers on real outputs of several driver releases and layouts,
version files and range lists, and `check --snapshot` on the real cases c1-01 and c1-03.

Every sample under tests/data/ascend/ is a verbatim public output; tests/data/ascend/SOURCE
names the report each came from.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npu_doctor.check import Config, run_check
from npu_doctor.host import SnapshotHost
from npu_doctor.parsers import ascend as P

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot

DATA = Path(__file__).resolve().parent / "data" / "ascend"


def data(name: str) -> str:
    return (DATA / name).read_text()


# -- npu-smi info ---------------------------------------------------------------------------
def test_910b_one_chip_layout_25_0():
    t = P.parse_npu_smi_info(data("npu_smi_910b2c_25.0.rc1.1.txt"))
    assert t["driver_version"] == "25.0.rc1.1"
    (c,) = t["chips"]
    assert c == {"npu_id": 0, "name": "910B2C", "health": "OK", "power_w": 88.3,
                 "temperature_c": 34, "hugepages_used": 0, "hugepages_total": 0, "chip_id": 0,
                 "bus_id": "0000:5A:00.0", "aicore_percent": 0, "memory_used_mb": 0,
                 "memory_total_mb": 0, "hbm_used_mb": 3406, "hbm_total_mb": 65536}


def test_a3_two_chip_layout_24_1_has_phy_ids_and_no_power_on_second_chip():
    t = P.parse_npu_smi_info(data("npu_smi_a3_24.1.rc3.7.txt"))
    assert t["driver_version"] == "24.1.rc3.7"
    assert [(c["npu_id"], c["chip_id"], c["phy_id"]) for c in t["chips"]] == [(0, 0, 0), (0, 1, 1)]
    assert t["chips"][0]["power_w"] == 178.8
    assert "power_w" not in t["chips"][1]  # printed as "-": unknown, not 0
    assert t["chips"][1]["hbm_used_mb"] == 3186


def test_wide_26_layout_reads_by_header():
    t = P.parse_npu_smi_info(data("npu_smi_wide_26.0.rc2.txt"))
    assert t["tool_version"] == "26.0.rc2"
    assert [c["bus_id"] for c in t["chips"]] == ["0000:9D:00.0", "0000:9F:00.0"]
    assert t["chips"][0]["power_w"] == 162.6 and t["chips"][1]["hbm_total_mb"] == 65536


def test_310p_layout_device_column_and_no_hbm():
    t = P.parse_npu_smi_info(data("npu_smi_310p3_24.1.rc2.txt"))
    a, b = t["chips"]
    assert (a["npu_id"], a["chip_id"], a["device_id"]) == (1, 0, 0)
    assert (b["chip_id"], b["device_id"]) == (1, 1)
    assert "power_w" not in a and a["memory_used_mb"] == 1397 and a["memory_total_mb"] == 44280
    assert "hbm_used_mb" not in a


def test_910b4_used_slash_total_without_space():
    t = P.parse_npu_smi_info(data("npu_smi_910b4_24.1.1.txt"))
    assert [(c["npu_id"], c["hbm_used_mb"], c["hbm_total_mb"]) for c in t["chips"]] == [
        (0, 26838, 32768), (1, 29356, 32768)]


def test_23_0_table_with_elided_rows_and_process_table():
    t = P.parse_npu_smi_info(data("npu_smi_23.0.5_with_processes.txt"))
    assert [c["npu_id"] for c in t["chips"]] == [0, 7]
    assert t["chips"][0]["memory_used_mb"] == 920 and t["chips"][0]["memory_total_mb"] == 13553
    assert t["processes"] == []


def test_dcmi_failure_is_no_table_and_a_busy_code():
    text = data("npu_smi_dcmi_8020.txt")
    with pytest.raises(ValueError):
        P.parse_npu_smi_info(text)
    f = P.parse_npu_smi_failure(text)
    assert f["code"] == "-8020" and f["kind"] == "busy"
    f = P.parse_npu_smi_failure("dcmi module initialize failed. ret is -8005")
    assert f == {"code": "-8005", "kind": "init", "line": "dcmi module initialize failed. ret is -8005",
                 "meaning": P.DCMI_CODES["-8005"]["meaning"]}
    assert P.parse_npu_smi_failure(data("npu_smi_910b2c_25.0.rc1.1.txt")) is None


def test_loader_failure_is_not_a_dcmi_failure():
    # Project-HAMi/HAMi#615: npu-smi in a pod without the driver's lib64
    text = "npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file: No such file or directory"
    assert P.parse_loader_failure(text) == {
        "library": "libc_sec.so", "error": "cannot open shared object file: No such file or directory", "line": text}
    assert P.parse_loader_failure("npu-smi: error while loading shared libraries: libdrvdsmi_host.so: wrong ELF class: ELFCLASS32")["library"] == "libdrvdsmi_host.so"
    assert P.parse_loader_failure(data("npu_smi_dcmi_8020.txt")) is None


# -- board, version files, ranges ------------------------------------------------------------
def test_board_listing():
    b = P.parse_board(data("npu_smi_board_23.0.5.txt"))
    assert b["software_version"] == "23.0.5" and b["firmware_version"] == "7.1.0.7.220"
    assert b["compatibility"] == "OK" and b["bus_id"] == "0000:61:00.0" and b["chip_count"] == 1
    with pytest.raises(ValueError):
        P.parse_board("nothing here")


def test_version_files():
    d = P.parse_info_file(data("driver_version_24.1.rc1.info"))
    assert d["version"] == "24.1.rc1" and d["compatible_version_fw"] == "[7.0.0,7.2.99]"
    assert P.vrc_family(d["innerversion"]) == "V100R001C15"
    f = P.parse_info_file(data("firmware_version_23.0.7.info"))
    assert f["version"] == "7.1.0.11.220" and f["package_version"] == "23.0.7"
    c = P.parse_info_file(data("cann_8.5.0_toolkit_install.info"))
    assert c["version"] == "8.5.0" and c["path"] == "/usr/local/Ascend/cann-8.5.0/aarch64-linux"


@pytest.mark.parametrize("version,ranges,expected", [
    ("7.1.0.11.220", "[7.0.0,7.2.99]", True),       # firmware inside the driver's range
    ("7.5.0.1.129", "[7.0.0,7.2.99]", False),       # a newer firmware than the driver knows
    ("7.7.0.1.231", "[6.4.0,6.4.99],[7.0.0,7.7.99]", True),
    ("23.0.rc3", "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]", True),
    ("23.0.0.1", "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]", True),   # trailing dot = prefix
    ("24.1.rc1", "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]", False),
    ("24.1.rc2.2", "[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.]", True),
    ("V100R001C21", "[V100R001C15],[V100R001C18],[V100R001C21]", True),
    ("V100R001C22", "[V100R001C15],[V100R001C18],[V100R001C21]", False),
    ("V100R001C17", "[V100R001C13,V100R001C19],[V100R001C30]", True),
])
def test_range_lists(version, ranges, expected):
    assert P.in_range_list(version, P.parse_range_list(ranges)) is expected


def test_range_list_bad_text():
    with pytest.raises(ValueError):
        P.parse_range_list("7.0.0-7.2.99")


def test_log_env_pitfall():
    assert P.log_env_problems({"ASCEND_GLOBAL_LOG_LEVEL": "1"})[0]["problem"] == "level-without-stdout"
    assert P.log_env_problems({"ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"}) == []
    assert P.log_env_problems({"ASCEND_GLOBAL_LOG_LEVEL": "3"}) == []


# -- check --snapshot on the real cases ------------------------------------------------------
def test_case_c1_01_dcmi_8020_is_device_busy_and_count_unknown():
    rep = check_json(case_path("c1-01"))
    ids = finding_ids(rep)
    assert "device-busy" in ids
    assert not ids & {"no-accelerator-found", "toolkit-runtime-mismatch", "runtime-init-failed"}
    f = rep["facts"]
    assert f["sdks"]["cann"]["version"] == "8.0.0"
    assert f["ascend"]["npu_smi"]["dcmi_code"] == "-8020"
    assert not f.get("accelerators")  # unknown, not a list of zero guesses
    assert f["inventory"]["unknown"][0]["vendor"] == "ascend"
    busy = next(x for x in rep["findings"] if x["id"] == "device-busy")
    assert "-8020" in busy["message"] and any(e["value"] == "-8020" for e in busy["evidence"])


def test_case_c1_03_healthy_910b2c_baseline():
    rep = check_json(case_path("c1-03"))
    ids = finding_ids(rep)
    assert not ids & {"no-accelerator-found", "device-unhealthy", "device-busy",
                      "runtime-init-failed", "firmware-driver-mismatch"}
    f = rep["facts"]
    assert fact_values(f, "accelerators.*.name") == ["910B2C"]
    assert fact_values(f, "accelerators.*.pci_address") == ["0000:5a:00.0"]
    assert fact_values(f, "accelerators.*.power_w") == [88.3]
    assert fact_values(f, "accelerators.*.driver.version") == ["25.0.rc1.1"]
    assert f["sdks"]["cann"]["version"] == "8.3.RC2"
    # CANN 8.3.RC2 is not in the shipped table: an info, never a mismatch
    nim = [x for x in rep["findings"] if x["id"] == "version-not-in-matrix"]
    assert nim and nim[0]["severity"] == "info"


# -- constructed snapshots from the real samples ---------------------------------------------
def _snapshot(tmp_path, commands=(), files=None, environ=None):
    return make_snapshot(tmp_path, files=files, commands=list(commands), environ=environ)


def _run(snap):
    res = run_check(SnapshotHost(str(snap)), Config.load())
    return res.facts.data, [f.to_json() for f in res.findings]


def test_board_nok_is_firmware_driver_mismatch(tmp_path):
    board = data("npu_smi_board_23.0.5.txt").replace("Compatibility                  : OK",
                                                     "Compatibility                  : NOK")
    snap = _snapshot(tmp_path, [(["npu-smi", "info"], 0, data("npu_smi_23.0.5_with_processes.txt")),
                                (["npu-smi", "info", "-t", "board", "-i", "0"], 0, board)])
    facts, findings = _run(snap)
    acc = {a["npu_id"]: a for a in facts["accelerators"]}
    assert acc[0]["firmware"] == {"version": "7.1.0.7.220", "compatibility": "NOK"}
    assert "firmware" not in acc[7]  # no board listing captured for NPU 7
    fdm = [f for f in findings if f["id"] == "firmware-driver-mismatch"]
    assert len(fdm) == 1 and "NOK" in fdm[0]["message"] and fdm[0]["severity"] == "error"


def test_version_info_ranges_give_firmware_driver_mismatch(tmp_path):
    # the driver 24.1.rc1 accepts firmware 7.0.0-7.2.99; firmware package 23.0.7 accepts
    # drivers 23.0.rc3.* / 23.0.0.*: both directions disagree
    snap = _snapshot(tmp_path, files={
        "/usr/local/Ascend/driver/version.info": data("driver_version_24.1.rc1.info"),
        "/usr/local/Ascend/firmware/version.info": data("firmware_version_23.0.7.info").replace(
            "Version=7.1.0.11.220", "Version=7.5.0.1.129")})
    facts, findings = _run(snap)
    assert facts["compat"]["ascend-fw-drv"]["status"] == "mismatch"
    msg = next(f["message"] for f in findings if f["id"] == "firmware-driver-mismatch")
    assert "7.5.0.1.129" in msg and "24.1.rc1" in msg


def test_matching_driver_and_firmware_pass(tmp_path):
    snap = _snapshot(tmp_path, files={
        "/usr/local/Ascend/driver/version.info": data("driver_version_24.1.rc1.info"),
        "/usr/local/Ascend/firmware/version.info": data("firmware_version_23.0.7.info").replace(
            "compatible_version_drv=[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]",
            "compatible_version_drv=[23.0.0,23.0.0.],[24.1,24.1.]")})
    facts, findings = _run(snap)
    assert facts["compat"]["ascend-fw-drv"]["status"] == "ok"
    assert "firmware-driver-mismatch" not in {f["id"] for f in findings}


def test_cann_85_layout_and_driver_family_outside_cann_list(tmp_path):
    # CANN 8.5.0 (cann-8.5.0/<arch>-linux layout) lists C15..C23; driver 24.1.rc1 is C15 -> ok
    files = {"/usr/local/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info":
             data("cann_8.5.0_toolkit_install.info"),
             "/usr/local/Ascend/driver/version.info": data("driver_version_24.1.rc1.info")}
    facts, findings = _run(_snapshot(tmp_path, files=files))
    assert facts["sdks"]["cann"]["version"] == "8.5.0"
    assert facts["compat"]["ascend-cann-drv"]["status"] == "ok"
    # a driver of family C30 (not listed by CANN 8.5.0) -> a warning with both versions
    tmp2 = tmp_path / "b"
    tmp2.mkdir()
    files["/usr/local/Ascend/driver/version.info"] = data("driver_version_24.1.rc1.info").replace(
        "Innerversion=V100R001C15SPC006B220", "Innerversion=V100R001C30SPC006B220")
    facts, findings = _run(_snapshot(tmp2, files=files))
    rdm = [f for f in findings if f["id"] == "runtime-driver-mismatch"]
    assert rdm and rdm[0]["severity"] == "warning" and "V100R001C30" in rdm[0]["message"]


def test_newer_driver_than_matrix_is_info_not_mismatch(tmp_path):
    # CANN 8.0.0 is published with HDK 24.1.0; a 26.0 driver is newer than any row
    snap = _snapshot(tmp_path, [(["npu-smi", "info"], 0, data("npu_smi_wide_26.0.rc2.txt"))], files={
        "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info":
            data("cann_8.0.0_toolkit_install.info")})
    facts, findings = _run(snap)
    ids = {f["id"]: f for f in findings}
    assert "runtime-driver-mismatch" not in ids
    assert ids["version-not-in-matrix"]["severity"] == "info"
    # and an older driver than the published pair is a mismatch
    tmp2 = tmp_path / "old"
    tmp2.mkdir()
    snap = _snapshot(tmp2, [(["npu-smi", "info"], 0, data("npu_smi_310p3_24.1.rc2.txt"))], files={
        "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info":
            data("cann_8.0.0_toolkit_install.info")})
    facts, findings = _run(snap)
    msg = next(f["message"] for f in findings if f["id"] == "runtime-driver-mismatch")
    assert "24.1.0" in msg and "24.1.rc2" in msg


def test_shared_bus_id_chips_stay_two_accelerators(tmp_path):
    snap = _snapshot(tmp_path, [(["npu-smi", "info"], 0, data("npu_smi_310p3_24.1.rc2.txt"))])
    facts, _ = _run(snap)
    acc = facts["accelerators"]
    assert [(a["index"], a["chip_id"]) for a in acc] == [(0, 0), (1, 1)]
    assert all("pci_address" not in a and a["bus_id"] == "0000:01:00.0" for a in acc)


def test_unhealthy_chip(tmp_path):
    text = data("npu_smi_a3_24.1.rc3.7.txt").replace(
        "| 0     Ascend910           | OK            | -  ", "| 0     Ascend910           | Alarm         | -  ")
    facts, findings = _run(_snapshot(tmp_path, [(["npu-smi", "info"], 0, text)]))
    du = [f for f in findings if f["id"] == "device-unhealthy"]
    assert len(du) == 1 and "Alarm" in du[0]["message"] and "0000:9F:00.0" in du[0]["message"]


def test_log_env_rule(tmp_path):
    snap = _snapshot(tmp_path, environ={"ASCEND_GLOBAL_LOG_LEVEL": "1", "HOME": "/home/user"})
    facts, findings = _run(snap)
    hidden = [f for f in findings if f["id"] == "runtime-log-hidden"]
    assert hidden and "ASCEND_SLOG_PRINT_TO_STDOUT" in hidden[0]["message"]
    assert facts["ascend"]["log_env"]["log_dir"] == "/home/user/ascend/log"


def test_common_listing_frequencies():
    c = P.parse_common(data("npu_smi_common_23.0.5.txt"))
    assert c == {"npu_id": 0, "chip_count": 1, "temperature_c": 41, "power_w": 71.7,
                 "aicore_percent": 0, "hbm_percent": 0, "rated_mhz": 900, "cur_mhz": 900}


def test_alarm_with_clock_below_rated_is_thermal_throttling(tmp_path):
    table = data("npu_smi_23.0.5_with_processes.txt")
    common = ["npu-smi", "info", "-t", "common", "-i", "0"]
    facts, findings = _run(_snapshot(tmp_path, [(["npu-smi", "info"], 0, table),
                                                (common, 0, data("npu_smi_common_23.0.5.txt"))]))
    acc = next(a for a in facts["accelerators"] if a["npu_id"] == 0)
    assert acc["freq"] == {"cur_hz": 900000000, "max_hz": 900000000}
    assert "thermal-throttling" not in {f["id"] for f in findings}
    hot = table.replace("| 0     xxx                 | OK     ", "| 0     xxx                 | Warning")
    slow = data("npu_smi_common_23.0.5.txt").replace("curFreq(MHZ)            : 900",
                                                     "curFreq(MHZ)            : 600")
    tmp2 = tmp_path / "hot"
    tmp2.mkdir()
    facts, findings = _run(_snapshot(tmp2, [(["npu-smi", "info"], 0, hot), (common, 0, slow)]))
    tt = [f for f in findings if f["id"] == "thermal-throttling"]
    assert len(tt) == 1 and "600000000" in tt[0]["message"] and "Warning" in tt[0]["message"]


def test_runtime_lost_heartbeat_is_device_unresponsive(tmp_path):
    snap = _snapshot(tmp_path)
    (snap / "logs").mkdir()
    shutil.copy(DATA / "runtime_lost_heartbeat.log", snap / "logs" / "vllm.log")
    facts, findings = _run(snap)
    du = [f for f in findings if f["id"] == "device-unresponsive"]
    assert len(du) == 1 and "device 1" in du[0]["message"] and "vllm.log:6" in du[0]["message"]


def test_live_host_runs_npu_smi_from_path(tmp_path, monkeypatch):
    # a stand-in npu-smi that prints the real DCMI failure and exits 1, as on the board
    from npu_doctor.host import LiveHost
    tool = tmp_path / "bin" / "npu-smi"
    tool.parent.mkdir()
    shutil.copy(DATA / "npu_smi_dcmi_8020.txt", tmp_path / "out.txt")
    tool.write_text("#!/bin/sh\ncat '%s'\nexit 1\n" % (tmp_path / "out.txt"))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tool.parent, "/usr/bin:/bin"))
    res = run_check(LiveHost(), Config.load(), select=["device-busy"])
    assert res.facts.get("ascend.npu_smi.dcmi_code") == "-8020"
    assert [f.id for f in res.findings] == ["device-busy"]


def test_health_warning_is_a_warning_not_an_error(tmp_path):
    text = data("npu_smi_a3_24.1.rc3.7.txt").replace(
        "| 0     Ascend910           | OK            | 178.8", "| 0     Ascend910           | Warning       | 178.8")
    facts, findings = _run(_snapshot(tmp_path, [(["npu-smi", "info"], 0, text)]))
    du = [f for f in findings if f["id"] == "device-unhealthy"]
    assert len(du) == 1 and du[0]["severity"] == "warning" and "36 °C" in du[0]["message"]


def test_unreadable_table_with_exit_0_is_a_probe_error_not_a_device_fault(tmp_path):
    facts, findings = _run(_snapshot(tmp_path, [(["npu-smi", "info"], 0, "some future layout\n")]))
    ids = {f["id"] for f in findings}
    assert "probe-failed" in ids and "runtime-init-failed" not in ids
    assert "no-accelerator-found" not in ids
    assert facts["inventory"]["unknown"][0]["vendor"] == "ascend"


def test_npu_smi_without_its_driver_libraries_is_a_missing_library(tmp_path):
    err = "npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file: No such file or directory\n"
    snap = make_snapshot(tmp_path, commands=[(["npu-smi", "info"], 127, "", err)])
    res = run_check(SnapshotHost(str(snap)), Config.load())
    ids = {f.id for f in res.findings}
    assert "missing-shared-library" in ids and "runtime-init-failed" not in ids
    assert res.facts.get("ascend.npu_smi.missing_library") == "libc_sec.so"
