#!/usr/bin/env python3
"""Log classification throughput: the catalogs over a large kernel/runtime log, against
`grep -P` with the same patterns, in the same run (a ratio).

    python benchmarks/bench_catalogs.py [--mb 100] [--runs 3]

The log is built from ordinary kernel/runtime noise lines with one catalog example message in
every ~1000 lines (what a real dmesg or application log looks like: almost nothing matches).
Ours streams the file through `CatalogSet.match_lines` in a fresh process (peak RSS from
getrusage); grep gets one alternation of every catalog pattern (named groups made plain), as
`grep -P -c`. Reports MB/s for both, the ratio, and our peak memory.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NOISE = [
    "[{t:12.6f}] usb 1-1.{n}: new high-speed USB device number {n} using xhci_hcd",
    "[{t:12.6f}] EXT4-fs (nvme0n1p2): re-mounted {h}. Quota mode: none.",
    "[{t:12.6f}] audit: type=1400 audit({t:.3f}:{n}): apparmor=\"STATUS\" operation=\"profile_replace\" name=\"snap.{h}\"",
    "[{t:12.6f}] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "[{t:12.6f}] systemd[1]: Started Session {n} of User root.",
    "{d} board python3[{n}]: I RKNN: [{h}] rknn_run: inference {n} done in {n} us",
    "{d} board kernel: [{t:12.6f}] rfkill: input handler disabled",
    "2024-03-04 10:{m:02d}:{m:02d}.{n:03d} [info] frame {n}: 12 detections, latency 8.{n} ms",
    "[HailoRT] [info] Configured network group {h} with batch size {n}",
]


def build_log(path: Path, mb: int, examples) -> int:
    rnd = random.Random(42)
    size, target, n = 0, mb * 1024 * 1024, 0
    with open(path, "w") as f:
        while size < target:
            n += 1
            if n % 1000 == 0:
                line = rnd.choice(examples)
            else:
                line = rnd.choice(NOISE).format(t=n / 1000.0, n=n % 997, h="%08x" % rnd.getrandbits(32),
                                                m=n % 60, d="Mar  4 10:00:00")
            f.write(line + "\n")
            size += len(line) + 1
    return n


OURS = r"""
import resource, sys, time
sys.path.insert(0, sys.argv[2])
from npu_doctor.catalog import load_catalogs
cs = load_catalogs()
t0 = time.perf_counter()
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    evs = cs.match_lines(f, "bench.log", ("kernel", "runtime"), "runtime")
dt = time.perf_counter() - t0
print(dt, len(evs), sum(e["count"] for e in evs), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def grep_pattern(cs) -> str:
    # named groups made plain; a pattern with a back-reference to one cannot be, and is left
    # out of grep's alternation (a handful)
    pats = [m.rx.pattern for m in cs.matchers if "(?P=" not in m.rx.pattern]
    plain = [re.sub(r"\(\?P<\w+>", "(?:", p) for p in pats]
    return "|".join(f"(?:{p})" for p in plain)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from npu_doctor.catalog import load_catalogs

    cs = load_catalogs()
    examples = [x for e in cs.entries() for x in e.examples]
    tmp = Path(tempfile.mkdtemp(prefix="npu-doctor-bench-"))
    try:
        log = tmp / "big.log"
        lines = build_log(log, args.mb, examples)
        mb = log.stat().st_size / 1e6
        print(f"log: {mb:.0f} MB, {lines} lines, {len(cs.entries())} catalog entries, "
              f"{len(cs.matchers)} patterns")
        ours, rss = [], 0
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", OURS, str(log), str(REPO)], capture_output=True,
                                 text=True, check=True).stdout.split()
            ours.append(float(out[0]))
            rss = max(rss, int(out[3]))
            events, matched = out[1], out[2]
        print(f"npu-doctor catalogs: {mb / statistics.median(ours):7.1f} MB/s  "
              f"(median {statistics.median(ours):.2f} s; {events} events for {matched} matching lines; "
              f"peak RSS {rss / 1024:.0f} MB)")
        if shutil.which("grep"):
            pat = tmp / "pattern"
            pat.write_text(grep_pattern(cs))
            greps = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                proc = subprocess.run(["grep", "-P", "-c", "-f", str(pat), str(log)], capture_output=True,
                                      text=True, env=dict(os.environ, LC_ALL="C"))
                greps.append(time.perf_counter() - t0)
            if proc.returncode > 1:
                print(f"grep -P failed: {proc.stderr.strip()[:200]}")
            else:
                g = statistics.median(greps)
                print(f"grep -P (same patterns): {mb / g:7.1f} MB/s  (median {g:.2f} s; "
                      f"{proc.stdout.strip()} matching lines)")
                print(f"ratio npu-doctor / grep time: {statistics.median(ours) / g:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
