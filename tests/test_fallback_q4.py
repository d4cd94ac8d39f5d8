"""CPU fallback round q4: OpenCV DNN's backend/target fallbacks (catalogs/opencv-dnn.toml and the
initCUDABackend per-layer parser), MNN's unregistered backends (catalogs/mnn.toml), whisper.cpp's GPU backend lines (catalogs/whisper-cpp.toml),
CTranslate2's CPU-only build (catalogs/ctranslate2.toml) and ggml's invalid CUDA device. Lines are
verbatim from the reports in tests/cases/q4* and the issues named beside them."""

from __future__ import annotations

import pytest

from npu_doctor.catalog import load_catalogs
from npu_doctor.parsers.fallback import aggregate, parse_fallback_logs
from npu_doctor.parsers.fallback.opencv import parse_opencv_dnn

CATALOGS = load_catalogs()


def _rules(line):
    return {(e.catalog, e.rule) for e, _ in CATALOGS.match_line(line, ("runtime",)) if e.rule}


def _benign(line):
    hits = list(CATALOGS.match_line(line, ("runtime",)))
    return bool(hits) and not any(e.rule for e, _ in hits)


@pytest.mark.parametrize("line,catalog,rule", [
    # setUpNet, every log format: dnn.cpp (4.2-4.5), net_impl.cpp (4.6+), with and without scope
    ("dnn.cpp (1314) cv::dnn::dnn4_v20191024::Net::Impl::setUpNet DNN module was not built with CUDA backend; switching to CPU",
     "opencv-dnn", "framework-backend-mismatch"),
    ("[ WARN:0] global /tmp/pip-req-build-sw_3pm_8/opencv/modules/dnn/src/dnn.cpp (1429) setUpNet DNN module was not built with CUDA backend; switching to CPU",
     "opencv-dnn", "framework-backend-mismatch"),
    ("[ WARN:0@72.901] global /io/opencv/modules/dnn/src/net_impl.cpp (179) setUpNet DNN module was not built with CUDA backend; switching to CPU",
     "opencv-dnn", "framework-backend-mismatch"),
    ("[ WARN:0@9.371] global net_impl.cpp:178 setUpNet DNN module was not built with CUDA backend; switching to CPU",
     "opencv-dnn", "framework-backend-mismatch"),
    # ai-aimbot/AIMr#8 pastes it without the space after the semicolon
    ("global net_impl.cpp:174 cv::dnn::dnn4_v20221220::Net::Impl::setUpNet DNN module was not built with CUDA backend;switching to CPU",
     "opencv-dnn", "framework-backend-mismatch"),
    ("unable to use CUDA backend; switching to CPU", "opencv-dnn", "cpu-fallback-logged"),
    ("DNN: OpenCL target is not available in this OpenCV build, switching to CPU.", "opencv-dnn", "framework-backend-mismatch"),
    ("[ WARN:1] DNN: OpenCL target is not supported with current OpenCL device (tested with Intel GPUs only), switching to CPU.",
     "opencv-dnn", "cpu-fallback-logged"),
    ("DNN: OpenCL target is not supported with current OpenCL device (tested with GPUs only), switching to CPU.",
     "opencv-dnn", "cpu-fallback-logged"),
    ("[ INFO:0@1.339] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer \"onnx_node!Mul_614\" of type Gelu",
     "opencv-dnn", "cpu-fallback-logged"),
    ("whisper_backend_init_gpu: no GPU found", "whisper-cpp", "cpu-fallback-logged"),
    ("whisper_backend_init_gpu: failed to initialize Metal backend", "whisper-cpp", "runtime-init-failed"),
    ("whisper_backend_init: ggml_backend_cuda_init() failed", "whisper-cpp", "runtime-init-failed"),
    ("ggml_backend_cuda_init: invalid device 0", "llama-cpp", "runtime-init-failed"),
    ("ValueError: This CTranslate2 package was not compiled with CUDA support", "ctranslate2", "framework-backend-mismatch"),
    # MNN Schedule::getApprociateType, plain (alibaba/MNN#1510), logcat brief (#2229) and threadtime (#3685)
    ("Can't Find type=3 backend, use 0 instead", "mnn", "cpu-fallback-logged"),
    ("I/MNNJNI: Can't Find type=3 backend, use 0 instead", "mnn", "cpu-fallback-logged"),
    ("06-10 07:19:06.286 11421 11457 I MNNJNI  : Can't Find type=5 backend, use 0 instead", "mnn", "cpu-fallback-logged"),
    ("type=3 backend don't Support Low Power, use 0 instead", "mnn", "cpu-fallback-logged"),
    # ollama's Linux installer, both wordings
    ("WARNING: No NVIDIA/AMD GPU detected. Ollama will run in CPU-only mode.", "ollama", "cpu-fallback-logged"),
    ("WARNING: No NVIDIA GPU detected. Ollama will run in CPU-only mode.", "ollama", "cpu-fallback-logged"),
    ("2025-11-01 22:03:00.781 | ERROR    | open_webui.routers.audio:transcription:1002 - 500: Error transcribing chunk: This CTranslate2 package was not compiled with CUDA support",
     "ctranslate2", "framework-backend-mismatch"),
])
def test_fallback_lines_raise(line, catalog, rule):
    assert (catalog, rule) in _rules(line)


@pytest.mark.parametrize("line", [
    # the input layer is listed for every net (opencv/opencv#21583)
    "[ INFO:0@2.122] global A:\\Depend\\opencv\\sources\\modules\\dnn\\src\\dnn.cpp (2757) cv::dnn::dnn4_v20211220::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer \"_input\" of type __NetInputLayer__",
    "The selected CUDA device does not support FP16 target; switching to FP32 target.",
    # MNN with a non-CPU backup type: still on an accelerator backend
    "Can't Find type=5 backend, use 3 instead",
    "DNN: OpenCL target with fp16 precision is not supported with current OpenCL device (tested with Intel GPUs only), switching to OpenCL with fp32 precision.",
])
def test_still_on_the_accelerator_is_benign(line):
    assert _benign(line)


@pytest.mark.parametrize("line", [
    # the GPU backend in use: nothing to report (pywhispercpp#123, whisper.cpp#89)
    "whisper_backend_init_gpu: using CUDA0 backend",
    "whisper_backend_init_gpu: using Vulkan0 backend",
    "whisper_init_with_params_no_state: use gpu    = 1",
    "[ INFO:0] Initialize OpenCL runtime...",
])
def test_gpu_in_use_lines_match_nothing(line):
    assert not _rules(line)


LAYERS = """\
[ INFO:0@2.122] global A:\\Depend\\opencv\\sources\\modules\\dnn\\src\\dnn.cpp (2757) cv::dnn::dnn4_v20211220::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer "_input" of type __NetInputLayer__

[ INFO:0@1.338] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer "onnx_node!ReduceMean_390" of type Reduce

[ INFO:0@1.338] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer "onnx_node!Sub_421" of type NaryEltwise

[ INFO:0@1.338] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer "onnx_node!Mul_440" of type Gelu
[ INFO:0@1.338] global op_cuda.cpp:80 cv::dnn::dnn4_v20230620::Net::Impl::initCUDABackend CUDA backend will fallback to the CPU implementation for the layer "onnx_node!ReduceMean_390" of type Reduce
"""


def test_opencv_layers_counted_once_input_layer_excluded():
    entries = parse_opencv_dnn(LAYERS)
    assert [(e["op"], e["node"]) for e in entries] == [
        ("Reduce", "onnx_node!ReduceMean_390"), ("NaryEltwise", "onnx_node!Sub_421"), ("Gelu", "onnx_node!Mul_440")]
    assert all(e["runtime"] == "opencv_dnn" and e["target"] == "CPU" for e in entries)
    agg = aggregate(entries)
    assert agg["ops"] == ["Reduce", "NaryEltwise", "Gelu"] and agg["count"] == 3


def test_opencv_parser_runs_from_the_shared_entry_point():
    assert [e["op"] for e in parse_fallback_logs(LAYERS) if e["runtime"] == "opencv_dnn"] == ["Reduce", "NaryEltwise", "Gelu"]
    only_input = LAYERS.splitlines()[0] + "\n"
    assert parse_opencv_dnn(only_input) == []
