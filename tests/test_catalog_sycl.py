"""SYCL device selection and the OpenVINO GPU plugin's device query (catalogs/opencl.toml,
unified-runtime.toml, openvino.toml). Real logs: tests/cases/j301-j304 (openvino #17290,
intel/llvm #6342, oneAPI-samples #1337, intel/llvm #17535); the sycl-ls selector lines are as
intel/llvm #13149 and PR #3386 print them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import check_json, make_snapshot

CASES = Path(__file__).resolve().parent / "cases"


def _init_failed(tmp_path: Path, text: str):
    snap = make_snapshot(tmp_path / "snap", logs={"app.log": text})
    return [f for f in check_json(snap)["findings"] if f["id"] == "runtime-init-failed"]


@pytest.mark.parametrize("line", [
    "  what():  No device of requested type available. -1 (PI_ERROR_DEVICE_NOT_FOUND)",
    "RuntimeError: No device of requested type available. Please check https://software.intel.com/"
    "content/www/us/en/develop/articles/intel-oneapi-dpcpp-system-requirements.html -1 "
    "(PI_ERROR_DEVICE_NOT_FOUND)",
    "  what():  No device of requested type available.",
    "default_selector()      : No device of requested type available",
])
def test_no_device_is_one_sycl_finding(tmp_path, line):
    got = _init_failed(tmp_path, line + "\n")
    assert [f["subject"] for f in got] == ["SYCL runtime"]


def test_pi_code_after_any_sycl_message_is_read(tmp_path):
    # "<message> <code> (<PI name>)": the code of the PI enum, whatever the message before it
    snap = make_snapshot(tmp_path / "snap", logs={"app.log": "Enqueue process failed. -5 (PI_ERROR_OUT_OF_RESOURCES)\n"})
    ids = {f["id"] for f in check_json(snap)["findings"]}
    assert "runtime-init-failed" not in ids


def test_sycl_ls_selectors_for_absent_kinds_are_not_findings(tmp_path):
    # sycl-ls --verbose on a machine with a GPU: the host, accelerator and cpu selectors find
    # nothing, which is what such a machine prints (the message cut at 50 characters)
    text = ("default_selector()      : GPU : Intel(R) OpenCL HD Graphics 3.0 [27.20.100.9030]\n"
            "host_selector()         : No device of requested type available. -1 (CL_DEVI...\n"
            "accelerator_selector()  : No device of requested type available. -1 (CL_DEVI...\n"
            "cpu_selector()          : No device of requested type available. -1 (CL_DEVI...\n"
            "gpu_selector()          : GPU : Intel(R) OpenCL HD Graphics 3.0 [27.20.100.9030]\n"
            "custom_selector(cpu)    : No device of requested type available. -1 (PI_ERRO...\n"
            "custom_selector(acc)    : No device of requested type available. -1 (PI_ERRO...\n")
    assert _init_failed(tmp_path, text) == []


def test_sycl_ls_no_platforms_and_default_selector_are_one_finding():
    rep = check_json(next(CASES.glob("j304-*")))
    got = [f for f in rep["findings"] if f["id"] == "runtime-init-failed"]
    assert len(got) == 1 and got[0]["subject"] == "SYCL runtime"


def test_gpu_plugin_no_supported_ocl_devices_alone(tmp_path):
    got = _init_failed(tmp_path, "[GPU] No supported OCL devices found or unexpected error happened "
                                 "during devices query.\n[GPU] Please check OpenVINO documentation for GPU "
                                 "drivers setup guide.\n")
    assert [f["subject"] for f in got] == ["OpenVINO GPU plugin"]
