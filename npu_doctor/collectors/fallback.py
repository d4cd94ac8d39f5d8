"""CPU fallback that runtime and compiler logs state: `fallback.*` facts.

Runs the parsers of `npu_doctor.parsers.fallback` over every runtime log the host has
(a snapshot's `logs/`, or the files given with `--log FILE`) and sets:

- `fallback.ops`: distinct operator types the logs put on the CPU, in order of first
  appearance (absent when no log names one, e.g. a Vitis AI operator count);
- `fallback.count`: the number of CPU-placed operators the logs state, summed over logs (a
  stated block total wins over the operators listed under it);
- `fallback.logs[]`: one record per (log, runtime): {log, runtime, runtime_name, evidence
  ("placement", or "hint" for ONNX Runtime's unquantified "Some nodes were not assigned"
  warning alone), ops, count, op_counts ("MUL ×1, SPLIT ×1"), lines ("3, 7-8"), at
  ("lines 3, 7-8"), summary (one sentence for the message), targets, runtime_missing_kernel};
- `fallback.by_runtime.<runtime>`: {ops, count, logs};
- `fallback.sources[]`: every statement used, {source: "logs/x.log:7", runtime, kind, op,
  count, target} (at most MAX_SOURCES).
Each fact's provenance is `LOG:LINES`.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..parsers.fallback import RUNTIME_NAMES, aggregate, line_ranges, parse_fallback_logs  # noqa: F401
from ..probes import NoData, ProbeContext
from ..registry import collector
from .logscan import scan_logs

MAX_SOURCES = 200
MAX_OPS_IN_SUMMARY = 12


def _op_counts_text(op_counts: Dict[str, int]) -> str:
    items = list(op_counts.items())
    # ×0: the log names the operator type but not how many nodes (a GPU or NNAPI delegate)
    text = ", ".join(f"{op} ×{n}" if n else op for op, n in items[:MAX_OPS_IN_SUMMARY])
    if len(items) > MAX_OPS_IN_SUMMARY:
        text += f", and {len(items) - MAX_OPS_IN_SUMMARY} more types"
    return text


def _summary(runtime: str, agg: Dict[str, Any], entries: List[Dict[str, Any]]) -> str:
    count, op_counts = agg["count"], agg["op_counts"]
    listed = sum(op_counts.values())
    named = _op_counts_text(op_counts)
    noun = "operator" if count == 1 else "operators"
    # TensorRT moves layers off the DLA to the GPU, every other runtime to the CPU
    where = "on the GPU instead of the DLA" if entries and all(
        e.get("target") == "GPU" for e in entries) else "on the CPU"
    if count is not None and op_counts and listed == count:
        text = f"{count} {noun} {where}: {named}"
    elif count is not None and op_counts:
        text = f"{count} {noun} {where} (the log names {named})"
    elif count is not None:
        text = f"{count} {noun} {where} (the log does not name them)"
    elif op_counts:
        text = f"operators {where}: {named} (the log names the types, not how many nodes)"
    elif any(e.get("unnamed") for e in entries):
        text = f"operators {where} (the log neither names nor counts them)"
    else:
        text = f"every node {where} (the log states no count)"
    statuses: List[str] = []
    for e in entries:
        st = e.get("status")
        if st and st not in statuses:
            statuses.append(st)
    if statuses:
        text += "; compiler status: " + "; ".join(statuses[:3])
    for e in entries:
        cols = e.get("columns")
        if cols:
            other = ", ".join(f"{k} {v}" for k, v in cols.items() if k != "CPU")
            if other:
                text += f"; other columns: {other}"
            break
    missing = [e["op"] for e in entries if e.get("runtime_missing_kernel") and e.get("op")]
    if missing:
        text += ("; this runtime has no CPU kernel for " + ", ".join(dict.fromkeys(missing))
                 + ", so the fallback itself fails")
    reasons = [e["reason"] for e in entries if e.get("reason")]
    if reasons:
        text += "; reason: " + reasons[0][:160]
    return text


def _at(nums: List[int]) -> str:
    """`line 9` / `lines 1-3, 5`."""
    nums = sorted(set(nums))
    return ("line " if len(nums) == 1 else "lines ") + line_ranges(nums)


def build_records(name: str, entries: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per-runtime records of one log (see the module docstring)."""
    counted = [e for e in entries if e["kind"] in ("op", "total")]
    records: List[Dict[str, Any]] = []
    order: List[str] = []
    by_rt: Dict[str, List[Dict[str, Any]]] = {}
    for e in sorted(counted, key=lambda x: x["line_no"]):
        if e["runtime"] not in by_rt:
            order.append(e["runtime"])
            by_rt[e["runtime"]] = []
        by_rt[e["runtime"]].append(e)
    for rt in order:
        es = by_rt[rt]
        agg = aggregate(es)
        rec: Dict[str, Any] = {
            "log": name, "runtime": rt, "runtime_name": RUNTIME_NAMES.get(rt, rt),
            "evidence": "placement", "lines": line_ranges(agg["lines"]),
            "at": _at(agg["lines"]),
            "targets": list(dict.fromkeys(e["target"] for e in es)),
            "summary": _summary(rt, agg, es),
        }
        if agg["ops"]:
            rec["ops"] = agg["ops"]
            rec["op_counts"] = _op_counts_text(agg["op_counts"])
        if agg["count"] is not None:
            rec["count"] = agg["count"]
        if any(e.get("runtime_missing_kernel") for e in es):
            rec["runtime_missing_kernel"] = True
        records.append(rec)
    if not records:
        hints = [e for e in entries if e["kind"] == "hint"]
        if hints:
            h = hints[0]
            records.append({
                "log": name, "runtime": h["runtime"],
                "runtime_name": RUNTIME_NAMES.get(h["runtime"], h["runtime"]),
                "evidence": "hint", "lines": line_ranges(x["line_no"] for x in hints),
                "at": _at([x["line_no"] for x in hints]),
                "targets": [h["target"]],
                "summary": "some nodes were not assigned to the preferred execution provider "
                           "(the log neither names nor counts them)",
            })
    return records


@collector("fallback_logs")
def collect_fallback(ctx: ProbeContext) -> None:
    logs = scan_logs(ctx.host, ctx.options.get("signatures", []), ctx.options.get("catalogs"))
    if not logs:
        raise NoData("no runtime logs given (--log FILE)")
    records: List[Dict[str, Any]] = []
    sources: List[Dict[str, Any]] = []
    ops: List[str] = []
    ops_src: List[str] = []
    total = None
    total_src: List[str] = []
    by_runtime: Dict[str, Dict[str, Any]] = {}
    for scan in logs:
        name, entries = scan.name, scan.fallback_entries
        recs = build_records(name, entries)
        if not recs:
            continue
        for e in entries:
            if e["kind"] not in ("op", "total") or len(sources) >= MAX_SOURCES:
                continue
            src = {"source": f"{name}:{e['line_no']}", "runtime": e["runtime"], "kind": e["kind"],
                   "target": e["target"]}
            if e.get("op"):
                src["op"] = e["op"]
            if e.get("count") is not None:
                src["count"] = e["count"]
            sources.append(src)
        for rec in recs:
            records.append(rec)
            where = f"{name}:{rec['lines']}"
            if rec["evidence"] != "placement":
                continue
            rt = by_runtime.setdefault(rec["runtime"], {"ops": [], "logs": []})
            if name not in rt["logs"]:
                rt["logs"].append(name)
            for op in rec.get("ops", []):
                if op not in ops:
                    ops.append(op)
                    if where not in ops_src:
                        ops_src.append(where)
                if op not in rt["ops"]:
                    rt["ops"].append(op)
            if rec.get("count") is not None:
                total = (total or 0) + rec["count"]
                rt["count"] = rt.get("count", 0) + rec["count"]
                total_src.append(where)
    if not records:
        raise NoData(f"no CPU-fallback statements in {len(logs)} runtime log(s)")
    if ops:
        ctx.facts.set("fallback.ops", ops, "; ".join(ops_src))
    if total is not None:
        ctx.facts.set("fallback.count", total, "; ".join(total_src))
    for i, rec in enumerate(records):
        ctx.facts.set(f"fallback.logs[{i}]", rec, f"{rec['log']}:{rec['lines']}")
    for rt, info in by_runtime.items():
        if not info["ops"]:
            del info["ops"]
        ctx.facts.set(f"fallback.by_runtime.{rt}", info, "; ".join(info["logs"]))
    for i, src in enumerate(sources):
        ctx.facts.set(f"fallback.sources[{i}]", src, src["source"])
