#!/usr/bin/env python3
"""Benchmark `npu-doctor watch`: CPU % of one core and RSS over a run, against a baseline.

    python benchmarks/bench_watch.py [--duration 60] [--interval 1] [--snapshot DIR]

The baseline, measured in the same run, is an idle Python process that imported the same
libraries (click, psutil, packaging) and sleeps: the floor any Python daemon pays.
Goals (issue 6): watch <= 1 % of one core and <= 40 MB RSS at a 1 s interval.
By default it watches this host; --snapshot watches a board snapshot (a copy of a case).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

import psutil


def measure(argv, duration):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p = psutil.Process(proc.pid)
    time.sleep(min(3.0, duration / 4))  # start-up (imports, first sample) is not steady state
    c0 = p.cpu_times()
    t0 = time.monotonic()
    rss = 0
    while time.monotonic() - t0 < duration:
        time.sleep(0.5)
        rss = max(rss, p.memory_info().rss)
    c1 = p.cpu_times()
    wall = time.monotonic() - t0
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
    cpu = (c1.user - c0.user + c1.system - c0.system) / wall * 100
    return cpu, rss / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--snapshot")
    args = ap.parse_args()
    py = sys.executable
    base = measure([py, "-c", "import click, psutil, packaging, time; time.sleep(10**6)"], args.duration)
    cmd = [py, "-m", "npu_doctor", "watch", "--interval", str(args.interval), "--check-interval", "300"]
    if args.snapshot:
        cmd += ["--snapshot", args.snapshot]
    env_note = f"snapshot {args.snapshot}" if args.snapshot else "this host"
    watch = measure(cmd, args.duration)
    print(f"watch of {env_note}, interval {args.interval:g} s, {args.duration:g} s measured")
    print(f"{'':<10} {'CPU % core':>10} {'RSS MB':>8}")
    print(f"{'baseline':<10} {base[0]:>10.2f} {base[1]:>8.1f}")
    print(f"{'watch':<10} {watch[0]:>10.2f} {watch[1]:>8.1f}")
    print(f"RSS watch / baseline = {watch[1] / base[1]:.2f}x; CPU goal <= 1 %, RSS goal <= 40 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
