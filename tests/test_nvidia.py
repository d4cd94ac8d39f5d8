"""NVIDIA data-centre/desktop GPUs: nvidia-smi -q of several driver generations, NVML
failures, /proc/driver/nvidia/version, the CUDA toolkit matrix, and check --snapshot on the
real cases c2-13 and c2-14.

Real outputs: tests/data/nvidia/ (sources in SOURCES.md) and ../shared/cases.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.collectors.nvidia import cuda_min_driver
from npu_doctor.matrices import matrix_rows as load_matrix
from npu_doctor.parsers.nvidia import (
    nvidia_upgrades,
    nvml_failure,
    parse_cuda_version_file,
    parse_nvcc_version,
    parse_nvidia_smi_q,
    parse_proc_driver_version,
    pci_address,
)
from npu_doctor.tomlcompat import tomllib

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot

DATA = Path(__file__).parent / "data" / "nvidia"
SMI_418 = (DATA / "smi-q-418.67-v100-sxm2.txt").read_text()
SMI_566 = (DATA / "smi-q-566.36-rtx4070-laptop.txt").read_text()


def _case_stdout(case: str, argv) -> str:
    cmds = tomllib.loads((case_path(case) / "commands.toml").read_text())["command"]
    return next(c for c in cmds if c["argv"] == argv)["stdout"]


# -- parser: three driver generations ----------------------------------------------------------
def test_smi_418_old_throttle_reasons_absolute_temps():
    out = parse_nvidia_smi_q(SMI_418)
    assert out["driver_version"] == "418.67" and out["cuda_version"] == "10.1"
    assert out["attached_gpus"] == 4 and len(out["gpus"]) == 1  # the rest was elided upstream
    g = out["gpus"][0]
    assert g["pci_address"] == "0004:04:00.0"  # domain 0004 on POWER9 kept
    assert g["name"] == "Tesla V100-SXM2-32GB"
    assert g["temperature_c"] == 38
    assert g["thermal"]["shutdown_c"] == 90 and g["thermal"]["slowdown_c"] == 87
    assert g["thermal"]["max_operating_c"] == 83
    # nearest action point is max-operating (83), not slowdown (87)
    assert g["thermal"]["limit"] == "GPU Max Operating Temp" and g["thermal"]["headroom_c"] == 45
    assert g["clocks_event_reasons"] == ["Idle"] and g["thermal_throttle_reasons"] == []
    assert g["persistence_mode"] == "Enabled"
    assert g["pcie"]["cur_width"] == 2 and g["pcie"]["max_width"] == 16
    assert g["pcie"]["cur_speed_gts"] == 8.0 == g["pcie"]["max_speed_gts"]
    assert g["power_w"] == pytest.approx(39.78) and g["power_limit_w"] == 300
    assert g["utilization_percent"] == 0
    assert g["freq"] == {"cur_hz": 135_000_000, "max_hz": 1_530_000_000}
    assert g["firmware"]["version"] == "88.00.80.00.01"
    assert g["driver"] == {"name": "nvidia", "version": "418.67"}


def test_smi_566_event_reasons_and_tlimit_margins():
    out = parse_nvidia_smi_q(SMI_566)
    g = out["gpus"][0]
    assert out["driver_version"] == "566.36" and out["cuda_version"] == "12.7"
    assert g["pci_address"] == "0000:01:00.0"
    assert g["clocks_event_reasons"] == ["Idle"]
    # R565+ prints margins: 33 C left before T.Limit; max-operating starts at margin 0
    t = g["thermal"]
    assert t["margin_c"] == 33 and t["max_operating_margin_c"] == 0 and t["slowdown_margin_c"] == -2
    assert t["headroom_c"] == 33 and t["limit"] == "GPU Max Operating T.Limit Temp"
    assert "slowdown_c" not in t  # no absolute slowdown printed: unknown, not guessed
    assert t["target_c"] == 75
    assert g["pcie"]["device_max_gen"] == 4 and g["pcie"]["host_max_gen"] == 4
    assert g["pcie"]["cur_width"] == g["pcie"]["max_width"] == 8
    assert g["power_w"] == pytest.approx(1.97) and g["power_limit_w"] == pytest.approx(61.24)
    assert g["reset_required"] is False and g["remapping_failure"] is False
    assert g["driver_model"] == "WDDM"


def test_smi_465_temperature_subset_of_case_c2_13():
    out = parse_nvidia_smi_q(_case_stdout("c2-13", ["nvidia-smi", "-q"]))
    g = out["gpus"][0]
    assert g["pci_address"] == "0000:2d:00.0"
    assert g["temperature_c"] == 56
    # target N/A -> not a limit; max-operating 57 is the nearest, well below slowdown 97
    assert "target_c" not in g["thermal"]
    assert g["thermal"]["limit_c"] == 57 and g["thermal"]["headroom_c"] == 1
    assert g["thermal"]["max_operating_below_slowdown_c"] == 40
    assert "clocks_event_reasons" not in g  # not in the -d TEMPERATURE subset: unknown


def test_thermal_slowdown_active_is_a_thermal_reason():
    # the 566.36 report with the SW Thermal Slowdown flag as NVML sets it under throttling
    text = SMI_566.replace("        SW Thermal Slowdown               : Not Active",
                           "        SW Thermal Slowdown               : Active")
    g = parse_nvidia_smi_q(text)["gpus"][0]
    assert g["thermal_throttle_reasons"] == ["SW Thermal Slowdown"]
    assert set(g["clocks_event_reasons"]) == {"Idle", "SW Thermal Slowdown"}


@pytest.mark.parametrize("bus,want", [
    ("00000000:2D:00.0", "0000:2d:00.0"),
    ("00000004:04:00.0", "0004:04:00.0"),
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("garbage", None),
])
def test_pci_address(bus, want):
    assert pci_address(bus) == want


def test_not_a_report_is_a_clear_error():
    with pytest.raises(ValueError, match="nvidia-smi -q"):
        parse_nvidia_smi_q("hello\nworld\n")


# -- NVML failures ------------------------------------------------------------------------------
def test_nvml_mismatch_of_case_c2_14():
    f = nvml_failure(_case_stdout("c2-14", ["nvidia-smi", "-q"]))
    assert f["kind"] == "version-mismatch"
    assert f["message"] == "Failed to initialize NVML: Driver/library version mismatch"


@pytest.mark.parametrize("text,kind", [
    # nvidia-smi(1) / widely quoted messages
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
     "that the latest NVIDIA driver is installed and running.", "driver-not-loaded"),
    ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", "gpu-lost"),
    ("Failed to initialize NVML: Insufficient Permissions", "no-permission"),
    ("No devices were found", "no-devices"),
    ("Failed to initialize NVML: Unknown Error", "nvml-init-failed"),
])
def test_nvml_failure_kinds(text, kind):
    assert nvml_failure(text)["kind"] == kind


def test_report_is_not_a_failure():
    assert nvml_failure(SMI_418) is None


# -- driver, toolkit, apt history -----------------------------------------------------------------
@pytest.mark.parametrize("text,version,is_open", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.130  Wed Mar 21 03:37:26 PDT 2018\n"
     "GCC version:  gcc version 5.4.0 20160609 (Ubuntu 5.4.0-6ubuntu1~16.04.10)\n", "384.130", False),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  "
     "(dvs-builder@U16-I3-B03-4-3)  Tue Jun 25 01:26:03 UTC 2024\n", "555.58.02", True),
    ("NVRM version: NVIDIA UNIX Kernel Module for aarch64  34.1.1  Release Build  (builder)\n", "34.1.1", False),
])
def test_proc_driver_version(text, version, is_open):
    out = parse_proc_driver_version(text)
    assert out["version"] == version and out["open"] is is_open


def test_proc_driver_version_garbage():
    with pytest.raises(ValueError):
        parse_proc_driver_version("GCC version: gcc 9")


def test_cuda_version_files():
    assert parse_cuda_version_file('{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "12.4.1"\n   },\n'
                                   '   "cuda_cccl" : {\n      "name" : "CUDA C++ Core Compute Libraries",\n'
                                   '      "version" : "12.4.127"\n   }\n}\n') == "12.4.1"
    assert parse_cuda_version_file("CUDA Version 10.2.89\n") == "10.2.89"
    assert parse_cuda_version_file("nothing") is None
    nvcc = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2022 NVIDIA Corporation\n"
            "Built on Wed_Jun__8_16:49:14_PDT_2022\nCuda compilation tools, release 11.7, V11.7.99\n"
            "Build cuda_11.7.r11.7/compiler.31442593_0\n")
    assert parse_nvcc_version(nvcc) == "11.7.99"


def test_apt_history_of_case_c2_14():
    text = (case_path("c2-14") / "fs/var/log/apt/history.log").read_text()
    ups = nvidia_upgrades(text)
    assert ups == [{"action": "upgrade", "package": "libnvidia-common-460", "date": "2021-04-24 06:50:54",
                    "commandline": "/usr/bin/unattended-upgrade",
                    "from_version": "460.56-0ubuntu0.20.04.1", "to_version": "460.73.01-0ubuntu0.20.04.1"}]


# -- CUDA toolkit -> driver matrix --------------------------------------------------------------------
def test_matrix_rows_have_sources():
    rows = load_matrix("cuda-toolkit-min-driver")
    assert len(rows) > 40
    assert all(r.get("source", "").startswith("https://") and r.get("date") for r in rows)


@pytest.mark.parametrize("toolkit,driver", [
    ("12.8.1", "570.124.06"), ("12.8.0", "570.26"), ("12.8.93", "570.124.06"),
    ("12.4.1", "550.54.15"), ("11.6.2", "510.47.03"), ("10.1.243", "418.39"), ("10.2.89", "440.33"),
])
def test_cuda_min_driver(toolkit, driver):
    assert cuda_min_driver(toolkit, load_matrix("cuda-toolkit-min-driver"))["linux_driver"] == driver


def test_cuda_future_toolkit_not_in_matrix():
    assert cuda_min_driver("15.0.0", load_matrix("cuda-toolkit-min-driver")) is None


# -- check --snapshot: real cases ------------------------------------------------------------------
def test_case_c2_13_headroom_to_max_operating_target():
    rep = check_json(case_path("c2-13"))
    ids = finding_ids(rep)
    assert "thermal-headroom-low" in ids and "no-accelerator-found" not in ids
    assert "thermal-throttling" not in ids  # 56 < 57 and no clock reasons in the subset
    f = next(f for f in rep["findings"] if f["id"] == "thermal-headroom-low")
    assert "56 °C" in f["message"] and "GPU Max Operating Temp of 57 °C" in f["message"]
    assert any("thermald" in x["text"] for x in f["fixes"])  # 40 C below slowdown: platform policy
    facts = rep["facts"]
    assert fact_values(facts, "drivers.nvidia.version") == ["465.27"]
    assert fact_values(facts, "drivers.nvidia.cuda_version") == ["11.3"]
    assert fact_values(facts, "sdks.cuda.version") == []  # the driver's CUDA level is no toolkit
    assert fact_values(facts, "accelerators.*.pci_address") == ["0000:2d:00.0"]


def test_case_c2_14_nvml_mismatch_after_unattended_upgrade():
    rep = check_json(case_path("c2-14"))
    ids = finding_ids(rep)
    assert "runtime-driver-mismatch" in ids and "no-accelerator-found" not in ids
    f = next(f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch")
    assert "unattended-upgrade upgraded libnvidia-common-460" in f["message"]
    assert "460.73.01-0ubuntu0.20.04.1" in f["message"]
    kinds = {x["kind"] for x in f["fixes"]}
    assert {"now", "persist"} <= kinds
    assert any("Reboot" in x["text"] for x in f["fixes"])
    assert any("apt-mark hold" in x["text"] for x in f["fixes"])
    assert {e["fact"] for e in f["evidence"]} >= {"nvidia.smi.message", "nvidia.last_upgrade.package"}
    assert rep["facts"]["inventory"]["incomplete"][0]["vendor"] == "nvidia"


# -- check --snapshot: built from real outputs -----------------------------------------------------
def _snapshot(tmp: Path, files=None, commands=None, logs=None) -> Path:
    return make_snapshot(tmp, files=files, commands=commands or None, logs=logs)


def test_snapshot_thermal_throttling_and_degraded_width(tmp_path):
    text = SMI_418.replace("        SW Thermal Slowdown         : Not Active",
                           "        SW Thermal Slowdown         : Active")
    snap = _snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}])
    rep = check_json(snap)
    ids = finding_ids(rep)
    assert "thermal-throttling" in ids
    assert "pcie-link-degraded" in ids  # x2 of x16, idle: information (test below)
    msg = next(f["message"] for f in rep["findings"] if f["id"] == "thermal-throttling")
    assert "SW Thermal Slowdown" in msg and "0004:04:00.0" in msg


def test_narrower_link_of_an_idle_gpu_is_information_and_of_a_busy_one_a_warning(tmp_path):
    # nvidia-smi -q: "The current link generation and width. These may be reduced when the GPU
    # is not in use" -- the R418 capture is an idle V100 at x2 of x16
    def link(text, name):
        d = tmp_path / name
        d.mkdir()
        rep = check_json(_snapshot(d, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
        return [(f["severity"], f["message"]) for f in rep["findings"] if f["id"] == "pcie-link-degraded"]

    (sev, msg), = link(SMI_418, "idle")
    assert sev == "info" and "idle" in msg and "x2 of x16" in msg
    busy = SMI_418.replace("        Gpu                         : 0 %", "        Gpu                         : 87 %")
    (sev, msg), = link(busy, "busy")
    assert sev == "warning" and "x2 of x16" in msg and "idle" not in msg


def test_snapshot_idle_speed_drop_is_not_degraded(tmp_path):
    # an idle GPU at Gen1 of Gen3 with full width: power saving, not a finding
    text = SMI_418.replace("                Current             : 3", "                Current             : 1") \
                  .replace("                Current             : 2x", "                Current             : 16x")
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
    assert "pcie-link-degraded" not in finding_ids(rep)


PROC_46056 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  460.56  Tue Feb 23 23:25:18 UTC 2021\n"
VERSION_JSON = '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   }\n}\n'


def test_snapshot_toolkit_newer_than_driver(tmp_path):
    snap = _snapshot(tmp_path, files={"/proc/driver/nvidia/version": PROC_46056,
                                      "/usr/local/cuda/version.json": VERSION_JSON % "12.4.1"})
    rep = check_json(snap)
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and f[0]["severity"] == "error"
    assert "550.54.15" in f[0]["message"] and "460.56" in f[0]["message"]
    assert fact_values(rep["facts"], "sdks.cuda.version") == ["12.4.1"]


def test_snapshot_minor_version_compat_is_a_warning(tmp_path):
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    rep = check_json(_snapshot(tmp_path, files={"/proc/driver/nvidia/version": proc,
                                                "/usr/local/cuda/version.json": VERSION_JSON % "12.4.1"}))
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and f[0]["severity"] == "warning" and "minor-version" in f[0]["message"]


def test_snapshot_new_enough_driver_is_quiet(tmp_path):
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.195.03  Release Build  (x)  Sat Sep 20 00:47:16 UTC 2025\n"
    rep = check_json(_snapshot(tmp_path, files={"/proc/driver/nvidia/version": proc,
                                                "/usr/local/cuda/version.json": VERSION_JSON % "12.4.1"}))
    assert "runtime-driver-mismatch" not in finding_ids(rep)
    assert fact_values(rep["facts"], "drivers.nvidia.open_kernel_module") == [True]


def test_snapshot_future_toolkit_is_info_not_mismatch(tmp_path):
    rep = check_json(_snapshot(tmp_path, files={"/proc/driver/nvidia/version": PROC_46056,
                                                "/usr/local/cuda/version.json": VERSION_JSON % "15.0.0"}))
    ids = finding_ids(rep)
    assert "runtime-driver-mismatch" not in ids and "version-not-in-matrix" in ids


def test_snapshot_nvml_library_vs_loaded_module(tmp_path):
    snap = _snapshot(tmp_path, files={"/proc/driver/nvidia/version": PROC_46056,
                                      "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.460.73.01": ""})
    rep = check_json(snap)
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and "460.73.01" in f[0]["message"] and "460.56" in f[0]["message"]


def test_snapshot_kernel_and_runtime_log_signatures(tmp_path):
    # dmesg as quoted in public reports (the message spans lines); PyTorch's CUDA error 35 text
    dmesg = ("[   27.950245] NVRM: API mismatch: the client has the version 415.27, but\n"
             "               NVRM: this kernel module has the version 390.129.  Please\n"
             "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
             "               NVRM: components have the same version.\n"
             "[ 3811.120000] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n")
    log = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    snap = _snapshot(tmp_path, files={"/proc/driver/nvidia/version":
                                      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  390.129  Mon Jul 22 21:10:21 PDT 2019\n"},
                     commands=[{"argv": ["dmesg"], "returncode": 0, "stdout": dmesg}],
                     logs={"train.log": log})
    rep = check_json(snap)
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert any("client of version 415.27" in m and "390.129" in m for m in msgs)
    assert any("CUDA runtime is newer" in m for m in msgs)
    assert "device-unresponsive" in finding_ids(rep)


def test_snapshot_partial_report_keeps_the_answering_gpus(tmp_path):
    # nvidia-smi lists the GPUs that answer and prints NVML's error for a lost one (exit != 0)
    text = SMI_418 + "\nUnable to determine the device handle for GPU0000:05:00.0: Unknown Error\n"
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 15,
                                                     "stdout": text}]))
    assert fact_values(rep["facts"], "accelerators.*.pci_address") == ["0004:04:00.0"]
    assert rep["facts"]["nvidia"]["smi"]["status"] == "partial"
    assert "device-unresponsive" in finding_ids(rep)
    assert "no-accelerator-found" not in finding_ids(rep)


def test_memory_headroom_absolute_form():
    g = parse_nvidia_smi_q(SMI_418)["gpus"][0]
    assert g["thermal"]["memory_headroom_c"] == 85 - 34
    # margin form (R565+) prints no absolute memory limit: unknown, not computed
    assert "memory_headroom_c" not in parse_nvidia_smi_q(SMI_566)["gpus"][0]["thermal"]


def test_snapshot_hbm_near_its_limit(tmp_path):
    text = SMI_418.replace("        Memory Current Temp         : 34 C", "        Memory Current Temp         : 82 C")
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "thermal-headroom-low"]
    assert any("memory at 82 °C is 3 °C below" in m for m in msgs)


def test_snapshot_cuda_insufficient_without_a_driver_lists_the_causes(tmp_path):
    log = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    rep = check_json(_snapshot(tmp_path, logs={"train.log": log}))
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(msgs) == 1 and "container started without GPU access" in msgs[0]


def test_snapshot_persistence_mode_off_on_linux_only(tmp_path):
    off = SMI_418.replace("    Persistence Mode                : Enabled", "    Persistence Mode                : Disabled")
    rep = check_json(_snapshot(tmp_path / "a", commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": off}]))
    assert "gpu-persistence-mode-off" in finding_ids(rep)
    # a Windows (WDDM) driver model has no persistence mode to turn on
    win = SMI_566.replace("    Persistence Mode                      : Enabled", "    Persistence Mode                      : Disabled")
    rep = check_json(_snapshot(tmp_path / "b", commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": win}]))
    assert "gpu-persistence-mode-off" not in finding_ids(rep)


# -- memory errors and compute mode in `nvidia-smi -q` (R418 and R590 layouts) ------------------------
SMI_590 = (DATA / "smi-q-590.48.01-h100-idle.txt").read_text()
_RR = ("        Uncorrectable Error                            : 0\n"
       "        Pending                                        : No\n")


def test_smi_memory_error_fields_all_layouts():
    old = parse_nvidia_smi_q(SMI_418)["gpus"][0]
    assert old["retired_pages_pending"] is False and old["ecc_uncorrectable_volatile"] == 0
    assert "row_remap_pending" not in old
    new = parse_nvidia_smi_q(SMI_590)["gpus"][0]
    assert new["row_remap_pending"] is False and new["remapped_rows_uncorrectable"] == 0
    assert new["ecc_uncorrectable_volatile"] == 0 and "repair_pending" not in new
    assert "retired_pages_pending" not in new  # Pending Page Blacklist N/A on H100: unknown
    laptop = parse_nvidia_smi_q(SMI_566)["gpus"][0]
    assert "ecc_uncorrectable_volatile" not in laptop  # ECC off / N/A: unknown, not 0


def test_snapshot_row_remap_pending_and_uncorrectable_ecc(tmp_path):
    assert _RR in SMI_590
    text = SMI_590.replace(_RR, _RR.replace(": 0", ": 4").replace(": No", ": Yes")) \
                  .replace("            DRAM Uncorrectable                         : 0", "            DRAM Uncorrectable                         : 4", 1)
    g = parse_nvidia_smi_q(text)["gpus"][0]
    assert g["row_remap_pending"] is True and g["remapped_rows_uncorrectable"] == 4
    assert g["ecc_uncorrectable_volatile"] == 4
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "device-unhealthy"]
    assert len(msgs) == 1 and "Remapped Rows Pending: Yes" in msgs[0]  # the ECC count is its evidence


def test_snapshot_uncorrectable_ecc_and_old_page_retirement(tmp_path):
    text = SMI_418.replace("                CBU                 : 0\n                Total               : 0",
                           "                CBU                 : 0\n                Total               : 2", 1)
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "device-unhealthy"]
    assert any("2 uncorrectable ECC error(s)" in m for m in msgs)


def test_snapshot_repair_pending_and_compute_mode_prohibited(tmp_path):
    text = SMI_590.replace("        Channel Repair Pending                         : No",
                           "        Channel Repair Pending                         : Yes") \
                  .replace("    Compute Mode                                       : Default",
                           "    Compute Mode                                       : Prohibited")
    rep = check_json(_snapshot(tmp_path, commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": text}]))
    ids = finding_ids(rep)
    assert "device-unhealthy" in ids and "device-busy" in ids
    quiet = check_json(_snapshot(tmp_path / "q", commands=[{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": SMI_590}]))
    assert not {"device-unhealthy", "device-busy"} & set(finding_ids(quiet))


REPO_CASES = Path(__file__).resolve().parent / "cases"


def test_driver_version_from_a_pasted_proc_version_line(tmp_path):
    # cuda_memtest prints /proc/driver/nvidia/version's first line as it starts (case v219,
    # the report's log verbatim): with no /proc file in the snapshot, the log gives the module
    log = REPO_CASES / "v219-cuda-memtest-cuda115-gt720-sm35-no-kernel-image" / "logs" / "cuda_memtest.log"
    rep = check_json(_snapshot(tmp_path, logs={"cuda_memtest.log": log}))
    assert fact_values(rep["facts"], "drivers.nvidia.version") == ["470.86"]
    assert "toolkit-runtime-mismatch" in finding_ids(rep)


def test_proc_version_file_wins_over_a_pasted_line(tmp_path):
    log = REPO_CASES / "v220-cuda-memtest-cuda113-driver-46080-unsupported-ptx" / "logs" / "cuda_memtest.log"
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  465.31  Thu May 13 22:19:15 UTC 2021\n"
    rep = check_json(_snapshot(tmp_path, files={"/proc/driver/nvidia/version": proc},
                               logs={"cuda_memtest.log": log}))
    assert fact_values(rep["facts"], "drivers.nvidia.version") == ["465.31"]


def test_pasted_nvcc_release_is_the_toolkit_and_the_driver_cuda_level_covers_its_update(tmp_path):
    # case n310's terminal log (verbatim): nvcc 12.6.77 (12.6 Update 3, whose installer bundles
    # 560.35.05) next to nvidia-smi's 560.35.03 "CUDA Version: 12.6": the driver runs 12.6 fully
    log = REPO_CASES / "n310-gpu-burn-8x-a100-sxm4-560-system-not-yet-initialized" / "logs" / "terminal.log"
    rep = check_json(_snapshot(tmp_path, logs={"terminal.log": log}))
    facts = rep["facts"]
    assert fact_values(facts, "sdks.cuda.version") == ["12.6.77"]
    assert fact_values(facts, "sdks.cuda.driver_check") == ["ok"]
    assert "runtime-driver-mismatch" not in finding_ids(rep)


def test_pasted_nvcc_newer_than_the_driver_major(tmp_path):
    # nvcc 12.6.77 (case n310's `nvcc -V`, verbatim) next to a 470.86 driver, CUDA 11.4 (case
    # x210's nvidia-smi header, verbatim): below the 525.60.13 minimum of CUDA 12
    n310 = (REPO_CASES / "n310-gpu-burn-8x-a100-sxm4-560-system-not-yet-initialized" / "logs" / "terminal.log").read_text().splitlines()
    x210 = (REPO_CASES / "x210-fooocus-torch-cu121-driver-470-found-11040" / "logs" / "fooocus.log").read_text().splitlines()
    nvcc = [line for line in n310 if line.startswith(("nvcc:", "Copyright", "Built on", "Cuda compilation", "Build cuda"))]
    smi = [line for line in x210 if line.startswith(("+---", "| NVIDIA-SMI", "|---"))]
    rep = check_json(_snapshot(tmp_path, logs={"paste.log": "\n".join(nvcc + smi) + "\n"}))
    assert fact_values(rep["facts"], "sdks.cuda.version") == ["12.6.77"]
    assert fact_values(rep["facts"], "drivers.nvidia.version") == ["470.86"]
    assert fact_values(rep["facts"], "sdks.cuda.driver_check") == ["too-old"]
    assert "runtime-driver-mismatch" in finding_ids(rep)
