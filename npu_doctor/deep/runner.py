"""Active runs: which runtime/device pairs to try, one sandboxed worker per pair, and the
`deep.<runtime>.<device>` facts they give.

One record per run (ARCHITECTURE.md, facts `deep.*`):
  requested        the device or execution provider asked for (`CUDAExecutionProvider`, `NPU`)
  kind             cpu | accelerator; vendor: the accelerator vendor it belongs to, when known
  status           ok | failed (error, stage: import|load|input|run|timeout|memory|crashed)
  placed_on        devices/EPs that ran at least one operator, in graph order
  ops_total        operators the runtime executed (its own internal copies/reorders left out)
  ops_on_cpu       how many of them ran on the CPU; cpu_ops: "OpType (node)" of each
  nodes            every executed operator: node, op, device
  load_ms, cold_ms, warm_ms   session creation / first call / median later call, milliseconds
  cold_warm_ratio, cold_extra_ms   cold_ms / warm_ms and cold_ms - warm_ms
  cpu_warm_ms, slowdown_vs_cpu     the same runtime's CPU run, and warm_ms / cpu_warm_ms
  counter, counter_delta           accelerator busy counter (counters.py) and its change
  runtime_offers_accelerator       false when the runtime could only run on the CPU here
  accelerators_present             names (else vendors) of the host's accelerators, if any
  peak_rss_bytes, wall_s, stderr   of the subprocess
Device names are fact-path keys: a '.' becomes '_' (OpenVINO `GPU.0` -> `GPU_0`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..facts import Facts
from ..host import Host
from ..probes import ProbeResult
from .counters import Sampler, counter_for
from .probe_model import PROBE_MODEL
from .sandbox import DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT_S, app_interpreter, spawn
from ..lazyregex import lazy

CPU_DEVICES = {"CPUExecutionProvider", "CPU", "cpu", "XnnpackExecutionProvider",
               "DnnlExecutionProvider", "ACLExecutionProvider", "ArmNNExecutionProvider"}
#: runtime device -> accelerators[].vendor whose busy counter a run on it should move
DEVICE_VENDOR = {
    "CUDAExecutionProvider": "nvidia", "TensorrtExecutionProvider": "nvidia", "cuda": "nvidia",
    "CANNExecutionProvider": "ascend", "npu": "ascend", "VitisAIExecutionProvider": "amd-xdna",
    "RknpuExecutionProvider": "rknpu", "NPU": "intel-npu", "edgetpu": "coral",
}
#: devices that reserve huge address space at init: RSS watchdog only, no RLIMIT_AS
NO_AS_LIMIT = {"CUDAExecutionProvider", "TensorrtExecutionProvider", "ROCMExecutionProvider",
               "MIGraphXExecutionProvider", "cuda", "npu", "CANNExecutionProvider", "GPU"}
RUNNABLE = ("onnxruntime", "openvino", "torch")   # with the built-in probe model
_ANSI_RE = lazy(r"\x1b\[[0-9;]*m")
WARM_RUNS = 20
ACCEL_MIN_WARM_S = 1.0   # long enough for utilisation gauges sampled over ~1/6-1 s to see it


@dataclass
class Plan:
    runtime: str
    device: str
    kind: str
    vendor: Optional[str]
    offers_accelerator: bool


def device_key(device: str) -> str:
    return device.replace(".", "_")


def discover(python: str, timeout_s: float = 60.0) -> Tuple[Dict[str, Any], Optional[str]]:
    """({runtime: {version, devices} | {error}}, failure) from `worker.py list`."""
    sub = spawn(python, ["list"], timeout_s=timeout_s)
    if sub.result is None:
        return {}, sub.failure
    return sub.result.get("runtimes", {}), None


def plan_runs(runtimes: Dict[str, Any], model_format: str = "onnx",
              runtime: Optional[str] = None, device: Optional[str] = None) -> List[Plan]:
    """Every (runtime, device) pair to run, CPU first in each runtime (the reference)."""
    usable = {"onnx": ("onnxruntime", "openvino"), "probe": RUNNABLE,
              "openvino-ir": ("openvino",), "tflite": ("tflite",)}[model_format]
    plans = []
    for name, info in runtimes.items():
        if name not in usable or "error" in info or (runtime and name != runtime):
            continue
        devs = list(info.get("devices") or [])
        offers = any(d.split(".")[0] not in CPU_DEVICES for d in devs)
        for d in sorted(devs, key=lambda d: d not in CPU_DEVICES):
            if device and d != device:
                continue
            kind = "cpu" if d.split(".")[0] in CPU_DEVICES else "accelerator"
            plans.append(Plan(name, d, kind, DEVICE_VENDOR.get(d.split(".")[0]), offers))
    return plans


def run_plan(plan: Plan, host: Host, facts: Facts, python: str, model: str,
             shapes: Sequence[str] = (), values: Sequence[str] = (),
             timeout_s: float = DEFAULT_TIMEOUT_S,
             memory_bytes: int = DEFAULT_MEMORY_BYTES) -> Tuple[Dict[str, Any], ProbeResult]:
    """Run one plan in the sandbox; (record, probe row)."""
    args = ["run", "--runtime", plan.runtime, "--device", plan.device, "--model", model,
            "--warm", str(WARM_RUNS)]
    if plan.kind == "accelerator":
        args += ["--min-warm-s", str(ACCEL_MIN_WARM_S)]
    for s in shapes:
        args += ["--shape", s]
    for v in values:
        args += ["--value", v]
    accels = facts.get("accelerators") or []
    counter = counter_for(host, accels, plan.vendor) if plan.kind == "accelerator" else None
    with Sampler(counter) as sampler:
        sub = spawn(python, args, timeout_s=timeout_s, memory_bytes=memory_bytes,
                    limit_address_space=plan.device.split(".")[0] not in NO_AS_LIMIT)
    res = sub.result or {}
    rec: Dict[str, Any] = {"requested": plan.device, "kind": plan.kind,
                     "runtime_offers_accelerator": plan.offers_accelerator,
                     "model": model, "python": python, "wall_s": round(sub.wall_s, 3)}
    if plan.vendor is not None:
        rec["vendor"] = plan.vendor
    if sub.peak_rss_bytes is not None:
        rec["peak_rss_bytes"] = sub.peak_rss_bytes
    for k in ("version", "load_ms", "cold_ms", "warm_ms", "warm_min_ms", "warm_runs",
              "warm_total_ms", "registered", "execution_devices", "placement_source",
              "placement_error"):
        if res.get(k) is not None:
            rec[k] = res[k]
    stderr = _ANSI_RE.sub("", sub.stderr).strip()
    if stderr:
        rec["stderr"] = stderr
    present = [a.get("name") or a.get("vendor") for a in accels if a.get("name") or a.get("vendor")]
    if present:
        rec["accelerators_present"] = present
    accel = next((a for a in accels if plan.vendor and a.get("vendor") == plan.vendor), None)
    if accel is not None:
        rec["accelerator"] = accel.get("name") or accel.get("vendor")
        if (accel.get("power") or {}).get("control"):
            rec["power_control"] = accel["power"]["control"]
    row_id = f"deep.{plan.runtime}.{device_key(plan.device)}"
    error = sub.failure or res.get("error")
    if error:
        rec.update({"status": "failed", "error": error,
                    "stage": sub.kind if sub.failure else res.get("stage", "run")})
        kind = {"timeout": "timeout"}.get(sub.kind or "", "failed")
        return rec, ProbeResult(row_id, "error", error, kind, sub.wall_s, area="deep")
    rec["status"] = "ok"
    _placement(rec, res.get("nodes"))
    if rec.get("cold_ms") is not None and rec.get("warm_ms"):
        rec["cold_warm_ratio"] = round(rec["cold_ms"] / rec["warm_ms"], 2)
        rec["cold_extra_ms"] = round(rec["cold_ms"] - rec["warm_ms"], 3)
    c = sampler.record()
    if c is not None:
        rec["counter"] = c
        rec["counter_delta"] = c["delta"]
    return rec, ProbeResult(row_id, "ok", None, None, sub.wall_s, area="deep")


def _placement(rec: Dict[str, Any], nodes: Optional[List[Dict[str, Any]]]) -> None:
    if nodes is None:
        if rec.get("execution_devices"):
            rec["placed_on"] = rec["execution_devices"]
        return
    ops = [n for n in nodes if not n.get("internal")]
    placed: List[str] = []
    for n in ops:
        if n["device"] not in placed:
            placed.append(n["device"])
    cpu = [n for n in ops if str(n["device"]).split(".")[0] in CPU_DEVICES]
    rec.update({"placed_on": placed, "ops_total": len(ops), "ops_on_cpu": len(cpu),
                "cpu_ops": [f"{n['op']} ({n['node']})" for n in cpu],
                "nodes": [{k: n[k] for k in ("node", "op", "device", "internal") if n.get(k) is not None
                     and (k != "internal" or n[k])} for n in nodes]})


def _compare_with_cpu(records: Dict[str, Dict[str, Dict[str, Any]]]) -> None:
    for devices in records.values():
        cpu = next((r for r in devices.values() if r["kind"] == "cpu" and r.get("warm_ms")), None)
        if cpu is None:
            continue
        for r in devices.values():
            if r["kind"] == "accelerator" and r.get("warm_ms") is not None:
                r["cpu_warm_ms"] = cpu["warm_ms"]
                r["slowdown_vs_cpu"] = round(r["warm_ms"] / cpu["warm_ms"], 3)


def deep_runs(host: Host, facts: Facts, python: Optional[str] = None, model: Optional[str] = None,
              model_format: str = "probe", runtime: Optional[str] = None,
              device: Optional[str] = None, shapes: Sequence[str] = (), values: Sequence[str] = (),
              timeout_s: float = DEFAULT_TIMEOUT_S, memory_bytes: int = DEFAULT_MEMORY_BYTES,
              progress: Optional[Callable[[str], None]] = None) -> Tuple[Facts, List[ProbeResult]]:
    """Discover the runtimes of `python`, run each (runtime, device) and return the `deep.*`
    facts and one probe row per run (plus a no_data row per runtime that did not load)."""
    python = app_interpreter(python)
    model = model or PROBE_MODEL
    out, rows = Facts(), []
    start = time.monotonic()
    runtimes, failure = discover(python, timeout_s)
    if failure:
        rows.append(ProbeResult("deep", "error", f"{python}: {failure}", "failed",
                          time.monotonic() - start, area="deep"))
        return out, rows
    usable = {"probe": ("onnxruntime", "openvino", "torch", "tflite", "rknn_toolkit_lite2", "hailort"),
              "onnx": ("onnxruntime", "openvino"), "openvino-ir": ("openvino",),
              "tflite": ("tflite",)}[model_format]
    for name, info in runtimes.items():
        if name not in usable or (runtime and name != runtime):
            continue
        if "error" in info:
            rows.append(ProbeResult(f"deep.{name}", "no_data", info["error"], "missing-tool", 0.0, area="deep"))
        elif model_format == "probe" and name not in RUNNABLE:
            note = "; ".join(x for x in (info.get("note"), info.get("edgetpu_error")) if x)
            rows.append(ProbeResult(f"deep.{name}", "no_data", note or None, None, 0.0, area="deep"))
    records: Dict[str, Dict[str, Dict[str, Any]]] = {}
    plans = plan_runs(runtimes, "probe" if model_format == "probe" else model_format, runtime, device)
    for plan in plans:
        if progress:
            progress(f"deep run: {plan.runtime} on {plan.device}")
        rec, row = run_plan(plan, host, facts, python, model, shapes, values, timeout_s, memory_bytes)
        records.setdefault(plan.runtime, {})[device_key(plan.device)] = rec
        rows.append(row)
        if rec.get("stage") == "input":
            break   # the model's inputs are the same for every runtime: one line is the answer
    _compare_with_cpu(records)
    for name, devices in records.items():
        for key, rec in devices.items():
            out.set(f"deep.{name}.{key}", rec, source=rec.get("placement_source") or f"{python} worker.py")
    return out, rows
