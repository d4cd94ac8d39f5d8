"""Text for deep runs: one summary line for the check report, and one block per run for
`model --run`."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple


def runs(facts: Dict[str, Any]) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(runtime, device key, record) for every deep run in a facts tree."""
    for runtime, devices in sorted((facts.get("deep") or {}).items()):
        for key, rec in devices.items():
            if isinstance(rec, dict):
                yield runtime, key, rec


def _ms(v: Any) -> str:
    return "?" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.0f}")


def summary(facts: Dict[str, Any]) -> str:
    """`onnxruntime/CPUExecutionProvider 3.4 ms (first 78), openvino/CPU failed`."""
    parts = []
    for runtime, key, rec in runs(facts):
        if rec.get("status") != "ok":
            parts.append(f"{runtime}/{rec.get('requested', key)} failed")
            continue
        where = ""
        if rec.get("kind") == "accelerator" and rec.get("ops_on_cpu"):
            where = f", {rec['ops_on_cpu']}/{rec.get('ops_total')} ops on CPU"
        parts.append(f"{runtime}/{rec.get('requested', key)} {_ms(rec.get('warm_ms'))} ms "
                     f"(first {_ms(rec.get('cold_ms'))}{where})")
    return "; ".join(parts) or "no runtime could be run"


def run_lines(runtime: str, rec: Dict[str, Any], show_nodes: bool = True) -> List[str]:
    """A block for one run: status, latencies, placement per operator."""
    head = f"  {runtime} on {rec.get('requested')}"
    if rec.get("status") != "ok":
        return [f"{head}: failed ({rec.get('stage')}): {rec.get('error')}"]
    lines = [f"{head}: load {_ms(rec.get('load_ms'))} ms, first {_ms(rec.get('cold_ms'))} ms, "
             f"then {_ms(rec.get('warm_ms'))} ms (median of {rec.get('warm_runs')}); placed on "
             f"{', '.join(rec.get('placed_on') or ['?'])}; {rec.get('ops_on_cpu', '?')} of "
             f"{rec.get('ops_total', '?')} operators on the CPU; peak memory "
             f"{(rec.get('peak_rss_bytes') or 0) / 2 ** 20:.0f} MiB"]
    if rec.get("counter"):
        c = rec["counter"]
        lines.append(f"    counter {c['name']}: {c.get('before')} -> {c.get('after')} {c.get('unit')} "
                     f"(delta {c.get('delta')})")
    if show_nodes:
        by_op: Dict[Tuple[str, str], int] = {}
        for n in rec.get("nodes") or []:
            if n.get("internal"):   # the runtime's own layout/copy nodes, not the model's
                continue
            by_op[(n["op"], n["device"])] = by_op.get((n["op"], n["device"]), 0) + 1
        for (op, dev), count in sorted(by_op.items(), key=lambda x: (x[0][1], -x[1], x[0][0])):
            lines.append(f"    {op:<24} x{count:<4} {dev}")
    return lines
