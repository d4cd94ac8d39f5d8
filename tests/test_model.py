"""`npu-doctor model FILE --target T`: target lists, each model rule on models built with
onnx.helper (the right value and the clean case), real public models from PyPI wheels, and the
CLI contract (text/json, --fail-on, exit 0/1/2, one-line errors)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_cli, run_cli_subprocess

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from npu_doctor.errors import ConfigError, ModelError  # noqa: E402
from npu_doctor.model import lint  # noqa: E402
from npu_doctor.model.targets import parse_target, target_files  # noqa: E402

ALL_TARGETS = ["rk3588", "rk3576", "rv1106", "hailo8", "hailo8l", "edgetpu", "ascend310",
               "ascend910", "intel-npu", "xdna"]


# -- models built in the tests --------------------------------------------------------------
def _save(tmp_path, name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="npu-doctor-tests")
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return str(path)


def _conv_model(tmp_path, name="conv", k=3, batch=1, group=1, ch=8, out_name="features", opset=13,
                extra=(), mode=None):
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, ch, 32, 32])
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [ch, ch // group, k, k], [0.0] * (ch * (ch // group) * k * k))
    nodes = [helper.make_node("Conv", ["image", "w"], ["c"], name="conv0", kernel_shape=[k, k],
                              pads=[k // 2] * 4, group=group),
             helper.make_node("Relu", ["c"], [out_name if not extra else "r"], name="relu0")]
    nodes += list(extra)
    return _save(tmp_path, name, nodes, [x], [y], [w], opset=opset)


def _ids(result):
    return [f.id for f in result.findings]


def _one(result, rid):
    found = [f for f in result.findings if f.id == rid]
    assert len(found) == 1, (rid, [(f.id, f.subject, f.message) for f in result.findings])
    return found[0]


def test_clean_conv_model_has_no_finding_on_the_rknn_targets(tmp_path):
    path = _conv_model(tmp_path)
    for t in ("rk3588", "rk3576", "rv1106"):
        assert lint(path, t).findings == [], t


def test_dynamic_batch_is_an_error_where_shapes_are_static_and_a_warning_where_declared(tmp_path):
    path = _conv_model(tmp_path, batch="N")
    f = _one(lint(path, "hailo8"), "model-dynamic-shape")
    assert f.severity == "error" and f.subject == "image" and "N" in f.message
    assert any("make_dynamic_shape_fixed --input_name image" in x["text"] for x in f.fixes)
    assert _one(lint(path, "rk3588"), "model-dynamic-shape").severity == "warning"
    assert "model-dynamic-shape" not in _ids(lint(_conv_model(tmp_path, "static"), "hailo8"))


def test_if_node_is_control_flow_and_nested_ones_are_counted_not_repeated(tmp_path):
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])

    def branch(name, value):
        c = helper.make_node("Constant", [], [f"{name}_v"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value]))
        return helper.make_graph([c], name, [], [helper.make_tensor_value_info(f"{name}_v", TensorProto.FLOAT, [1])])

    inner = helper.make_node("If", ["cond"], ["inner_y"], name="inner_if",
                             then_branch=branch("t2", 1.0), else_branch=branch("e2", 2.0))
    then_g = helper.make_graph([inner], "then", [], [helper.make_tensor_value_info("inner_y", TensorProto.FLOAT, [1])])
    node = helper.make_node("If", ["cond"], ["y"], name="outer_if", then_branch=then_g, else_branch=branch("e", 0.0))
    path = _save(tmp_path, "iffy", [node], [cond], [out])
    f = _one(lint(path, "hailo8"), "model-control-flow")
    assert f.severity == "error" and f.subject == "outer_if" and "1 nested" in f.message
    assert _one(lint(path, "rk3588"), "model-control-flow").severity == "warning"   # If: "only constant input"
    assert "model-control-flow" not in _ids(lint(_conv_model(tmp_path), "hailo8"))


def test_dropout_and_training_batchnorm_are_training_ops(tmp_path):
    drop = helper.make_node("Dropout", ["features_pre"], ["features"], name="drop0")
    path = _conv_model(tmp_path, "drop", out_name="features", extra=[
        helper.make_node("Identity", ["r"], ["features_pre"], name="id0"), drop])
    f = _one(lint(path, "rk3588"), "model-training-op")
    assert f.subject == "drop0" and f.severity == "warning"
    assert "model-training-op" not in _ids(lint(_conv_model(tmp_path), "rk3588"))


def test_unsupported_op_is_an_error_and_cpu_op_a_warning_with_the_node_names(tmp_path):
    topk_k = helper.make_tensor("k", TensorProto.INT64, [1], [5])
    path = _conv_model(tmp_path, "topk", out_name="scores", extra=[
        helper.make_node("Flatten", ["r"], ["flat"], name="flat0"),
        helper.make_node("TopK", ["flat", "k"], ["scores", "idx"], name="topk0"),
        helper.make_node("ReduceMean", ["r"], ["unused"], name="mean0", axes=[1])])
    m = onnx.load(path)
    m.graph.initializer.append(topk_k)
    onnx.save(m, path)
    found = {(f.subject, f.severity) for f in lint(path, "rk3588").findings if f.id == "model-op-unsupported"}
    assert ("topk0", "error") in found                   # TopK: "Not Supported" in RKNN-Toolkit2 2.3.2
    assert ("mean0", "warning") in found                 # ReduceMean: CPU kernel only
    f = next(f for f in lint(path, "rk3588").findings if f.subject == "topk0")
    assert "TopK x1" in f.message and any("post-processing" in x["text"] for x in f.fixes)
    assert any(x["text"].startswith("https://github.com/airockchip/rknn-toolkit2") for x in f.fixes)


def test_documented_constraints_move_a_node_to_the_cpu(tmp_path):
    # RK3588: Conv kernel in [1, 31], depthwise in [1, 8] (RKNN Compiler Support Operator List 3.2.5/3.2.6)
    f = _one(lint(_conv_model(tmp_path, "k33", k=33), "rk3588"), "model-op-unsupported")
    assert f.subject == "conv0" and f.severity == "warning" and "[33, 33] outside [1, 31]" in f.message
    assert lint(_conv_model(tmp_path, "k31", k=31), "rk3588").findings == []
    dw = _one(lint(_conv_model(tmp_path, "dw9", k=9, group=8), "rk3588"), "model-op-unsupported")
    assert "outside [1, 8]" in dw.message
    assert lint(_conv_model(tmp_path, "dw7", k=7, group=8), "rk3588").findings == []


def test_resize_mode_outside_the_npu_kernel_goes_to_the_cpu(tmp_path):
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])

    def resize(name, mode):
        return _conv_model(tmp_path, name, out_name="up", extra=[
            helper.make_node("Resize", ["r", "", "scales"], ["up"], name="up0", mode=mode)])

    for name, mode, bad in (("cubic", "cubic", True), ("nearest", "nearest", False)):
        path = resize(name, mode)
        m = onnx.load(path)
        m.graph.initializer.append(scales)
        onnx.save(m, path)
        ids = _ids(lint(path, "rk3588"))
        assert ("model-op-unsupported" in ids) == bad, (mode, ids)


def test_opset_outside_the_toolkit_range(tmp_path):
    high = _one(lint(_conv_model(tmp_path, "op20", opset=20), "rk3588"), "model-opset-out-of-range")
    assert "20" in high.message and "19" in high.message and high.severity == "error"
    low = _one(lint(_conv_model(tmp_path, "op8", opset=8), "ascend310"), "model-opset-out-of-range")
    assert "below the 9" in low.message
    info = _one(lint(_conv_model(tmp_path, "op13", opset=13), "xdna"), "model-opset-out-of-range")
    assert info.severity == "info" and "17" in info.message
    assert "model-opset-out-of-range" not in _ids(lint(_conv_model(tmp_path, "op13"), "rk3588"))


def test_generic_and_duplicate_output_names(tmp_path):
    f = _one(lint(_conv_model(tmp_path, "gen", out_name="output"), "rk3588"), "model-output-names")
    assert f.subject == "output" and f.severity == "warning"
    f = _one(lint(_conv_model(tmp_path, "gen2", out_name="onnx::Relu_12"), "rk3588"), "model-output-names")
    assert f.subject == "onnx::Relu_12"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4])
    dup = _save(tmp_path, "dup", [helper.make_node("Relu", ["x"], ["probs"], name="r")], [x], [y, y])
    assert _one(lint(dup, "rk3588"), "model-output-names").severity == "error"
    assert "model-output-names" not in _ids(lint(_conv_model(tmp_path, "named", out_name="features"), "rk3588"))


def test_transposes_around_convolutions(tmp_path):
    x = helper.make_tensor_value_info("nhwc", TensorProto.FLOAT, [1, 32, 32, 8])
    y = helper.make_tensor_value_info("features", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8, 1, 1], [0.0] * 64)
    nodes = [helper.make_node("Transpose", ["nhwc"], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["nchw", "w"], ["c"], name="conv0", kernel_shape=[1, 1]),
             helper.make_node("Transpose", ["c"], ["features"], name="to_nhwc", perm=[0, 2, 3, 1])]
    f = _one(lint(_save(tmp_path, "churn", nodes, [x], [y], [w]), "rk3588"), "model-layout-transposes")
    assert f.subject == "to_nchw" and "2 of 2" in f.message
    one = _save(tmp_path, "one", nodes[:2], [x], [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)], [w])
    assert "model-layout-transposes" not in _ids(lint(one, "rk3588"))


# -- the target lists ------------------------------------------------------------------------
def test_every_target_parses_names_real_onnx_ops_and_has_sources():
    real = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}
    files = target_files()
    assert sorted(files) == sorted(ALL_TARGETS)
    for tid, path in files.items():
        t = parse_target(path)
        assert t.id == tid and t.toolkit_version and t.sources
        assert all(s.startswith("https://") for s in t.sources)
        bogus = sorted(op for op in t.placement if op not in real)
        assert not bogus, (tid, bogus)
        for c in t.constraints:
            assert c.op == "*" or c.op in real, (tid, c.op)
            assert c.source.startswith("https://"), (tid, c.op)


def test_edgetpu_tflite_names_are_builtin_operators():
    tflite = pytest.importorskip("tflite")
    names = {n for n in dir(tflite.BuiltinOperator) if n.isupper()}
    t = parse_target(target_files()["edgetpu"])
    assert set(t.tflite["npu"]) <= names, sorted(set(t.tflite["npu"]) - names)


def test_bad_target_file_is_a_config_error_naming_the_file(tmp_path):
    bad = tmp_path / "rk3588.toml"
    bad.write_text('[target]\nid = "rk3588"\nname = "x"\ntoolkit = "t"\ntoolkit_version = "1"\n'
                   'sources = ["https://example.org"]\ndynamic_shapes = "maybe"\n')
    with pytest.raises(ConfigError, match="rk3588.toml.*dynamic_shapes"):
        lint(_conv_model(tmp_path), "rk3588", target_dirs=[str(tmp_path)])
    with pytest.raises(ConfigError, match="unknown target 'rk9999'"):
        lint(_conv_model(tmp_path), "rk9999")


# -- real public models (PyPI wheels) -------------------------------------------------------
@pytest.fixture(scope="session")
def wheels(public_onnx_models):
    if "silero_vad.onnx" not in public_onnx_models:
        pytest.skip(f"the wheels did not hold the expected models: {sorted(public_onnx_models)}")
    return public_onnx_models


@pytest.mark.slow
def test_silero_vad_if_model_and_ifless_model(wheels):
    with_if = lint(wheels["silero_vad.onnx"], "hailo8")
    cf = [f for f in with_if.findings if f.id == "model-control-flow"]
    assert len(cf) == 1 and cf[0].severity == "error" and "nested" in cf[0].message
    # the "ifless" export: no nested If regions (one top-level If picks the sample rate)
    ifless = lint(wheels["silero_vad_op18_ifless.onnx"], "hailo8")
    cf2 = [f for f in ifless.findings if f.id == "model-control-flow"]
    assert len(cf2) == 1 and "0 nested" in cf2[0].message
    assert with_if.facts.get("model.op_counts")["If"] > ifless.facts.get("model.op_counts")["If"]
    for r in (with_if, ifless):
        subjects = {f.subject for f in r.findings if f.id == "model-dynamic-shape"}
        assert subjects == {"input", "state"}
        assert any(f.id == "model-output-names" and f.subject == "output" for f in r.findings)
    # opset 18 is above ATC 5.0.4's 13
    assert "model-opset-out-of-range" in _ids(lint(wheels["silero_vad_op18_ifless.onnx"], "ascend310"))


@pytest.mark.slow
def test_rapidocr_detection_resize_goes_to_the_cpu_on_rk3588(wheels):
    r = lint(wheels["ch_PP-OCRv4_det_infer.onnx"], "rk3588")
    resize = [f for f in r.findings if f.id == "model-op-unsupported" and f.message.startswith("Resize")]
    assert resize and resize[0].severity == "warning" and "asymmetric" in resize[0].message
    assert {f.subject for f in r.findings if f.id == "model-dynamic-shape"} == {"x"}
    assert "model-control-flow" not in _ids(r)
    rec = lint(wheels["ch_PP-OCRv4_rec_infer.onnx"], "rk3588")
    assert rec.facts.get("model.opset") == 12 and "model-opset-out-of-range" not in _ids(rec)


# -- command line ----------------------------------------------------------------------------
def test_cli_json_text_and_exit_codes(tmp_path):
    clean = _conv_model(tmp_path)
    out = run_cli("model", clean, "--target", "rk3588", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["findings"] == [] and doc["target"]["toolkit_version"] == "2.3.2"
    bad = _conv_model(tmp_path, "dyn", batch="N", out_name="output")
    out = run_cli("model", bad, "--target", "hailo8", "--format", "json")
    assert out.returncode == 1
    f = json.loads(out.stdout)["findings"][0]
    assert set(f) == {"id", "severity", "title", "message", "subject", "evidence", "fixes"}
    assert run_cli_subprocess("model", bad, "--target", "rk3588").returncode == 0   # warnings only
    assert run_cli_subprocess("model", bad, "--target", "rk3588", "--fail-on", "warning").returncode == 1
    text = run_cli("model", bad, "--target", "rk3588", "--target", "hailo8").stdout
    assert "Hailo-8" in text and "RK3588" in text and "model-dynamic-shape [image]" in text
    assert "rk3588" in run_cli("model", "--list-targets").stdout


@pytest.mark.parametrize("content", [b"", b"\x08\x07\x12\x05pyto", b"hello, not a model\n"])
def test_bad_or_truncated_model_is_exit_2_with_one_line(tmp_path, content):
    p = tmp_path / "bad.onnx"
    if content == b"\x08\x07\x12\x05pyto":
        good = open(_conv_model(tmp_path), "rb").read()
        content = good[: len(good) // 2]                  # truncated in the middle of a tensor
    p.write_bytes(content)
    out = run_cli("model", str(p), "--target", "rk3588")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    with pytest.raises(ModelError):
        lint(str(p), "rk3588")


def test_missing_onnx_is_one_line_exit_2(tmp_path):
    path = _conv_model(tmp_path)
    code = ("import sys; sys.modules['onnx'] = None; sys.argv = ['npu-doctor', 'model', %r, '--target', 'rk3588'];"
            " from npu_doctor.cli import run; run()" % path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "pip install 'npu-doctor[model]'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_model_rules_stay_silent_in_a_host_check():
    from npu_doctor.rules import load_rules

    ids = {r.id for r in load_rules().rules}
    assert {"model-dynamic-shape", "model-control-flow", "model-training-op", "model-op-unsupported",
            "model-opset-out-of-range", "model-output-names", "model-layout-transposes"} <= ids


def test_tflite_and_openvino_ir_are_recognised_and_refused_in_one_line(tmp_path):
    tfl = tmp_path / "m.tflite"
    tfl.write_bytes(b"\x1c\x00\x00\x00TFL3" + b"\x00" * 64)
    xml = tmp_path / "m.xml"
    xml.write_text('<?xml version="1.0"?>\n<net name="m" version="11"></net>\n')
    for p, word in ((tfl, "tflite"), (xml, "openvino-ir")):
        out = run_cli("model", str(p), "--target", "intel-npu")
        assert out.returncode == 2 and word in out.stderr and len(out.stderr.strip().splitlines()) == 1
