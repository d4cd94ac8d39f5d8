"""CPU fallback round 2 (hunt s2): ONNX Runtime's CPU-preferred nodes, the QNN EP's node
validation statements, and torch-xpu-ops' fallback warnings, in every wording of their
sources (examples verbatim from the reports in tests/cases/s2*, the others built from the
source lines quoted in the parsers)."""

from __future__ import annotations

from npu_doctor.parsers.fallback import aggregate, parse_fallback_logs, parse_onnxruntime, parse_torch_npu

FORCE_16 = ("2020-12-29 15:11:18.090974433 [W:onnxruntime:Default, fallback_cpu_capability.cc:135 "
            "GetCpuPreferredNodes] Force fallback to CPU execution for node: Squeeze_1145")
FORCE_17 = ("2021-03-19 22:33:08.805984358 [W:onnxruntime:Default, fallback_cpu_capability.h:140 "
            "GetCpuPreferedNodes] Force fallback to CPU execution for node: Gather_17")
FORCE_19 = ("2021-11-30 06:04:13.264339107 [I:onnxruntime:log, fallback_cpu_capability.cc:135 "
            "GetCpuPreferredNodes] ORT optimization- Force fallback to CPU execution for node: "
            "Slice_150 because the CPU execution path is deemed faster than overhead involved with "
            "execution on other EPs  capable of executing this node")


def _agg(entries):
    return aggregate(entries)


def test_cpu_preferred_nodes_are_not_counted_in_any_wording():
    # ORT's deliberate shape-node placement (catalogs/onnxruntime.toml cpu-preferred-node)
    es = parse_fallback_logs("\n".join([FORCE_16, FORCE_17, FORCE_19]))
    assert [e for e in es if e["kind"] in ("op", "total")] == []


def test_cpu_preferred_node_beside_a_placement_dump_counts_once():
    text = "\n".join([
        "[I:onnxruntime:, fallback_cpu_capability.cc:140 GetCpuPreferredNodes] ORT optimization- "
        "Force fallback to CPU execution for node: node_Concat_43 because the CPU execution path "
        "is deemed faster than overhead involved with execution on other EPs  capable of executing "
        "this node",
        "[V:onnxruntime:, session_state.cc:1151 VerifyEachNodeIsAssignedToAnEp] Node placements",
        "[V:onnxruntime:, session_state.cc:1154 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on "
        "[CPUExecutionProvider]. Number of nodes: 1",
        "[V:onnxruntime:, session_state.cc:1156 VerifyEachNodeIsAssignedToAnEp]   Concat (node_Concat_43)"])
    agg = _agg(parse_onnxruntime(text))
    assert agg["count"] == 1 and agg["ops"] == ["Concat"]


QNN_BLOCK_118 = """Validation FAILED for nodes (NodeUnit):
\t\tOperator type: DequantizeLinear Node name: a/Maximum:0_DequantizeLinear Node index: 523
\t\tOperator type: Sqrt Node name: a/Rsqrt Node index: 525
\t\tOperator type: QuantizeLinear Node name: a/Rsqrt:0_QuantizeLinear Node index: 527
\t\tREASON : base_op_builder.cc:162 onnxruntime::qnn::BaseOpBuilder::ProcessOutputs Failed to add node.
"""


def test_qnn_validation_block_118_names_every_node_of_the_unit():
    es = parse_onnxruntime(QNN_BLOCK_118)
    assert [e["op"] for e in es] == ["DequantizeLinear", "Sqrt", "QuantizeLinear"]
    assert {e["runtime"] for e in es} == {"qnn"}
    assert "Failed to add node" in es[0]["reason"]


def test_qnn_validation_block_121_wording_with_prefix_and_passed_blocks_ignored():
    text = "\n".join([
        "2025-03-01 10:00:00.1 [I:onnxruntime:, qnn_execution_provider.cc:432 LogNodeSupport] "
        "Validation PASSED for 1 nodes in NodeUnit (Conv) :",
        "\tOperator type: Conv Node name: conv_1 Node index: 3",
        "2025-03-01 10:00:00.2 [I:onnxruntime:, qnn_execution_provider.cc:432 LogNodeSupport] "
        "Validation FAILED for 1 nodes in NodeUnit (BatchNormalization) :",
        "\tOperator type: BatchNormalization Node name: bn_7 Node index: 939",
        "\tREASON : QNN BatchNorm doesn't support dynamic scale.",
        "2025-03-01 10:00:00.3 [I:onnxruntime:, qnn_execution_provider.cc:512 GetCapability] done"])
    es = parse_onnxruntime(text)
    assert [(e["op"], e["node"]) for e in es] == [("BatchNormalization", "bn_7")]


def test_qnn_node_supported_0_wording_of_115_to_117():
    text = ("[V:onnxruntime:, qnn_execution_provider.cc:250 IsNodeSupported] Node supported: [0] "
            "index: [12] name: [Sqrt_12] Operator type: [Sqrt] as part of the NodeUnit type: [Sqrt] "
            "index: [12] name: [Sqrt_12]\n"
            "[V:onnxruntime:, qnn_execution_provider.cc:250 IsNodeSupported] Node supported: [1] "
            "index: [13] name: [Conv_13] Operator type: [Conv] as part of the NodeUnit type: [Conv]")
    es = parse_onnxruntime(text)
    assert [e["op"] for e in es] == ["Sqrt"]


BACKEND = ("2024-10-22 10:41:29.6876170 [W:onnxruntime:, qnn_model_wrapper.cc:244 "
           "onnxruntime::qnn::QnnModelWrapper::CreateQnnNode] QNN.backendValidateOpConfig() failed "
           "for node `{}` of type `{}` with error code 3110")


def test_qnn_backend_validation_counts_nodes_and_keeps_the_code():
    text = "\n\n".join([BACKEND.format("c4", "Concat"), BACKEND.format("g", "Gather"),
                        BACKEND.format("c4", "Concat")])
    es = parse_onnxruntime(text)
    assert [e["op"] for e in es] == ["Concat", "Gather"]
    assert "3110" in es[0]["reason"]
    old = "[W:onnxruntime:, qnn_model_wrapper.cc:102 CreateQnnNode] Validating node failed for: Conv_3"
    es = parse_onnxruntime(old)
    assert len(es) == 1 and es[0]["node"] == "Conv_3" and es[0]["count"] == 1


def test_qnn_only_the_best_statement_kind_counts():
    # the backend's QNN-level rejections and the EP's ONNX-level block of the same session
    text = BACKEND.format("a/Rsqrt", "ElementWiseSquareRoot") + "\n" + QNN_BLOCK_118
    agg = _agg(parse_onnxruntime(text))
    assert agg["ops"] == ["DequantizeLinear", "Sqrt", "QuantizeLinear"] and agg["count"] == 3


XPU_USER = ("/workspace/myvenv/lib/python3.10/site-packages/torch/utils/_device.py:122: UserWarning: "
            "Aten Op fallback from XPU to CPU happends. This may have performance implications. If need "
            "debug the fallback ops please set environment variable `PYTORCH_DEBUG_XPU_FALLBACK=1`  "
            "(Triggered internall\ny at /__w/pytorch/pytorch/third_party/torch-xpu-ops/src/ATen/native/"
            "xpu/XPUFallback.cpp:58.)")
XPU_CPP = ("[rank0]:[W128 09:40:21.158240118 RegisterXPU.cpp:45778] Warning: Aten Op fallback from XPU "
           "to CPU happens. This may have performance implications. (function operator())")


def test_xpu_unnamed_warning_once_per_log_and_not_counted():
    es = parse_torch_npu(XPU_USER + "\n" + XPU_CPP)
    assert len(es) == 1 and es[0]["op"] is None and es[0]["count"] is None
    assert es[0]["runtime"] == "torch" and es[0]["backend"] == "XPU" and es[0]["unnamed"]


def test_xpu_debug_wordings_name_the_operator():
    text = "\n".join([
        "UserWarning: The operator 'aten::linalg_cholesky_ex.L on the XPU backend is falling back "
        "to run on the CPU. (Triggered internally at XPUFallback.cpp:49.)",
        "[W XPUFallback.cpp:31] Warning: The operator 'aten::_linalg_svd.Uon the XPU backend and "
        "will fall back to run on the CPU. (function xpu_fallback)"])
    es = parse_torch_npu(text)
    assert [(e["op"], e["backend"]) for e in es] == [("aten::linalg_cholesky_ex.L", "XPU"),
                                                     ("aten::_linalg_svd.U", "XPU")]


def test_mps_wording_still_reads():
    line = ("UserWarning: The operator 'aten::sgn.out' is not currently supported on the MPS backend "
            "and will fall back to run on the CPU. This may have performance implications.")
    es = parse_fallback_logs(line)
    assert [(e["runtime"], e["op"]) for e in es] == [("torch", "aten::sgn.out")]


MPS_NATIVE = [
    ("/opt/anaconda3/envs/andrej_gpt2/lib/python3.10/site-packages/torch/_tensor_str.py:138: "
     "UserWarning: MPS: nonzero op is supported natively starting from macOS 13.0. Falling back on "
     "CPU. This may have performance implications. (Triggered internally at /Users/runner/work/"
     "pytorch/pytorch/pytorch/aten/src/ATen/native/mps/operations/Indexing.mm:335.)", "nonzero"),
    ("UserWarning: MPS: pixel_shuffle op is supported starting from macOS 13.0. Falling back on CPU. "
     "This may have performance implications.", "pixel_shuffle"),
    ("UserWarning: MPS: nonzero op is not natively supported for the provided input on MacOS14Falling "
     "back on CPU. This may have performance implications.See github.com/pytorch/pytorch/issues/"
     "122916 for further info", "nonzero"),   # "MacOS14Falling": run together in the source
    ("UserWarning: MPS: passing scale factor to upsample ops is supported natively starting from "
     "macOS 13.0. Falling back on CPU. This may have performance implications.", "upsample"),
    ("UserWarning: MPS: passing divisor to Average Pooling op with int64 input is not supported on "
     "MPS backend. Falling back on CPU. This may have performance implications.", "Average Pooling"),
    ("UserWarning: MPS: FFT operations are only supported natively starting from macOS 14.0. "
     "Falling back on CPU. This may have performance implications.", "FFT"),
    ("UserWarning: MPS: grid_sampler_2d op is supported natively starting from macOS 13.2. Falling "
     "back on CPU. This may have performance implications.", "grid_sampler_2d"),
]


def test_mps_native_fallback_every_wording():
    for line, op in MPS_NATIVE:
        es = parse_fallback_logs(line)
        assert [(e["runtime"], e["op"], e["backend"]) for e in es] == [("torch", op, "MPS")], line


def test_mps_native_fallback_needs_the_mps_prefix():
    for line in ["[codecarbon WARNING @ 13:28:13] No CPU tracking mode found. Falling back on CPU "
                 "constant mode.", "GPU not available. Falling back on CPU"]:
        assert parse_fallback_logs(line) == []
