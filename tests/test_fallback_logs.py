"""CPU fallback stated in runtime/compiler logs: parsers, collector facts, rule.

Inputs are real logs: the board cases under ../shared/cases (c3-*) and the excerpts in
tests/data/fallback/ (each with its source URL in tests/data/fallback/SOURCES.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npu_doctor.collectors.fallback import build_records
from npu_doctor.parsers.fallback import (
    aggregate,
    line_ranges,
    parse_ascend_aicpu,
    parse_edgetpu,
    parse_fallback_logs,
    parse_onnxruntime,
    parse_rknn,
    parse_torch_npu,
    parse_vitisai,
    strip_prefix,
)
from npu_doctor.tomlcompat import tomllib

from conftest import CASES, case_path, check_json, fact_values, finding_ids, run_cli

DATA = Path(__file__).resolve().parent / "data" / "fallback"
RULE = "cpu-fallback-logged"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def case_log(case: str) -> str:
    logs = sorted((case_path(case) / "logs").iterdir())
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in logs)


# -- parsers on the case logs -------------------------------------------------------------
CASE_EXPECT = [
    # case, parser, ops, count
    ("c3-01", parse_edgetpu, ["MUL", "SPLIT"], 2),
    ("c3-03", parse_rknn, ["Transpose"], 1),
    ("c3-04", parse_rknn, ["MatMul", "Transpose", "Reshape"], 12),
    ("c3-06", parse_rknn, ["ArgMax"], 1),
    ("c3-07", parse_vitisai, [], 8),
    ("c3-09", parse_torch_npu, ["torchvision::nms", "aten::isin.Tensor_Tensor_out"], 2),
    ("c3-10", parse_torch_npu, ["aten::_transformer_encoder_layer_fwd"], 1),
    ("c3-12", parse_torch_npu, ["aten::_scaled_dot_product_efficient_attention"], 1),
    ("c3-14", parse_onnxruntime, ["Gather"], 39),
]


@pytest.mark.parametrize("case,fn,ops,count", CASE_EXPECT, ids=[c[0] for c in CASE_EXPECT])
def test_parser_on_case_log(case, fn, ops, count):
    text = case_log(case)
    agg = aggregate(fn(text))
    assert agg["ops"] == ops
    assert agg["count"] == count
    # the combined parser says the same (no other parser double counts these logs)
    both = aggregate(parse_fallback_logs(text))
    assert (both["ops"], both["count"]) == (ops, count)


def test_edgetpu_rows_keep_status_and_line_numbers():
    es = parse_edgetpu(case_log("c3-01"))
    rows = [e for e in es if e["kind"] == "op"]
    assert [(e["op"], e["count"], e["line_no"]) for e in rows] == [("MUL", 1, 7), ("SPLIT", 1, 8)]
    assert rows[0]["status"].startswith("Operation is otherwise supported, but not mapped")
    total = [e for e in es if e["kind"] == "total"]
    assert total[0]["count"] == 2 and total[0]["line_no"] == 3


def test_ort_total_wins_over_truncated_node_list():
    es = parse_onnxruntime(case_log("c3-14"))
    total = [e for e in es if e["kind"] == "total"]
    assert total[0]["target"] == "CPUExecutionProvider" and total[0]["line_no"] == 6
    node = [e for e in es if e["kind"] == "op"][0]
    assert (node["op"], node["node"], node["line_no"]) == ("Gather", "Gather_1067", 7)
    # the MIGraphX nodes (fused kernel, MemcpyFromHost) are not CPU placements
    assert all(e["op"] not in ("MemcpyFromHost",) for e in es)


def test_vitisai_keeps_other_columns():
    es = parse_vitisai(case_log("c3-07"))
    assert es[0]["columns"] == {"CPU": 8, "NPU": 2356, "VITIS_EP_CPU": 13}


def test_vitisai_partitioner_assign_to_cpu_names_the_op():
    # amd/RyzenAI-SW#85 (Ryzen AI 1.1, Phoenix); the DPU compilers of Vitis AI 1.x-3.x print it too
    line = ("I20240527 13:09:21.737005 19076 PartitionPass.cpp:6479] xir::Op{name = "
            "input_DequantizeLinear_Output_/layer1/Conv_output_0, type = fix2float} is not "
            "supported by current target. Target name: AMD_AIE2_Nx4_Overlay, target type: IPU_PHX. "
            "Assign it to CPU.")
    es = parse_vitisai(line + "\n" + line.replace("fix2float", "reshape-fix"))
    assert [(e["op"], e["count"], e["node"]) for e in es] == [
        ("fix2float", 1, "input_DequantizeLinear_Output_/layer1/Conv_output_0"),
        ("reshape-fix", 1, "input_DequantizeLinear_Output_/layer1/Conv_output_0")]
    assert aggregate(es)["count"] == 2
    # with the EP's operator summary in the same log, the summary counts and the lines only name
    es = parse_vitisai(line + "\n[Vitis AI EP] No. of Operators :   CPU     2    IPU    15  88.24%")
    agg = aggregate(es)
    assert agg["count"] == 2 and agg["ops"] == ["fix2float"]
    assert parse_fallback_logs(line)[0]["runtime"] == "vitisai"


def test_rknn_runtime_missing_cpu_kernel_is_flagged():
    es = parse_rknn(case_log("c3-06"))
    assert [(e["op"], e["node"], e.get("runtime_missing_kernel")) for e in es] == [
        ("ArgMax", "ArgMax:ArgMax", True)]


# -- parsers on more real logs (tests/data/fallback, sources in SOURCES.md) ---------------
SAMPLES = [
    # file, runtime, ops, count
    ("ort_1.14_cuda_sherpa_onnx_163.log", "onnxruntime", [], 875),
    ("ort_qnn_unsupported_22821.log", "qnn", ["LeakyRelu", "Slice", "Add"], 18),
    ("ort_qnn_clpeak_197.log", "qnn", ["DequantizeLinear"], 1),
    ("ort_vitisai_all_cpu_ryzenai_170.log", "vitisai", [], 400),
    ("ort_openvino_rejecting_2298.log", "onnxruntime", [], None),   # whole graph, no count
    ("edgetpu_16_detector_490.log", "edgetpu", ["DEQUANTIZE", "LOGISTIC", "CONCATENATION"], 6),
    ("edgetpu_15_transpose_342.log", "edgetpu",
     ["TRANSPOSE", "FULLY_CONNECTED", "PAD", "ADD", "MEAN", "CONV_2D", "QUANTIZE",
      "DEPTHWISE_CONV_2D"], 153),
    ("edgetpu_2.1_model2_60.log", "edgetpu", ["LOGISTIC", "CONCATENATION"], 10),
    ("edgetpu_15_summary_only_393.log", "edgetpu", [], 48),
    ("rknn_runtime_unsupport_min_482.log", "rknn", ["Min"], 1),
    ("rknn_runtime_quoted_transpose_145.log", "rknn", ["Transpose"], 1),
    ("rknn_runtime_cumsum_immich_15241.log", "rknn", ["CumSum"], 1),
    ("rknn_build_layer_table_fp16.log", "rknn", ["Pad", "Resize"], 3),
    ("rknn_runtime_log_level4_lenet_userguide.log", "rknn", ["Softmax"], 1),
    ("torch_npu_wrapped_mineru_1941.log", "torch_npu",
     ["torchvision::nms", "aten::isin.Tensor_Tensor_out"], 2),
    ("torch_npu_ms_swift_1047.log", "torch_npu", ["aten::isin.Tensor_Tensor_out"], 1),
    ("ascend_aicpu_argsort_vllm_ascend_2210.log", "ascend", ["ArgSort"], 1),
]


@pytest.mark.parametrize("name,runtime,ops,count", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_parser_on_real_sample(name, runtime, ops, count):
    es = parse_fallback_logs(data(name))
    counted = [e for e in es if e["kind"] in ("op", "total")]
    assert {e["runtime"] for e in counted} == {runtime}
    agg = aggregate(es)
    assert agg["ops"] == ops
    assert agg["count"] == count


NEGATIVE = [
    "edgetpu_16_all_mapped_yolov7_1672.log",     # every row "Mapped to Edge TPU"
    "ort_cpu_capability_only_14477.log",         # ORT's deliberate shape-op placement, no dump
    "ort_web_all_on_webgpu.log",                 # all nodes on the accelerator EP
    "ort_cpu_candidates_triton_87.log",          # ORT's own "Candidate for fallback CPU execution"
    "rknn_2.x_layer_table_header_374.log",       # 2.x table: only the InputOperator row
    "rknn_build_no_fallback_meta_rockchip_100.log",   # "RKNNCPUWeightTransposePass"
    "rknn_toolkit2_2.3.2_build_408.log",
    "negative_cpu_mentions.log",                 # "will fallback to CPU" in an app's own print
]


@pytest.mark.parametrize("name", NEGATIVE)
def test_logs_that_mention_cpu_but_place_nothing(name):
    es = parse_fallback_logs(data(name))
    assert [e for e in es if e["kind"] in ("op", "total")] == []


def test_rknn_io_operators_are_not_fallback():
    es = parse_rknn(data("rknn_runtime_log_level4_lenet_userguide.log"))
    assert "InputOperator" not in [e["op"] for e in es]
    assert "OutputOperator" not in [e["op"] for e in es]
    es = parse_rknn(data("rknn_build_layer_table_fp16.log"))
    assert [e["node"] for e in es] == ["Pad:/pr_encoder/conv1/conv/conv.0/Pad",
                                       "Pad:/pr_encoder/conv1/conv/conv.4/Pad",
                                       "Resize:/pr_Up3/up/up.0/Resize"]


def test_qnn_repeated_session_counts_each_node_once():
    es = parse_onnxruntime(data("ort_qnn_clpeak_197.log"))
    assert [(e["op"], e["node"], e["line_no"]) for e in es] == [("DequantizeLinear", "n0", 5)]


def test_ort_warning_alone_is_a_hint_without_count():
    es = parse_onnxruntime(data("ort_warning_only_sherpa_onnx_163.log"))
    assert [e["kind"] for e in es] == ["hint"]
    assert aggregate(es)["count"] is None
    recs = build_records("logs/ort.log", es)
    assert recs[0]["evidence"] == "hint" and "count" not in recs[0]


def test_torch_repeated_by_ranks_counts_once():
    text = case_log("c3-09")
    doubled = "\n".join(f"[rank{r}]:{line}" for r in (0, 1) for line in text.splitlines())
    agg = aggregate(parse_torch_npu(doubled))
    assert agg["ops"] == ["torchvision::nms", "aten::isin.Tensor_Tensor_out"]
    assert agg["count"] == 2


def test_ort_identical_dump_twice_counts_once():
    text = case_log("c3-14")
    agg = aggregate(parse_onnxruntime(text + "\n" + text))
    assert agg["count"] == 39 and agg["ops"] == ["Gather"]


def test_torch_other_backend_is_not_called_torch_npu():
    line = case_log("c3-10").replace("NPU backend", "MPS backend")
    es = parse_torch_npu(line)
    assert [(e["runtime"], e["backend"]) for e in es] == [("torch", "MPS")]


def test_ort_pre_1_13_formats():
    # Line formats from the LOGS statements of ORT 0.5-1.12 (microsoft/onnxruntime PR 2221,
    # 2229): the provider's node list on one line, "OpType (name), " items.
    old = ("2020-06-01 10:00:00.0 [V:onnxruntime:, inference_session.cc:428 TransformGraph] "
           "Node placements\n"
           "2020-06-01 10:00:00.0 [V:onnxruntime:, inference_session.cc:432 TransformGraph]  "
           "Provider: [CUDAExecutionProvider]: [Conv (Conv_0), Relu (Relu_1), ]\n"
           "2020-06-01 10:00:00.0 [V:onnxruntime:, inference_session.cc:432 TransformGraph]  "
           "Provider: [CPUExecutionProvider]: [Shape (Shape_2), Gather (Gather_3), "
           "NonMaxSuppression (nms_4), ]\n")
    agg = aggregate(parse_onnxruntime(old))
    assert agg["ops"] == ["Shape", "Gather", "NonMaxSuppression"] and agg["count"] == 3


def test_ort_all_nodes_on_cpu_needs_another_ep_in_the_log():
    line = ("[V:onnxruntime:, session_state.cc:1342 VerifyEachNodeIsAssignedToAnEp]  "
            "All nodes placed on [CPUExecutionProvider]. Number of nodes: 52")
    assert parse_onnxruntime(line) == []      # a plain CPU session
    with_ep = ("[W:onnxruntime:Default, qnn_execution_provider.cc:420 QNNExecutionProvider] "
               "QNNExecutionProvider: backend setup failed\n" + line)
    agg = aggregate(parse_onnxruntime(with_ep))
    assert agg["count"] == 52 and agg["ops"] == []


def test_ep_node_summary_counts_when_no_node_is_named():
    # QNN EP GetCapability summary as a user quoted it (363 nodes, 3 on the HTP), with the
    # Android logcat prefix ORT uses on a phone.
    line = ("I/onnxruntime: [I:onnxruntime:, qnn_execution_provider.cc:1152 GetCapability] "
            "Number of partitions supported by QNN EP: 1, number of nodes in the graph: 363, "
            "number of nodes supported by QNN: 3")
    es = parse_onnxruntime(line)
    assert [(e["runtime"], e["kind"], e["count"]) for e in es] == [("qnn", "total", 360)]
    # a named list wins over the summary (some ORT releases print the partition count there)
    both = line + "\n" + data("ort_qnn_clpeak_197.log")
    assert aggregate(parse_onnxruntime(both))["count"] == 1
    full = line.replace("supported by QNN: 3", "supported by QNN: 363")
    assert parse_onnxruntime(full) == []


def test_openvino_rejection_is_every_node_without_count():
    recs = build_records("logs/ov.log", parse_fallback_logs(data("ort_openvino_rejecting_2298.log")))
    assert recs[0]["evidence"] == "placement" and "count" not in recs[0]
    assert recs[0]["summary"].startswith("every node on the CPU")


def test_ansi_colour_crlf_and_timestamps_do_not_matter():
    for name in ("ort_1.14_cuda_sherpa_onnx_163.log", "edgetpu_15_transpose_342.log",
                 "rknn_build_layer_table_fp16.log", "torch_npu_wrapped_mineru_1941.log"):
        plain = aggregate(parse_fallback_logs(data(name)))
        coloured = "\r\n".join(f"\x1b[0;33m{line}\x1b[0m" for line in data(name).splitlines())
        journald = "\n".join(f"Mar 03 10:12:01 rk3588 app[812]: {line}"
                             for line in data(name).splitlines())
        for variant in (coloured, journald):
            got = aggregate(parse_fallback_logs(variant))
            assert (got["ops"], got["count"]) == (plain["ops"], plain["count"]), name


def test_strip_prefix_forms():
    assert strip_prefix("D RKNN: [07:52:21.565] node: MatMul:MatMul_38, Target: CPU") == \
        "node: MatMul:MatMul_38, Target: CPU"
    assert strip_prefix("[rank1]:[W805 11:17:34.3 x.ts:26] Warning") == "[W805 11:17:34.3 x.ts:26] Warning"
    assert strip_prefix("2023-03-23 02:31:57.502 Operator  Count  Status") == "Operator  Count  Status"


def test_ascend_profiler_csv_ai_cpu_rows():
    # Column layout of CANN's op_statistic.csv (msprof / torch_npu.profiler
    # ASCEND_PROFILER_OUTPUT); rows with Core Type AI_CPU run on the AI CPU.
    csv = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
           "Max Time(us),Ratio(%)\n"
           "0,MatMulV2,AI_CORE,10,500,1,50,60,50\n"
           "0,Bincount,AI_CPU,5,150,1,30,35,15\n"
           "0,ScatterElements,AI_CPU,5,250,1,50,55,25\n")
    agg = aggregate(parse_ascend_aicpu(csv))
    assert agg["ops"] == ["Bincount", "ScatterElements"] and agg["count"] == 10


def test_line_ranges():
    assert line_ranges([7, 8, 9, 12, 3]) == "3, 7-9, 12"
    assert line_ranges([]) == ""


def test_bad_input_gives_nothing_not_a_traceback():
    for junk in ("", "\x00\x01\xff", "Operator Count Status\nMUL x y", "Node(s) placed on [",
                 "[Vitis AI EP] No. of Operators :", "The operator '"):
        assert parse_fallback_logs(junk) == []


# -- check --snapshot on the real cases ---------------------------------------------------
C3 = sorted(p.name for p in CASES.glob("c3-*")) if CASES.is_dir() else []


@pytest.mark.parametrize("case", C3)
def test_check_snapshot_c3_cases(case):
    snap = case_path(case)
    with open(snap / "case.toml", "rb") as f:
        expect = tomllib.load(f)["expect"]
    rep = check_json(snap)
    if RULE in expect.get("findings", []):
        assert RULE in finding_ids(rep)
    for path, want in expect.get("facts", {}).items():
        if path.startswith("fallback."):
            assert fact_values(rep["facts"], path) == [want], path
    f = [x for x in rep["findings"] if x["id"] == RULE][0]
    assert f["severity"] == "warning"
    assert f["subject"].startswith("logs/")
    assert any(fx["kind"] == "doc" for fx in f["fixes"])
    assert any(fx["kind"] == "now" for fx in f["fixes"])
    probe = [p for p in rep["probes"] if p["id"] == "cpu-fallback-logs"][0]
    assert probe["status"] == "ok"


def test_check_snapshot_message_lists_ops_counts_and_log():
    rep = check_json(case_path("c3-01"))
    f = [x for x in rep["findings"] if x["id"] == RULE][0]
    assert "logs/edgetpu_compiler.log" in f["message"]
    assert "MUL ×1" in f["message"] and "SPLIT ×1" in f["message"]
    assert "2 operators" in f["message"]
    ev = {e["fact"]: e for e in f["evidence"]}
    assert ev["fallback.count"]["value"] == 2
    assert ev["fallback.count"]["source"].startswith("logs/edgetpu_compiler.log:")
    assert rep["facts"]["fallback"]["by_runtime"]["edgetpu"]["ops"] == ["MUL", "SPLIT"]
    srcs = [s["source"] for s in rep["facts"]["fallback"]["sources"]]
    assert "logs/edgetpu_compiler.log:7" in srcs


@pytest.mark.parametrize("case", ["c1-11", "c5-05"])
def test_logs_mentioning_cpu_but_no_fallback_give_no_finding(case):
    rep = check_json(case_path(case))
    assert RULE not in finding_ids(rep)
    assert "fallback" not in rep["facts"]


def test_log_option_adds_a_file_and_negative_file_adds_nothing(tmp_path):
    snap = case_path("c1-11")
    rep = check_json(snap, "--log", str(DATA / "negative_cpu_mentions.log"))
    assert RULE not in finding_ids(rep)
    rep = check_json(snap, "--log", str(DATA / "edgetpu_15_transpose_342.log"),
                     "--log", str(DATA / "torch_npu_wrapped_mineru_1941.log"))
    assert rep["facts"]["fallback"]["count"] == 155
    assert rep["facts"]["fallback"]["ops"][:1] == ["TRANSPOSE"]
    assert "torchvision::nms" in rep["facts"]["fallback"]["ops"]
    subjects = {f["subject"] for f in rep["findings"] if f["id"] == RULE}
    assert len(subjects) == 2


def test_hint_only_log_is_info_and_sets_no_count(tmp_path):
    snap = tmp_path / "snap"
    shutil.copytree(case_path("c1-11"), snap, symlinks=True)
    shutil.rmtree(snap / "logs")
    (snap / "logs").mkdir()
    shutil.copy(DATA / "ort_warning_only_sherpa_onnx_163.log", snap / "logs" / "app.log")
    rep = check_json(snap)
    fs = [f for f in rep["findings"] if f["id"] == RULE]
    assert [f["severity"] for f in fs] == ["info"]
    assert "count" not in rep["facts"]["fallback"] and "ops" not in rep["facts"]["fallback"]


def test_rules_explain_cpu_fallback_logged():
    proc = run_cli("rules", "explain", RULE)
    assert proc.returncode == 0, proc.stderr
    assert "CPU" in proc.stdout
