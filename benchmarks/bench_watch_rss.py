#!/usr/bin/env python3
"""watch RSS over many samples with a full check every 10 samples (in-process, no sleeping).

    python benchmarks/bench_watch_rss.py SNAPSHOT [--samples 1000]

Prints RSS (MB) after 100 samples and at the end, and CPU ms per sample. Goal (issue 14):
RSS flat (+-5 MB) over 1 000 samples.
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import psutil


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("--samples", type=int, default=1000)
    args = ap.parse_args()
    from npu_doctor.check import Config
    from npu_doctor.host import open_host
    from npu_doctor.watch.daemon import Watcher

    w = Watcher(open_host(snapshot=args.snapshot), Config.load(), 1.0, 10**9, out=io.StringIO(),
                use_udev=False)
    proc = psutil.Process()
    marks = {}
    t0 = time.process_time()
    for i in range(1, args.samples + 1):
        if i % 10 == 0:
            w._last_check = -1e18  # a full check on this sample
        w.run_once()
        w.out = io.StringIO()
        if i in (100, args.samples):
            marks[i] = proc.memory_info().rss / 1e6
    cpu = (time.process_time() - t0) / args.samples * 1000
    print(f"RSS after 100 samples {marks[100]:.1f} MB, after {args.samples} {marks[args.samples]:.1f} MB "
          f"(delta {marks[args.samples] - marks[100]:+.1f} MB); CPU {cpu:.1f} ms/sample incl. checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
