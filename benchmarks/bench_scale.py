#!/usr/bin/env python3
"""Benchmark how rule evaluation and fact merging grow with the number of devices.

    python benchmarks/bench_scale.py [--rules 1000] [--devices 1,8,64,256] [--runs 3]

Rows, per device count N (median of --runs, in-process, after one warm-up):
- merge ms:   two probes' facts merged into one tree (an `nvidia-smi -q` style probe with N
              GPUs and ~25 leaves each, then a sysfs/PCI probe adding power/link leaves to the
              same N devices by PCI address), as `probe_runner` does
- rules ms:   `rules.evaluate` of the shipped rules over that tree
- +R rules ms: the same with R synthetic per-device and global rules added (vendor, numeric,
              version, `in` and `matches` conditions; a few match so findings are rendered)
- load ms:    loading the shipped + synthetic rules files (once, not per N)

Goals (issue 14): 1 000 rules x 64 devices <= 0.2 s; time linear in N.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from npu_doctor.facts import Facts  # noqa: E402
from npu_doctor.rules import evaluate, load_rules  # noqa: E402

VENDORS = ["nvidia", "ascend", "rknpu", "hailo", "intel-npu", "amd-xdna", "coral", "jetson"]


def probe_facts(n: int):
    """(smi-like facts, sysfs-like facts) for n GPUs."""
    smi, pci = Facts(), Facts()
    smi.set("drivers.nvidia.version", "550.54.15", "$ nvidia-smi -q")
    smi.set("drivers.nvidia.cuda_version", "12.4", "$ nvidia-smi -q")
    for i in range(n):
        addr = f"0000:{(i >> 5) + 1:02x}:{i & 31:02x}.0"
        base = f"accelerators[{i}]"
        rec = {"vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3", "index": i, "pci_address": addr,
               "driver": {"name": "nvidia", "version": "550.54.15"},
               "firmware": {"version": "96.00.99.00.01"}, "temperature_c": 40 + i % 50,
               "utilization_percent": i % 100, "power_w": 100.0 + i, "health": "ok",
               "freq": {"cur_hz": 1_500_000_000, "max_hz": 1_980_000_000},
               "memory": {"total_bytes": 80 << 30, "used_bytes": i << 20},
               "ecc": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
               "thermal": {"slowdown_c": 92, "shutdown_c": 95, "max_operating_c": 87},
               "clocks_event_reasons": {"hw_slowdown": "Not Active", "sw_thermal": "Not Active"},
               "pcie": {"gen_cur": 5, "gen_max": 5, "width_cur": 16, "width_max": 16}}
        smi.set(base, rec, "$ nvidia-smi -q")
        pci.set(f"{base}.pci_address", addr, f"/sys/bus/pci/devices/{addr}")
        pci.set(f"{base}.vendor", "nvidia")
        pci.set(f"{base}.sysfs", f"/sys/bus/pci/devices/{addr}", f"/sys/bus/pci/devices/{addr}")
        pci.set(f"{base}.power.control", "auto" if i % 7 == 0 else "on",
                f"/sys/bus/pci/devices/{addr}/power/control")
        pci.set(f"{base}.power.runtime_status", "active", f"/sys/bus/pci/devices/{addr}/power/runtime_status")
    return smi, pci


def synthetic_rules(n: int) -> str:
    out = []
    for i in range(n):
        v = VENDORS[i % len(VENDORS)]
        kind = i % 5
        out.append(f'[[rule]]\nid = "synthetic-rule-{i}"\nseverity = "warning"\n'
                   f'title = "synthetic {i}"\nexplain = "bench"\n')
        if kind == 0:
            when = (f'{{fact = "it.vendor", eq = "{v}"}}, {{fact = "it.temperature_c", ge = {80 + i % 15}}}')
        elif kind == 1:
            when = (f'{{fact = "it.vendor", in = ["{v}", "{VENDORS[(i + 3) % 8]}"]}}, '
                    f'{{fact = "it.driver.version", version_lt = "{500 + i % 60}.0"}}')
        elif kind == 2:
            when = (f'{{fact = "drivers.nvidia.version", version_ge = "{400 + i % 200}"}}, '
                    f'{{fact = "it.vendor", eq = "{v}"}}, {{fact = "it.power_w", gt = {300 + i}}}')
        elif kind == 3:
            when = (f'{{fact = "it.vendor", eq = "{v}"}}, {{fact = "it.name", matches = "H{i % 300}"}}')
        else:
            when = (f'{{fact = "it.vendor", eq = "{v}"}}, '
                    f'{{any = [{{fact = "it.health", ne = "ok"}}, '
                    f'{{fact = "it.utilization_percent", lt = {i % 3}}}]}}')
        out.append(f'for_each = "accelerators"\nwhen = [{when}]\n'
                   f'subject = "{{it.name}} {{it.pci_address}}"\n'
                   f'message = "rule {i}: {{it.temperature_c}} C"\nevidence = ["it.temperature_c"]\n\n')
    return "".join(out)


def timed(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--devices", default="1,8,64,256")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="npu-doctor-bench-rules-")
    try:
        Path(tmp, "synthetic.toml").write_text(synthetic_rules(args.rules))
        t0 = time.perf_counter()
        shipped = load_rules()
        t1 = time.perf_counter()
        more = load_rules([tmp])
        t2 = time.perf_counter()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load: shipped {len(shipped.rules)} rules {1000 * (t1 - t0):.0f} ms; "
          f"+{args.rules} synthetic {1000 * (t2 - t1):.0f} ms")
    print(f"{'devices':>7} {'merge ms':>9} {'rules ms':>9} {'+R rules ms':>12} {'findings':>9}")
    for n in [int(x) for x in args.devices.split(",")]:
        smi, pci = probe_facts(n)
        holder = {}

        def merge():
            f = Facts()
            f.merge(smi)
            f.merge(pci)
            holder["f"] = f

        tm = timed(merge, args.runs)
        facts = holder["f"]
        assert len(facts.data["accelerators"]) == n, len(facts.data["accelerators"])
        tr = timed(lambda: evaluate(shipped, facts, []), args.runs)
        found = []
        tx = timed(lambda: found.append(len(evaluate(more, facts, []))), args.runs)
        print(f"{n:>7} {tm:>9.1f} {tr:>9.1f} {tx:>12.1f} {found[-1]:>9}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())
