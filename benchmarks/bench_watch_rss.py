#!/usr/bin/env python3
"""watch RSS over many samples with a full check every 10 samples (in-process, no sleeping).

    python benchmarks/bench_watch_rss.py SNAPSHOT|--live [--samples 1000] [--check-every 10]

Prints RSS (MB) after 100 samples and at the end, CPU ms per sample, and the threads started
(pool threads, and all threads the process saw). Goal (issue 14): RSS flat (+-5 MB) over
1 000 samples. --live watches this host (its full checks run real commands).
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time

import psutil


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", nargs="?")
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--check-every", type=int, default=10)
    args = ap.parse_args()
    if bool(args.snapshot) == args.live:
        ap.error("give a SNAPSHOT or --live")
    from npu_doctor.check import Config
    from npu_doctor.host import open_host
    from npu_doctor.watch.daemon import Watcher

    started = [0]
    real_start = threading.Thread.start

    def start(self):  # count every thread started, pool or not
        started[0] += 1
        return real_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]
    w = Watcher(open_host(snapshot=args.snapshot), Config.load(), 1.0, 10**9, out=io.StringIO(),
                use_udev=False)
    proc = psutil.Process()
    marks = {}
    t0 = time.process_time()
    for i in range(1, args.samples + 1):
        if i % args.check_every == 0:
            w._last_check = -1e18  # a full check on this sample
        w.run_once()
        w.out = io.StringIO()
        if i in (100, args.samples):
            marks[i] = proc.memory_info().rss / 1e6
    cpu = (time.process_time() - t0) / args.samples * 1000
    print(f"RSS after 100 samples {marks[100]:.1f} MB, after {args.samples} {marks[args.samples]:.1f} MB "
          f"(delta {marks[args.samples] - marks[100]:+.1f} MB); CPU {cpu:.1f} ms/sample incl. checks; "
          f"threads started {started[0]} (pool: {getattr(getattr(w, 'pool', None), 'started', 'none')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
