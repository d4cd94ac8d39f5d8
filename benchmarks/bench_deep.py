#!/usr/bin/env python3
"""Benchmark `npu-doctor check --deep`: what the active runs cost over a plain check, and over
the runtime's own work.

    python benchmarks/bench_deep.py [--repeat 3]

Rows (best of --repeat, wall time, this host):
- check:         `python -m npu_doctor check --format json` (no --deep), in a subprocess
- check --deep:  the same with --deep
Per deep run (from the last --deep report):
- runtime work:  load_ms + cold_ms + warm_total_ms (session creation/compile, first and warm
                 inferences: what the runtime itself spent)
- subprocess:    wall_s of the sandboxed worker (interpreter start, imports, discovery of
                 inputs, the placement session, JSON)
- overhead:      subprocess / runtime work
- peak RSS:      the worker's peak resident memory (its own ru_maxrss and the parent's watchdog)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def timed_check(extra, python=None):
    argv = [python or sys.executable, "-m", "npu_doctor", "check", "--format", "json",
            "--fail-on", "never"] + extra
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"check failed: {proc.stderr.strip()}")
    return wall, json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    plain = min(timed_check([])[0] for _ in range(args.repeat))
    deep_runs = [timed_check(["--deep"]) for _ in range(args.repeat)]
    deep = min(w for w, _ in deep_runs)
    report = deep_runs[-1][1]
    print(f"check         {plain:7.2f} s")
    print(f"check --deep  {deep:7.2f} s   (+{deep - plain:.2f} s for the active runs)")
    print()
    print(f"{'run':<38} {'runtime work':>12} {'subprocess':>11} {'overhead':>9} {'peak RSS':>9}  "
          f"{'load':>7} {'cold':>7} {'warm':>7}")
    total_work = total_wall = 0.0
    for runtime, devices in sorted(report["facts"].get("deep", {}).items()):
        for key, rec in devices.items():
            name = f"{runtime}/{rec.get('requested', key)}"
            if rec.get("status") != "ok":
                print(f"{name:<38} failed: {rec.get('error')}")
                continue
            work_ms = rec["load_ms"] + rec["cold_ms"] + rec["warm_total_ms"]
            wall_ms = rec["wall_s"] * 1000.0
            total_work += work_ms
            total_wall += wall_ms
            print(f"{name:<38} {work_ms:9.1f} ms {wall_ms:8.0f} ms {wall_ms / work_ms:8.1f}x "
                  f"{rec.get('peak_rss_bytes', 0) / 2 ** 20:6.0f} MiB  {rec['load_ms']:5.1f}ms "
                  f"{rec['cold_ms']:5.1f}ms {rec['warm_ms']:5.2f}ms")
    if total_work:
        print(f"{'all runs':<38} {total_work:9.1f} ms {total_wall:8.0f} ms {total_wall / total_work:8.1f}x")
    print(f"\n(--deep adds {deep - plain:.2f} s; the runtimes' own work is {total_work / 1000:.2f} s "
          f"of it: ratio {(deep - plain) / max(total_work / 1000, 1e-9):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
