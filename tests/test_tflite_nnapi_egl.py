"""TFLite delegate and MediaPipe GPU lines of the g3 cases: NNAPI result codes (catalog nnapi),
EGL set-up failures of the GPU delegate and of MediaPipe (catalogs tflite, mediapipe, egl), the
OpenCL ICD retry that is no missing library, XNNPACK (the CPU delegate) failing to apply, and the
TFLite 2.0-2.3 'Restored previous execution plan' wording."""

from __future__ import annotations

import re

from npu_doctor.catalog import load_catalogs
from npu_doctor.parsers.fallback.tflite import parse_tflite

from test_fallback_delegates import agg_of, case_log

CATALOGS = load_catalogs()
_NNAPI_H = re.compile(r"ANEURALNETWORKS_[A-Z_]+")


def rules(line: str):
    return sorted({e.rule for e, _ in CATALOGS.match_line(line, ("runtime",)) if e.rule})


def test_every_nnapi_result_code_has_an_entry():
    nnapi = next(c for c in CATALOGS.catalogs if c.id == "nnapi")
    assert sorted(int(e.code) for e in nnapi.entries if e.code is not None) == list(range(15))
    assert all(_NNAPI_H.fullmatch(e.mnemonic) for e in nnapi.entries if e.code is not None)


def test_nnapi_delegate_wordings_across_releases():
    # TFLite >= 2.2 (name, line, call), < 2.2 (number), ONNX Runtime's NNAPI EP (ResultCode)
    for line in ("ERROR: NN API returned error ANEURALNETWORKS_OP_FAILED at line 3622 while "
                 "completing NNAPI compilation.",
                 "NN API returned error (4, line 1068).",
                 "model_builder.cc:457 AddOperandFromPersistMemoryBuffer ResultCode: "
                 "ANEURALNETWORKS_BAD_DATA"):
        assert rules(line) == ["runtime-init-failed"], line
    assert rules("NN API returned error ANEURALNETWORKS_DEAD_OBJECT at line 4921 while running "
                 "computation.") == ["device-unresponsive"]
    # a program error of the caller, and operand type names, raise nothing
    assert rules("NN API returned error ANEURALNETWORKS_BAD_STATE at line 4921 while running "
                 "computation.") == []
    assert rules("ANEURALNETWORKS_TENSOR_FLOAT32 ANEURALNETWORKS_FUSED_RELU") == []


def test_legacy_nnapi_path_has_no_cpu_fallback():
    assert rules("E/tflite: Op code 67 is currently not delegated to NNAPI") == ["runtime-init-failed"]
    assert rules("Failed to build graph for NNAPI") == []


def test_gpu_delegate_egl_failure_and_opencl_icd_retry():
    assert rules("TfLiteGpuDelegate Init: No EGL error, but eglChooseConfig failed.") == \
        ["runtime-init-failed"]
    # the dlopen that the delegate retries through the ICD loader is no missing library ...
    for line in ('I  Failed to load OpenCL library with dlopen: dlopen failed: library '
                 '"libvndksupport.so" not found. Trying ICD loader.',
                 "INFO: Failed to load OpenCL library with dlopen: libOpenCL.so: cannot open "
                 "shared object file: No such file or directory. Trying ICD loader."):
        assert rules(line) == [], line
    # ... the final failure is
    assert rules('Can not open OpenCL library on this device - dlopen failed: library '
                 '"libOpenCL.so" not found') == ["missing-shared-library"]


def test_xnnpack_failing_to_apply_is_no_accelerator_fallback():
    assert rules("Failed to apply XNNPACK delegate.") == []
    assert rules("Failed to apply NNAPI delegate.") == ["cpu-fallback-logged"]


def test_mediapipe_es3_attempt_is_benign_the_es2_one_final():
    assert rules("W1212 16:27:44.518121 11397 gl_context_egl.cc:163] Creating a context with OpenGL "
                 "ES 3 failed: Unknown: ; eglChooseConfig() returned no matching EGL configuration "
                 "for RGBA8888 D16 ES3 request.") == []
    assert rules("Failed to run the graph: ; eglChooseConfig() returned no matching EGL "
                 "configuration for RGBA8888 D16 ES2 request.") == ["runtime-init-failed"]
    assert rules("GPU suport is not available: INTERNAL: ; RET_CHECK failure (mediapipe/gpu/"
                 "gl_context_egl.cc:77) display != EGL_NO_DISPLAYeglGetDisplay() returned error "
                 "0x300c") == ["runtime-init-failed"]


def test_restored_previous_plan_is_the_whole_graph_on_the_cpu():
    got = agg_of(case_log("g305"))                      # tensorflow/tensorflow#43793
    assert (got["count"], got["lines"]) == (None, [7])
    entries = parse_tflite("Restored previous execution plan after delegate application failure.")
    assert [(e["kind"], e["count"]) for e in entries] == [("total", None)]


def test_benchmark_delegate_not_executed_is_the_whole_graph_on_the_cpu():
    got = agg_of(case_log("g312"))                      # tensorflow/tensorflow#56301
    assert (got["count"], got["lines"]) == (None, [14])
    # QNN external delegate took 0 of 31 nodes, then the statement: 31 nodes, counted once
    text = ("INFO: TfLiteQnnDelegate delegate: 0 nodes delegated out of 31 nodes with 0 partitions.\n"
            "\n"
            "INFO: Though EXTERNAL delegate is explicitly applied, the model graph will not be "
            "executed by the delegate.\n")
    assert agg_of(text)["count"] == 31
    # two delegates one after another: the GPU took everything, NNAPI nothing -- no fallback
    text = ("VERBOSE: Replacing 49 out of 49 node(s) with delegate (TfLiteGpuDelegateV2) node, "
            "yielding 1 partitions for subgraph 0.\n"
            "INFO: Explicitly applied GPU delegate, and the model graph will be completely executed "
            "by the delegate.\n"
            "INFO: Though NNAPI delegate is explicitly applied, the model graph will not be executed "
            "by the delegate.\n")
    assert parse_tflite(text) == []


def test_external_delegate_load_failures():
    assert rules("INFO: Unable to load external delegate from : /data/local/tmp/libvx_delegate.so") \
        == ["missing-shared-library"]
    assert rules("ValueError: Failed to load delegate from /usr/lib/libvx_delegate.so") == \
        ["runtime-init-failed"]
    # libedgetpu's own entry (catalog edgetpu) speaks for it, once
    hits = CATALOGS.match_line("ValueError: Failed to load delegate from libedgetpu.so.1", ("runtime",))
    assert [e.catalog for e, _ in hits] == ["edgetpu"]


def test_no_opencl_is_cleared_when_the_opengl_backend_starts():
    """'Can not open OpenCL library on this device' is the GPU delegate's own verdict (the
    generic loader signature and the bionic entry leave it to the tflite catalog): a missing
    library while the OpenGL ES backend does not start (tensorflow#60720), nothing once it
    does (Jetson: L4T has no OpenCL, terryky/tflite_gles_app#10)."""
    from npu_doctor import registry
    from npu_doctor.probes import load_signatures

    registry.load_all()
    sig = next(s for s in load_signatures() if s.id == "shared-library-not-found")
    opencl = "ERROR: Can not open OpenCL library on this device - libOpenCL.so: cannot open shared object file: No such file or directory"
    assert not sig.regex.search(opencl)
    assert sig.regex.search("python3: error while loading shared libraries: librknnrt.so: cannot open shared object file: No such file or directory").group("library") == "librknnrt.so"
    assert rules('dlopen failed: library "librknnrt.so" not found') == ["missing-shared-library"]
    android = ('Internal error: Failed to apply delegate: Can not open OpenCL library on this device - '
               'dlopen failed: library "libOpenCL.so" not found Falling back to OpenGL')
    for line in (opencl, android, "Can not open OpenCL library on this device, error code - 126"):
        got = CATALOGS.match_line(line, ("runtime",))
        assert [(e.key, e.rule) for e, _ in got] == [("gpu-opencl-unavailable", "missing-shared-library")], line
    (_entry, groups), = CATALOGS.match_line(android, ("runtime",))
    assert groups["error"] == 'dlopen failed: library "libOpenCL.so" not found'

    def raised(text):
        evs = CATALOGS.match_text(text, "app.log", ("runtime",), "runtime")
        return [(ev["entry"], ev.get("rule")) for ev in evs if ev.get("rule")]

    assert raised(opencl + "\nERROR: Falling back to OpenGL\n") == [("gpu-opencl-unavailable", "missing-shared-library")]
    assert raised(opencl + "\nERROR: Falling back to OpenGL\nINFO: Initialized OpenGL-based API.\n"
                  "INFO: Created 1 GPU delegate kernels.\n") == []
