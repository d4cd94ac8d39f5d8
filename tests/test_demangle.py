"""Qualified names of mangled C++ symbols, as the loader catalog shows them in an
"undefined symbol" finding (npu_doctor/linker/demangle.py). The symbols are from real reports."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_doctor.linker.demangle import demangle_name, symbol_namespace

CASES = Path(__file__).parent / "cases"


@pytest.mark.parametrize("symbol, name, ns", [
    # abetlen/llama-cpp-python#1688 (libstdc++ older than the build's)
    ("_ZNSt15__exception_ptr13exception_ptr9_M_addrefEv", "std::__exception_ptr::exception_ptr::_M_addref", "std"),
    ("_ZSt28__throw_bad_array_new_lengthv", "std::__throw_bad_array_new_length", "std"),
    # hailo-ai/hailo-rpi5-examples#193 (pyhailort 4.20 on libhailort 5.1)
    ("_ZN7hailort20ConfiguredInferModel20get_async_queue_sizeEv",
     "hailort::ConfiguredInferModel::get_async_queue_size", "hailort"),
    # torch_npu / torch pair (const member), CANN ATB template, OpenVINO, a destructor
    ("_ZNK3c1010TensorImpl20is_contiguous_customENS_12MemoryFormatE", "c10::TensorImpl::is_contiguous_custom", "c10"),
    ("_ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS_9OperationE", "atb::CreateOperation", "atb"),
    ("_ZN2ov3Any4Base9to_stringEv", "ov::Any::Base::to_string", "ov"),
    ("_ZN8nvinfer112IPluginV2ExtD2Ev", "nvinfer1::IPluginV2Ext::~IPluginV2Ext", "nvinfer1"),
    ("_ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb", "Mki::Dl::Dl", "Mki"),
    ("_ZTVNSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEEE", "vtable for std::__cxx11::basic_stringbuf", "std"),
    ("_Z3foov", "foo", None),
])
def test_demangles_the_name_part(symbol, name, ns):
    assert demangle_name(symbol) == name
    assert symbol_namespace(symbol) == ns


@pytest.mark.parametrize("symbol", ["cuGreenCtxStreamCreate", "ggml_backend_blas_reg", "_Z", "_ZN99x", ""])
def test_c_names_and_broken_manglings_are_not_names(symbol):
    assert demangle_name(symbol) is None
    assert symbol_namespace(symbol) is None


def test_the_captured_report_names_the_std_symbol_and_libstdcxx():
    case = next(CASES.glob("g506-*"))
    out = subprocess.run([sys.executable, "-m", "npu_doctor", "check", "--snapshot", str(case),
                          "--format", "json", "--fail-on", "never"],
                         capture_output=True, text=True, check=True).stdout
    messages = [f["message"] for f in json.loads(out)["findings"] if f["id"] == "symbol-version-unsatisfied"]
    assert any("std::__exception_ptr::exception_ptr::_M_addref" in m and "libstdc++" in m for m in messages), messages
