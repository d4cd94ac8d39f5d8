#!/usr/bin/env python3
"""A large `--log`: the shared streamed pass (collectors.logscan) against reading it whole.

    python benchmarks/bench_logs.py [--mb 100] [--pure]

Builds a log of ordinary kernel/runtime noise with one catalog example every ~1000 lines and an
ONNX Runtime CPU-fallback block and an RKNN version line at the very end, then in a fresh
process runs `scan_logs` (signatures + catalogs + fallback + RKNN parsers, one pass) and
reports MB/s, peak RSS (getrusage) and whether the last lines were found. The catalogs' pattern
analysis (needle sets, remembered between runs by npu_doctor.regexmemo) is done before the
clock starts. `--pure`: without pyahocorasick (the str.find needle search).
Goals (issue 14): every line read, >= 50 MB/s, peak RSS <= 60 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

TAIL = ("2024-03-04 10:00:00.000 [I:onnxruntime:, session_state.cc:1136 VerifyEachNodeIsAssignedToAnEp] "
        "Node placements\n"
        "2024-03-04 10:00:00.000 [I:onnxruntime:, session_state.cc:1145 VerifyEachNodeIsAssignedToAnEp]  "
        "Node(s) placed on [CPUExecutionProvider]. Number of nodes: 2\n"
        "2024-03-04 10:00:00.000 [V:onnxruntime:, session_state.cc:1147 VerifyEachNodeIsAssignedToAnEp]   "
        "Gather (Gather_1067)\n"
        "2024-03-04 10:00:00.000 [V:onnxruntime:, session_state.cc:1147 VerifyEachNodeIsAssignedToAnEp]   "
        "Shape (Shape_2)\n"
        "I RKNN: [10:00:00.000] RKNN Runtime Information, librknnrt version: 1.6.0 (9a7b5d24c@2023-12-13T17:31:11)\n")

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
if sys.argv[3] == "pure":
    import npu_doctor.catalog.needles as needles
    needles._ahocorasick = None
    needles._HS_STATE[:] = [None]
from npu_doctor.catalog import load_catalogs
from npu_doctor.probes import load_signatures, load_specs
from npu_doctor.host import LiveHost
from npu_doctor.collectors.logscan import scan_logs
load_specs(); sigs = load_signatures([]); cs = load_catalogs()
cs.match_text("", "warm-up", ("kernel", "runtime"), "runtime")  # pattern analysis (remembered between runs)
t0, c0 = time.perf_counter(), time.process_time()
scans = scan_logs(LiveHost(extra_logs=[sys.argv[1]]), sigs, cs)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
s = scans[0]
print(json.dumps({"s": dt, "cpu": cpu, "lines": s.lines, "sig": len(s.signature_events), "cat": len(s.catalog_events),
                  "fallback": len(s.fallback_entries), "rknn": bool(s.rknn.get("runtime")),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--pure", action="store_true", help="without pyahocorasick")
    args = ap.parse_args()
    import bench_catalogs as bc

    from npu_doctor.catalog import load_catalogs

    examples = [x for e in load_catalogs().entries() for x in e.examples]
    tmp = Path(tempfile.mkdtemp(prefix="npu-doctor-bench-logs-"))
    log = tmp / "big.log"
    random.seed(1)
    bc.build_log(log, args.mb, examples)
    with open(log, "a") as f:
        f.write(TAIL)
    size = log.stat().st_size / 1e6
    out = subprocess.run([sys.executable, "-c", CHILD, str(log), str(REPO),
                          "pure" if args.pure else "fast"], capture_output=True, text=True)
    log.unlink()
    tmp.rmdir()
    if out.returncode:
        print(out.stderr)
        return 1
    r = json.loads(out.stdout)
    # CPU seconds too: on a shared machine the wall clock counts other processes' turns
    print(f"log {size:.0f} MB, {r['lines']} lines: {size / r['s']:.1f} MB/s ({r['s']:.2f} s; "
          f"{size / r['cpu']:.1f} MB/s of CPU time), "
          f"peak RSS {r['rss_mb']:.0f} MB; events: {r['sig']} signature, {r['cat']} catalog; "
          f"fallback entries at the end: {r['fallback']}; RKNN version at the end: {r['rknn']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
