"""TFLite delegate, TensorRT DLA, RKNN compiler and ONNX Runtime EP-summary fallback statements,
on the real logs of tests/cases/w* and on verbatim lines from public reports (source per test)."""

from __future__ import annotations

from pathlib import Path

from npu_doctor.collectors.fallback import build_records
from npu_doctor.parsers.fallback import aggregate, parse_fallback_logs
from npu_doctor.parsers.fallback.onnxruntime import parse_onnxruntime
from npu_doctor.parsers.fallback.rknn import parse_rknn
from npu_doctor.parsers.fallback.tensorrt import parse_tensorrt_dla
from npu_doctor.parsers.fallback.tflite import parse_tflite

CASES = Path(__file__).parent / "cases"


def case_log(case: str) -> str:
    logs = sorted((next(CASES.glob(case + "-*")) / "logs").iterdir())
    return logs[0].read_text()


def agg_of(text: str):
    return aggregate(parse_fallback_logs(text))


# -- TFLite GPU delegate ------------------------------------------------------------------------
def test_gpu_delegate_2020_wording_total_wins_and_types_are_named():
    got = agg_of(case_log("w01"))                       # tensorflow/tensorflow#57907
    assert got["count"] == 200
    assert got["ops"][:3] == ["ARG_MAX", "CAST", "CONCATENATION"] and "UNPACK" in got["ops"]


def test_gpu_delegate_2019_wording_inside_a_java_exception():
    got = agg_of(case_log("w02"))                       # tensorflow/tensorflow#35378
    assert (got["ops"], got["count"]) == (["MAXIMUM", "RESIZE_NEAREST_NEIGHBOR"], 249)


def test_gpu_delegate_no_operations_on_the_gpu():
    got = agg_of(case_log("w03"))                       # tensorflow/tensorflow#49160
    assert got["count"] == 31 and got["ops"][0] == "AVERAGE_POOL_2D"


def test_gpu_delegate_other_prefixes_and_first_gl_wording():
    # Unity plugin prefix (tensorflow/tensorflow#58660) and MediaPipe's 2019 GL delegate
    # (mediapipe face-embeddings tutorial), a logcat-prefixed total (#56301)
    unity = ("TFLite Warning: Following operations are not supported by GPU delegate:\n"
             "ARG_MAX: Operation is not supported.\n"
             "GATHER_ND: Operation is not supported.\n"
             "97 operations will run on the GPU, and the remaining 200 operations will run on "
             "the CPU.\nUnityEngine.Debug:LogWarning (object)\n")
    assert (agg_of(unity)["ops"], agg_of(unity)["count"]) == (["ARG_MAX", "GATHER_ND"], 200)
    mp = ("ERROR: Next operations are not supported by GPU delegate:\n"
          "MAXIMUM: Operation is not supported.\nMEAN: Operation is not supported.\n"
          "First 0 operations will run on the GPU, and the remaining 81 on the CPU.\n")
    assert agg_of(mp)["count"] == 81
    gl = ("WARNING: 25 cannot be handled by this delegate.  Only the first 30 ops will run on "
          "the GPU, and the remaining 1 on the CPU")
    assert agg_of(gl)["count"] == 1


def test_gpu_delegate_taking_everything_is_not_fallback():
    assert parse_tflite("INFO: Created TensorFlow Lite delegate for GPU.\n"
                        "INFO: Created 1 GPU delegate kernels.\n") == []


# -- NNAPI, Arm NN, interpreter summary ---------------------------------------------------------
def test_nnapi_refusals_name_each_type_once_without_a_count():
    es = parse_tflite(case_log("w08"))                  # tensorflow/tensorflow#47905
    assert [e["op"] for e in es] == ["FAKE_QUANT", "QUANTIZE", "DEQUANTIZE"]
    assert all(e["count"] is None for e in es)
    rec = build_records("logs/t.log", es)[0]
    assert "count" not in rec and "not how many nodes" in rec["summary"]
    assert "×0" not in rec["summary"]


def test_armnn_both_wordings_are_operator_types():
    es = parse_tflite(case_log("w09"))                  # ARM-software/armnn#719
    assert [e["op"] for e in es] == ["DEQUANTIZE", "DEPTHWISE_CONV2D"]
    # armnn#740: the bracketed number is the BuiltinOperator code (69 = TILE), not a node
    es = parse_tflite("INFO: TfLiteArmnnDelegate: Created TfLite ArmNN delegate.\n"
                      "ERROR: Operator TILE [69] is not supported by armnn_delegate.\n"
                      "Info: ArmnnSubgraph creation\n")
    assert [(e["runtime"], e["op"], e["count"]) for e in es] == [("armnn", "TILE", None)]


def test_replacing_n_out_of_m_counts_what_the_accelerator_left():
    # a MediaTek MT6899 NNAPI run: NNAPI takes 5 of 64, XNNPACK (the CPU) most of the rest
    mt = ("VERBOSE: Replacing 5 out of 64 node(s) with delegate (TfLiteNnapiDelegate) node, "
          "yielding 5 partitions for the whole graph.\n"
          "VERBOSE: Replacing 59 out of 62 node(s) with delegate (TfLiteXNNPackDelegate) node, "
          "yielding 5 partitions for the whole graph.\n")
    es = parse_tflite(mt)
    assert [(e["kind"], e["count"], e["delegate"]) for e in es] == \
        [("total", 59, "TfLiteNnapiDelegate")]
    logcat = ("05:58:19.796 tflite                  com.example.yolo26localposeanalyzer  I  "
              "Replacing 29 out of 482 node(s) with delegate (TfLiteNnapiDelegate) node, "
              "yielding 7 partitions for the whole graph.")
    assert agg_of(logcat)["count"] == 453
    full = ("VERBOSE: Replacing 31 out of 31 node(s) with delegate (TfLiteNnapiDelegate) node, "
            "yielding 1 partitions for the whole graph.")
    old = "INFO: Replacing 5 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 1 partitions."
    assert parse_tflite(full) == [] and parse_tflite(old) == []


def test_gpu_block_and_partition_summary_of_one_session_count_once():
    both = ("INFO: Replacing 97 out of 297 node(s) with delegate (TfLiteGpuDelegateV2) node, "
            "yielding 4 partitions for the whole graph.\n" + case_log("w01"))
    assert agg_of(both)["count"] == 200


# -- TensorRT DLA -------------------------------------------------------------------------------
def test_dla_old_wording_counts_layers_without_types():
    es = parse_tensorrt_dla(case_log("w04"))            # DeepStream-Yolo#27
    assert [e["node"] for e in es] == ["leaky_1", "leaky_2", "leaky_3", "route_3",
                                       "(Unnamed Layer* 10) [Slice]", "leaky_5"]
    rec = build_records("logs/ds.log", es)[0]
    assert rec["count"] == 6 and "on the GPU instead of the DLA" in rec["summary"]


def test_dla_new_wording_types_and_names():
    got = aggregate(parse_tensorrt_dla(case_log("w05")))  # jetson_dla_tutorial#3
    assert got["op_counts"] == {"CONSTANT": 5, "SHUFFLE": 4} and got["count"] == 9


DLA_SUMMARY = """\
[02/19/2022-05:35:26] [I] [TRT] ---------- Layers Running on DLA ----------
[02/19/2022-05:35:26] [I] [TRT] [DlaLayer] {ForeignNode[conv1_1...pool5]}
[02/19/2022-05:35:26] [I] [TRT] [DlaLayer] {ForeignNode[relu6...fc8]}
[02/19/2022-05:35:26] [I] [TRT] ---------- Layers Running on GPU ----------
[02/19/2022-05:35:26] [I] [TRT] [GpuLayer] SHUFFLE: shuffle_between_pool5_and_fc6
[02/19/2022-05:35:26] [I] [TRT] [GpuLayer] CONVOLUTION: fc6
[02/19/2022-05:35:26] [I] [TRT] [GpuLayer] SOFTMAX: prob
avgRuns=1
"""

GPU_ONLY_SUMMARY = """\
[01/10/2024-21:52:53] [I] [TRT] ---------- Layers Running on DLA ----------
[01/10/2024-21:52:53] [I] [TRT] ---------- Layers Running on GPU ----------
[01/10/2024-21:52:53] [I] [TRT] [GpuLayer] MYELIN: {ForeignNode[/model/taskhead22/Constant_12_output_0.../model/taskhead22/Unsqueeze_6]}
[01/10/2024-21:52:53] [I] [TRT] [GpuLayer] COPY: /model/backbone0/conv/_input_quantizer/QuantizeLinear
"""


def test_dla_engine_summary_lists_gpu_layers_of_a_dla_engine_only():
    # trtexec --useDLACore --allowGPUFallback summary (a public Jetson benchmark script's notes)
    got = aggregate(parse_tensorrt_dla(DLA_SUMMARY))
    assert got["ops"] == ["SHUFFLE", "CONVOLUTION", "SOFTMAX"] and got["count"] == 3
    # a build without DLA prints an empty DLA section: every layer on the GPU by design
    assert parse_tensorrt_dla(GPU_ONLY_SUMMARY) == []


# -- RKNN compiler ------------------------------------------------------------------------------
def test_rknn_compiler_turn_to_target_cpu():
    got = aggregate(parse_rknn(case_log("w10")))        # rknn-toolkit2#162
    assert got["ops"] == ["LayerNorm"] and got["count"] == 2


def test_rknn_no_lowering_custom_op_and_channel_too_large():
    # a toolkit2 2.x Whisper conversion log; the wrapped form from a toolkit2 2.3.2 tutorial
    log = ("I rknn building ...\n"
           "No lowering found for: /model/encoder/embed_positions/CumSum, node type = CumSum, "
           "use CustomOperatorLower instead.\n"
           "No lowering found for: /model/decoder/embed_positions/CumSum, node type = CumSum, "
           "use CustomOperatorLower instead.\n"
           "E RKNN: [19:02:58.658] channel is too large, may produce thousands of regtask, "
           "fallback to cpu!\n"
           "No lowering found for: unsupported_acos_node,\n"
           "node type = Acos, use CustomOperatorLower instead.\n")
    got = aggregate(parse_rknn(log))
    assert got["ops"] == ["CumSum", "Acos"] and got["count"] == 4


# -- ONNX Runtime EP summaries ------------------------------------------------------------------
def test_ort_ep_summaries_of_two_graphs_add_up():
    got = aggregate(parse_onnxruntime(case_log("w06")))  # apple/ml-fastvlm#50
    assert got["count"] == 795
    # the same session summarised twice counts once
    line = case_log("w06").splitlines()[0]
    assert aggregate(parse_onnxruntime(line + "\n" + line))["count"] == 794


def test_ort_rewrapped_placement_dump_wins_over_the_coreml_summary():
    got = aggregate(parse_onnxruntime(case_log("w07")))  # microsoft/onnxruntime#28022
    assert got["count"] == 14
