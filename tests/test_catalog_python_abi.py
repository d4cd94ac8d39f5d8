"""catalogs/python-abi.toml: NumPy C-API/ABI and protobuf generated-code checks that SDKs fail at
import time. Real logs: tests/cases/x201-x205 (onnxruntime #21063, rknn-toolkit2 #85,
onnxruntime4raspberrypi #1, openvino #16491, rknn-toolkit2 #292); the other lines are the
wordings of numpy's generate_numpy_api.py, Cython's ImportExport.c and protobuf's
descriptor.py / runtime_version.py / stubs/common.cc, as the cited reports print them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import check_json, make_snapshot

CASES = Path(__file__).resolve().parent / "cases"


def _findings(tmp_path: Path, text: str):
    snap = make_snapshot(tmp_path / "snap", logs={"app.log": text})
    return [f for f in check_json(snap)["findings"] if f["id"] == "toolkit-runtime-mismatch"]


@pytest.mark.parametrize("prefix,subject", [
    ("x201", "NumPy C-API"), ("x202", "NumPy C-API"), ("x203", "NumPy C-API"),
    ("x204", "protobuf generated code"), ("x205", "protobuf generated code")])
def test_one_finding_per_failure_whatever_the_number_of_lines(prefix, subject):
    rep = check_json(next(CASES.glob(prefix + "-*")))
    got = [f for f in rep["findings"] if f["id"] == "toolkit-runtime-mismatch"]
    assert [f["subject"] for f in got] == [subject]


def test_numpy_api_and_import_array_lines_are_one_finding(tmp_path):
    got = _findings(tmp_path, "RuntimeError: module compiled against API version 0x10 but this "
                              "version of numpy is 0xe\nImportError: numpy.core.multiarray failed to import\n")
    assert len(got) == 1 and "0x10" in got[0]["message"] and "0xe" in got[0]["message"]


def test_numpy2_c_api_wording(tmp_path):
    line = ("RuntimeError: module was compiled against NumPy C-API version 0x12 (NumPy 2.1) but the "
            "running NumPy has C-API version 0x11. Check the section C-API incompatibility at the "
            "Troubleshooting ImportError section at https://numpy.org/devdocs/user/troubleshooting-"
            "importerror.html#c-api-incompatibility for indications on how to solve this problem.\n")
    got = _findings(tmp_path, line)
    assert len(got) == 1 and "NumPy 2.1" in got[0]["message"]


def test_cython_size_error_raises_but_size_warning_does_not(tmp_path):
    err = "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject\n"
    assert len(_findings(tmp_path / "a", err)) == 1
    warn = "RuntimeWarning: numpy.ufunc size changed, may indicate binary incompatibility. Expected 192 from C header, got 216 from PyObject\n"
    assert _findings(tmp_path / "b", warn) == []


def test_protobuf_gencode_runtime_version_error(tmp_path):
    line = ("google.protobuf.runtime_version.VersionError: Detected incompatible Protobuf Gencode/Runtime "
            "versions when loading grpc_health/v1/health.proto: gencode 5.29.0 runtime 5.28.3. Runtime "
            "version cannot be older than the linked gencode version.\n")
    got = _findings(tmp_path, line)
    assert len(got) == 1 and "5.29.0" in got[0]["message"] and "5.28.3" in got[0]["message"]


def test_protobuf_cpp_version_verification(tmp_path):
    line = ("[libprotobuf FATAL google/protobuf/stubs/common.cc:61] This program requires version 3.7.0 "
            "of the Protocol Buffer runtime library, but the installed version is 2.6.1.  Please update "
            "your library.\n")
    got = _findings(tmp_path, line)
    assert len(got) == 1 and "3.7.0" in got[0]["message"] and "2.6.1" in got[0]["message"]


def test_unrelated_numpy_and_protobuf_lines_do_not_match(tmp_path):
    # (`no attribute 'float'` is NumPy 1.24's removed alias: an entry of its own since hunt p3)
    text = ("numpy 2.0.0 installed\nprotobuf 3.20.3 is required by rknn-toolkit2\n"
            "AttributeError: module 'numpy' has no attribute 'frobnicate'\n")
    assert _findings(tmp_path, text) == []


def test_pip_conflict_for_an_sdk_pin_is_a_warning_and_other_packages_are_not(tmp_path):
    # lines in pip's format (install.py, _warn_about_conflicts) with rknn-toolkit2 2.3.2's stated
    # protobuf pin (airockchip/rknn-toolkit2 #292); a package outside the accelerator stacks
    # (tf2onnx, whose name ends in 'onnx') raises nothing
    text = ("ERROR: pip's dependency resolver does not currently take into account all the packages "
            "that are installed. This behaviour is the source of the following dependency conflicts.\n"
            "rknn-toolkit2 2.3.2 requires protobuf<=4.25.4,>=4.21.6, but you have protobuf 3.20.3 which is incompatible.\n"
            "tf2onnx 1.9.3 requires protobuf~=3.20, but you have protobuf 4.1.0 which is incompatible.\n")
    got = _findings(tmp_path, text)
    assert [(f["subject"], f["severity"]) for f in got] == [("rknn-toolkit2 2.3.2", "warning")]
    assert "protobuf<=4.25.4,>=4.21.6" in got[0]["message"]
