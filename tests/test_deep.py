"""`check --deep` and `model FILE --run` (npu_doctor/deep): the shipped probe model against its
generator, real runs through this machine's ONNX Runtime and OpenVINO in the sandbox, the rules
on a snapshot with an Intel NPU the runtimes cannot reach, the sandbox's timeout / memory /
crash handling with real child processes, and the CLI on real models from PyPI wheels."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from npu_doctor.check import Config, run_check
from npu_doctor.deep import runner
from npu_doctor.deep.probe_model import PROBE_MODEL, PROBE_OPS
from npu_doctor.deep.sandbox import spawn
from npu_doctor.facts import Facts
from npu_doctor.host import SnapshotHost
from npu_doctor.rules import evaluate, load_rules

from conftest import run_cli

PCI = "0000:00:0b.0"
PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python")


def _have(mod: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


needs_ort = pytest.mark.skipif(not _have("onnxruntime"), reason="onnxruntime not installed")
needs_ov = pytest.mark.skipif(not _have("openvino"), reason="openvino not installed")


# -- the probe model --------------------------------------------------------------------------
def test_shipped_probe_model_is_what_the_generator_makes():
    pytest.importorskip("onnx")
    from npu_doctor.deep.probe_model import probe_model_bytes

    with open(PROBE_MODEL, "rb") as f:
        shipped = f.read()
    assert shipped == probe_model_bytes()
    assert len(shipped) < 8192


def test_probe_model_covers_the_operators_npus_drop():
    onnx = pytest.importorskip("onnx")
    m = onnx.load(PROBE_MODEL)
    onnx.checker.check_model(m, full_check=True)
    ops = [n.op_type for n in m.graph.node]
    assert {"Conv", "MatMul", "Resize", "Softmax"} <= set(ops) and tuple(ops) == PROBE_OPS


# -- check --deep on this machine (no accelerator) ----------------------------------------------
@pytest.fixture(scope="module")
def deep_report():
    proc = run_cli("check", "--deep", "--format", "json", "--fail-on", "never", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@needs_ort
def test_check_deep_runs_onnxruntime_cpu_with_placement_and_latency(deep_report):
    rec = deep_report["facts"]["deep"]["onnxruntime"]["CPUExecutionProvider"]
    assert rec["status"] == "ok" and rec["kind"] == "cpu"
    assert rec["placed_on"] == ["CPUExecutionProvider"]
    assert rec["ops_total"] == rec["ops_on_cpu"] >= 5
    ops = {n["op"] for n in rec["nodes"]}
    assert {"Resize", "MatMul", "Softmax"} <= ops and ("Conv" in ops or "FusedConv" in ops)
    assert rec["cold_ms"] > 0 and rec["warm_ms"] > 0 and rec["warm_runs"] >= 20
    assert rec["peak_rss_bytes"] > 10 << 20
    row = [p for p in deep_report["probes"] if p["id"] == "deep.onnxruntime.CPUExecutionProvider"]
    assert row and row[0]["status"] == "ok"


@needs_ov
def test_check_deep_runs_openvino_cpu_with_the_runtime_graph(deep_report):
    rec = deep_report["facts"]["deep"]["openvino"]["CPU"]
    assert rec["status"] == "ok" and rec["placed_on"] == ["CPU"] == rec["execution_devices"]
    layers = {n["op"] for n in rec["nodes"]}
    assert {"Convolution", "Interpolate", "Softmax"} <= layers
    assert rec["cold_ms"] > 0 and rec["warm_ms"] > 0


def test_check_deep_without_accelerator_raises_no_inference_on_cpu(deep_report):
    ids = {f["id"] for f in deep_report["findings"]}
    assert not ids & {"inference-on-cpu", "accelerator-counter-idle", "accelerator-slower-than-cpu"}
    # runtimes that are not installed are no_data lines with the loader's message, not failures
    for p in deep_report["probes"]:
        if p["id"].startswith("deep.") and p["status"] == "no_data" and p.get("error_kind") == "missing-tool":
            assert "No module named" in p["error"] or "Error" in p["error"]
    assert not any(f["id"] == "probe-failed" and f["subject"].startswith("deep") for f in deep_report["findings"])


def test_plain_check_and_watch_never_run_it(tmp_path):
    snap = tmp_path / "snap"
    (snap / "fs/etc").mkdir(parents=True)
    (snap / "fs/etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    proc = run_cli("check", "--snapshot", str(snap), "--format", "json", "--fail-on", "never")
    rep = json.loads(proc.stdout)
    assert "deep" not in rep["facts"] and not any(p["id"].startswith("deep") for p in rep["probes"])
    import inspect

    import npu_doctor.watch as watch
    assert "deep" not in inspect.getsource(watch)


# -- a faked accelerator: an Intel NPU in a snapshot, CPU-only runtimes here --------------------
def _npu_snapshot(tmp_path: Path, control: str = "auto") -> Path:
    snap = tmp_path / "snap"
    dev = snap / "fs/sys/devices/pci0000:00" / PCI
    (dev / "power").mkdir(parents=True)
    (snap / "fs/sys/bus/pci/drivers/intel_vpu").mkdir(parents=True)
    os.symlink("../../../bus/pci/drivers/intel_vpu", dev / "driver")
    (dev / "power/runtime_status").write_text("active\n")
    (dev / "power/control").write_text(control + "\n")
    (dev / "npu_busy_time_us").write_text("1000000\n")
    (snap / "fs/sys/class/accel").mkdir(parents=True)
    (dev / "accel/accel0").mkdir(parents=True)
    os.symlink(f"../../devices/pci0000:00/{PCI}/accel/accel0", snap / "fs/sys/class/accel/accel0")
    os.symlink("../../../" + PCI, dev / "accel/accel0/device")
    (snap / "fs/etc").mkdir(parents=True)
    (snap / "fs/etc/os-release").write_text('ID=ubuntu\nVERSION_ID="24.04"\n')
    return snap


@needs_ort
def test_cpu_only_onnxruntime_next_to_an_npu_is_inference_on_cpu_with_the_operators(tmp_path):
    host = SnapshotHost(str(_npu_snapshot(tmp_path)))
    result = run_check(host, Config.load(), deep={"timeout_s": 120})
    assert any(a.get("vendor") == "intel-npu" for a in result.facts.get("accelerators"))
    found = [f for f in result.findings if f.id == "inference-on-cpu"
             and f.subject == "CPUExecutionProvider"]
    assert len(found) == 1, [(f.id, f.subject) for f in result.findings]
    f = found[0]
    assert "whole graph ran on the CPU" in f.message and "although intel-npu is present" in f.message
    ops = next(e["value"] for e in f.evidence if e["fact"].endswith(".cpu_ops"))
    assert any(o.startswith("Resize") for o in ops) and any(o.startswith("MatMul") for o in ops)
    assert any("onnxruntime-openvino" in x["text"] for x in f.fixes)


@needs_ov
def test_a_run_meant_for_the_npu_whose_busy_counter_stays_still_is_counter_idle(tmp_path):
    """A real sandboxed OpenVINO run, accounted to the snapshot's Intel NPU: its
    npu_busy_time_us (read through the Host) cannot move, so the fallback is confirmed."""
    host = SnapshotHost(str(_npu_snapshot(tmp_path)))
    facts = run_check(host, Config.load()).facts
    plan = runner.Plan("openvino", "CPU", "accelerator", "intel-npu", True)
    rec, row = runner.run_plan(plan, host, facts, sys.executable, PROBE_MODEL)
    assert row.status == "ok" and rec["counter"]["name"] == "npu_busy_time_us"
    assert rec["counter"]["before"] == rec["counter"]["after"] == 1000000 and rec["counter_delta"] == 0
    assert rec["counter"]["source"].endswith(f"{PCI}/npu_busy_time_us")
    assert rec["warm_runs"] >= 20 and rec["power_control"] == "auto"
    facts.set("deep.openvino.CPU", rec)
    ids = {f.id for f in evaluate(load_rules(), facts, [])}
    assert "accelerator-counter-idle" in ids and "inference-on-cpu" in ids


def _facts_with(rec, accel=True):
    facts = Facts()
    if accel:
        facts.set("accelerators", [{"vendor": "nvidia", "name": "NVIDIA H200"}])
    facts.set("deep.onnxruntime.CUDAExecutionProvider", rec)
    return facts


def test_latency_rules_use_the_thresholds_in_the_rules_file():
    base = {"requested": "CUDAExecutionProvider", "kind": "accelerator", "status": "ok",
            "ops_total": 6, "ops_on_cpu": 0, "cpu_warm_ms": 2.0, "accelerator": "NVIDIA H200",
            "power_control": "auto"}
    slow = dict(base, cold_ms=900.0, warm_ms=3.0, cold_warm_ratio=300.0, cold_extra_ms=897.0,
                slowdown_vs_cpu=1.5)
    fs = evaluate(load_rules(), _facts_with(slow), [])
    ids = {f.id for f in fs}
    assert {"first-inference-slow", "accelerator-slower-than-cpu"} <= ids and "inference-on-cpu" not in ids
    first = next(f for f in fs if f.id == "first-inference-slow")
    assert any("runtime-autosuspend" in x["text"] for x in first.fixes)
    fine = dict(base, cold_ms=20.0, warm_ms=1.0, cold_warm_ratio=20.0, cold_extra_ms=19.0,
                slowdown_vs_cpu=0.5)
    assert not {f.id for f in evaluate(load_rules(), _facts_with(fine), [])} & ids


def test_rules_for_each_star_walks_runtime_then_device():
    from npu_doctor.rules import _scopes

    root = {"deep": {"a": {"X": {"v": 1}, "Y": {"v": 2}}, "b": {"Z.0": {"v": 3}}}}
    got = [(s.it_path, s.it["v"]) for s in _scopes(root, "deep.*.*")]
    assert got == [("deep.a.X", 1), ("deep.a.Y", 2), ("deep.b.Z.0", 3)]
    assert list(_scopes({}, "deep.*.*")) == []


# -- the sandbox, with real child processes ----------------------------------------------------
def _fake_python(tmp_path: Path, body: str) -> str:
    p = tmp_path / "python"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_a_hanging_runtime_is_killed_at_the_timeout(tmp_path):
    sub = spawn(_fake_python(tmp_path, "echo loading >&2; sleep 60"), ["list"], timeout_s=1.0)
    assert sub.kind == "timeout" and sub.wall_s < 10 and "loading" in sub.stderr


def test_a_crashing_runtime_is_a_failure_with_its_stderr(tmp_path):
    sub = spawn(_fake_python(tmp_path, "echo 'Illegal instruction in libfoo.so' >&2; kill -SEGV $$"), ["list"])
    assert sub.kind == "crashed" and "SIGSEGV" in sub.failure and "libfoo.so" in sub.failure


def test_the_address_space_limit_stops_a_runaway_allocation(tmp_path):
    py = _fake_python(tmp_path, f"exec {sys.executable} -c 'x = bytearray(3 << 30)'")
    sub = spawn(py, ["list"], memory_bytes=512 << 20)
    assert sub.kind in ("failed", "memory") and "memory" in sub.failure.lower()


@pytest.mark.skipif(not os.path.exists(PY38), reason="no Python 3.8 interpreter")
def test_another_interpreter_without_runtimes_gives_loader_messages(tmp_path):
    host = SnapshotHost(str(_npu_snapshot(tmp_path)))
    facts, rows = runner.deep_runs(host, Facts(), python=PY38)
    assert "deep" not in facts.data
    ort = [r for r in rows if r.id == "deep.onnxruntime"]
    assert ort and ort[0].status == "no_data" and "onnxruntime" in ort[0].error


# -- model --run on real models from PyPI wheels -----------------------------------------------
@pytest.fixture(scope="module")
def wheels(public_onnx_models):
    return public_onnx_models


@needs_ort
def test_model_run_dynamic_input_without_shape_is_one_line_naming_it(wheels):
    proc = run_cli("model", wheels["ch_PP-OCRv4_det_infer.onnx"], "--run", timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.strip()
    assert "\n" not in line and "input 'x' has dynamic shape" in line and "--shape x=" in line


@needs_ort
@needs_ov
def test_model_run_rapidocr_det_places_every_operator_on_ort_and_openvino_cpu(wheels):
    proc = run_cli("model", wheels["ch_PP-OCRv4_det_infer.onnx"], "--run", "--shape", "x=1,3,64,64",
                   "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    ort = rep["facts"]["deep"]["onnxruntime"]["CPUExecutionProvider"]
    assert ort["ops_on_cpu"] == ort["ops_total"] > 100
    assert {"Conv", "Resize", "ConvTranspose", "Sigmoid"} <= {n["op"] for n in ort["nodes"]}
    ov = rep["facts"]["deep"]["openvino"]["CPU"]
    assert ov["status"] == "ok" and {"Convolution", "Interpolate", "Deconvolution"} <= {n["op"] for n in ov["nodes"]}
    assert rep["findings"] == []


@needs_ort
def test_model_run_silero_vad_with_shapes_and_sample_rate(wheels):
    proc = run_cli("model", wheels["silero_vad_op18_ifless.onnx"], "--run", "--runtime", "onnxruntime",
                   "--shape", "input=1,512", "--shape", "state=2,1,128", "--value", "sr=16000", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "onnxruntime on CPUExecutionProvider: load" in proc.stdout and "Gemm" in proc.stdout


def test_model_run_bad_shape_and_unknown_runtime_are_one_line_errors(tmp_path):
    proc = run_cli("model", PROBE_MODEL, "--run", "--shape", "image=1,3,x")
    assert proc.returncode == 2 and "--shape 'image=1,3,x': expected NAME=1,3,224,224" in proc.stderr
    proc = run_cli("model", PROBE_MODEL, "--run", "--runtime", "nosuch")
    assert proc.returncode == 2 and "no installed runtime runs onnx models with --runtime nosuch" in proc.stderr
    assert "Traceback" not in proc.stderr
