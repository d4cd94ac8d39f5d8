"""NVIDIA and Jetson catalogs (catalogs/nvidia-xid.toml, nvidia-nvrm.toml, cuda-runtime.toml,
cuda-driver.toml, nvml.toml, tensorrt.toml, cudnn.toml, jetson.toml): whole enums covered, every
wording a driver or framework prints finds its entry, application faults stay benign, and the
facts that lines on different log lines state come together."""

from __future__ import annotations

import pytest
import tomli_w

from npu_doctor.catalog import load_catalogs

from conftest import check_json, fact_values, finding_ids

CATALOGS = load_catalogs()


def _cat(cid):
    return next(c for c in CATALOGS.catalogs if c.id == cid)


def _hit(line, scopes=("kernel", "runtime")):
    """(catalog, key, rule) of each entry a line raises or records."""
    return [(e.catalog, e.key, e.rule) for e, _ in CATALOGS.match_line(line, scopes)]


def test_every_xid_of_nvidias_catalog_is_an_entry():
    codes = {int(e.code) for e in _cat("nvidia-xid").entries if e.code is not None}
    assert codes == set(range(1, 173))


def test_every_cuda_and_nvml_code_is_an_entry():
    rt = {int(e.code) for e in _cat("cuda-runtime").entries if e.code is not None}
    assert {1, 2, 3, 34, 35, 36, 46, 100, 101, 209, 214, 222, 700, 719, 802, 803, 804, 999} <= rt
    assert len(rt) >= 125
    drv = {e.mnemonic for e in _cat("cuda-driver").entries}
    assert {"CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "CUDA_ERROR_UNKNOWN"} <= drv
    nvml = {int(e.code) for e in _cat("nvml").entries if e.code is not None}
    assert set(range(1, 31)) <= nvml and 999 in nvml


@pytest.mark.parametrize("line,code,rule", [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.", "79", "device-unresponsive"),
    ("NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus.", "79", "device-unresponsive"),   # older drivers
    ("XidCriticalError: Xid=48 on Device=GPU-5a9e7a3c; marking device as unhealthy.", "48", "device-unhealthy"),
    ("NVRM: Xid (PCI:0000:c1:00): 119, pid=1582, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!", "119", "device-unresponsive"),
    ("NVRM: Xid (PCI:0000:01:00): 13, pid=2317, name=python3, Graphics SM Warp Exception", "13", None),
    ("NVRM: Xid (PCI:0000:01:00): 31, pid=2317, name=python3, Ch 00000010, intr 00000000. MMU Fault", "31", None),
    ("NVRM: Xid (PCI:0000:01:00): 43, pid=2850, name=python, Ch 00000008", "43", None),
    ("NVRM: Xid (PCI:0000:01:00): 45, pid=2850, name=python, Ch 00000008", "45", None),
])
def test_xid_wordings_and_buckets(line, code, rule):
    hits = [(e, g) for e, g in CATALOGS.match_line(line, ("kernel",)) if e.catalog == "nvidia-xid"]
    assert hits and hits[0][0].code == code and hits[0][0].rule == rule


def test_xid_154_raises_only_a_real_recovery_action():
    assert ("nvidia-xid", "xid-154-action", "device-unhealthy") in _hit(
        "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    assert not any(r for _, _, r in _hit(
        "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)"))


@pytest.mark.parametrize("line,mnemonic", [
    ("cudaGetDeviceCount returned 35", "cudaErrorInsufficientDriver"),
    ("RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:50", "cudaErrorInsufficientDriver"),
    ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW", "cudaErrorCompatNotSupportedOnDevice"),
    ("CUDA failure 100: no CUDA-capable device is detected ; GPU=0 ; hostname=x ; expr=cudaSetDevice(info_.device_id);", "cudaErrorNoDevice"),
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=209 : no kernel image is available for execution on the device", "cudaErrorNoKernelImageForDevice"),
    ("CUDA error 209 at ggml-cuda.cu:1234: x", "cudaErrorNoKernelImageForDevice"),
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorSystemNotReady: system not yet initialized", "cudaErrorSystemNotReady"),
    ("failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", "CUDA_ERROR_NO_DEVICE"),
    ("numba.cuda.cudadrv.driver.CudaAPIError: [803] Call to cuInit results in CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
])
def test_cuda_errors_in_every_framework_wording(line, mnemonic):
    found = [e for e, _ in CATALOGS.match_line(line, ("runtime",)) if e.rule]
    assert found and found[0].mnemonic == mnemonic


def test_cuda_application_faults_are_benign():
    for line in ("RuntimeError: CUDA error: an illegal memory access was encountered",
                 "RuntimeError: CUDA error: out of memory",
                 "RuntimeError: CUDA error: unspecified launch failure"):
        assert not any(r for _, _, r in _hit(line)), line


@pytest.mark.parametrize("line,key", [
    ("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "fallen-off-bus"),
    ("NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.", "fallen-off-bus"),
    ("NVRM: fallen off the bus and is not responding to commands.", "fallen-off-bus-at-probe"),
    ("NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:", "pci-io-region-invalid"),
    ("NVRM: RmFetchGspRmImages: No firmware image found", "gsp-no-firmware-image"),
    ("NVRM: The NVIDIA probe routine was not called for 1 device(s).", "probe-routine-not-called"),
])
def test_nvrm_messages(line, key):
    assert key in [k for c, k, r in _hit(line, ("kernel",)) if c == "nvidia-nvrm" and r]


def _snapshot(tmp_path, dmesg="", logs=None, files=None):
    snap = tmp_path / "snap"
    (snap / "logs").mkdir(parents=True)
    for name, text in (logs or {}).items():
        (snap / "logs" / name).write_text(text)
    for path, text in (files or {}).items():
        p = snap / "fs" / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    cmds = [{"argv": ["dmesg"], "returncode": 0, "stdout": dmesg, "stderr": ""}] if dmesg else []
    (snap / "commands.toml").write_text(tomli_w.dumps({"command": cmds}))
    return snap


def test_r5xx_api_mismatch_joins_versions_from_three_lines(tmp_path):
    dmesg = ("[  101.000001] NVRM: API mismatch: the client 'nvidia-smi' (pid 2081)\n"
             "[  101.000002] NVRM: has the version 570.133.20, but this kernel module has\n"
             "[  101.000003] NVRM: the version 570.124.06.  Please make sure that this\n"
             "[  101.000004] NVRM: kernel module and all NVIDIA driver components\n"
             "[  101.000005] NVRM: have the same version.\n")
    rep = check_json(_snapshot(tmp_path, dmesg=dmesg))
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(msgs) == 1 and "570.133.20" in msgs[0] and "570.124.06" in msgs[0]
    assert fact_values(rep["facts"], "drivers.nvidia.version") == ["570.124.06"]


def test_xid_names_the_gpu_with_its_function(tmp_path):
    rep = check_json(_snapshot(tmp_path, dmesg="[ 3811.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"))
    assert "device-unresponsive" in finding_ids(rep)
    assert fact_values(rep["facts"], "accelerators.*.pci_address") == ["0000:3b:00.0"]


def test_nvml_mismatch_in_a_container_hook_log(tmp_path):
    log = "stderr: nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown\n"
    rep = check_json(_snapshot(tmp_path, logs={"compose.log": log}))
    assert "runtime-driver-mismatch" in finding_ids(rep)


def test_jetson_release_string_in_a_log_fills_l4t(tmp_path):
    log = "# R32 (release), REVISION: 6.1, GCID: 27863751, BOARD: t186ref, EABI: aarch64, DATE: Mon Jul 26 19:36:31 UTC 2021\n"
    rep = check_json(_snapshot(tmp_path, logs={"report.txt": log}))
    assert fact_values(rep["facts"], "sdks.l4t.version") == ["32.6.1"]
