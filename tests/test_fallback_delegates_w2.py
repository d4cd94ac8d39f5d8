"""TFLite Hexagon/CoreML partition summaries, restored CPU plans, builtin op codes of the first GPU
delegate, the pre-Dolphin Android Studio logcat prefix and the ONNX Runtime QNN EP's backend setup
failure, on the real logs of tests/cases/w2* and on verbatim lines from public reports."""

from __future__ import annotations

from npu_doctor.parsers.fallback.onnxruntime import parse_onnxruntime
from npu_doctor.parsers.fallback.tflite import parse_tflite
from npu_doctor.parsers.fallback.tflite_ops import BUILTIN_OPERATORS, builtin_name

from test_fallback_delegates import agg_of, case_log


def test_builtin_operator_codes_follow_the_schema():
    # schema.fbs BuiltinOperator: 0 ADD, 25 SOFTMAX, 40 MEAN, 97 RESIZE_NEAREST_NEIGHBOR, 158 SIGN
    assert (builtin_name(0), builtin_name(25), builtin_name(40), builtin_name(97)) == \
        ("ADD", "SOFTMAX", "MEAN", "RESIZE_NEAREST_NEIGHBOR")
    assert len(BUILTIN_OPERATORS) == 159 and builtin_name(158) == "SIGN"
    assert builtin_name(159) is None and builtin_name(-1) is None


def test_first_gpu_delegate_names_the_op_code():
    got = agg_of(case_log("w204"))                      # tensorflow/tensorflow#25131
    assert (got["ops"], got["count"]) == (["MEAN"], 4)
    # tensorflow/tensorflow#31720: the bare number form
    got = agg_of("WARNING: 25 cannot be handled by this delegate.  Only the first 30 ops will run "
                 "on the GPU, and the remaining 1 on the CPU")
    assert (got["ops"], got["count"]) == (["SOFTMAX"], 1)


def test_android_studio_logcat_lines_of_a_gpu_block():
    got = agg_of(case_log("w201"))                      # ultralytics/yolov5#1127
    assert (got["ops"], got["count"]) == (["DEQUANTIZE"], 1)


def test_hexagon_summary_counts_the_nodes_left_out():
    got = agg_of(case_log("w202"))                      # tensorflow/tensorflow#45902
    assert got["count"] == 23
    # the CoreML delegate's wording (a comma before "with"); a full delegation is no fallback
    assert agg_of("INFO: CoreML delegate: 30 nodes delegated out of 31 nodes, with 2 partitions.")[
        "count"] == 1
    assert parse_tflite("INFO: Hexagon delegate: 67 nodes delegated out of 67 nodes with 1 partitions.") == []


def test_summary_and_replacing_line_of_one_delegate_count_once():
    # tensorflow/tensorflow#56747 (inference_diff): the summary, then the interpreter's own line
    text = ("INFO: TfLiteHexagonDelegate delegate: 136 nodes delegated out of 139 nodes with 2 partitions.\n"
            "\n"
            "INFO: Replacing 136 out of 139 node(s) with delegate (TfLiteHexagonDelegate) node, "
            "yielding 5 partitions for the whole graph.\n"
            "INFO: Replacing 12 out of 12 node(s) with delegate (TfLiteXNNPackDelegate) node, "
            "yielding 1 partitions for the whole graph.\n")
    assert agg_of(text)["count"] == 3


def test_restored_plan_puts_the_whole_graph_on_the_cpu():
    got = agg_of(case_log("w203"))                      # tensorflow/tensorflow#49247
    assert got["count"] == 125
    # a partial delegation that then fails: the whole graph, not the part left out, counts
    text = ("INFO: Hexagon delegate: 44 nodes delegated out of 67 nodes with 7 partitions.\n"
            "ERROR: Restored original execution plan after delegate application failure.\n")
    assert agg_of(text)["count"] == 67
    # no statement of the graph's size: every node on the CPU, count unknown
    entries = parse_tflite("ERROR: Restored original execution plan after delegate application failure.")
    assert [(e["kind"], e["count"]) for e in entries] == [("total", None)]


def test_restored_plan_after_a_gpu_block_keeps_the_named_ops():
    text = ("ERROR: Following operations are not supported by GPU delegate:\n"
            "DEQUANTIZE: \n"
            "740 operations will run on the GPU, and the remaining 1 operations will run on the CPU.\n"
            "ERROR: Restored original execution plan after delegate application failure.\n")
    got = agg_of(text)
    assert (got["ops"], got["count"]) == (["DEQUANTIZE"], 741)


def test_qnn_setup_backend_failure_is_a_whole_graph_fallback():
    for case in ("w208", "w209"):                       # microsoft/onnxruntime#21214, #20206
        entries = parse_onnxruntime(case_log(case))
        assert [(e["runtime"], e["kind"], e["count"]) for e in entries] == [("qnn", "total", None)]
    # a placement dump in the same log is authoritative
    text = (case_log("w208") + "\n"
            " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 2\n"
            "  Conv (conv1)\n"
            "  Relu (relu1)\n")
    assert agg_of(text)["count"] == 2
