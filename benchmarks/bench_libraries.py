#!/usr/bin/env python3
"""Benchmark the shared-library preflight against baselines measured in the same run.

    python benchmarks/bench_libraries.py [--dir DIR ...] [--limit N]

Files: every ELF shared object in the native multiarch library directory
(/usr/lib/x86_64-linux-gnu or the aarch64 one) and in the site-packages of this Python, plus
--dir DIRs (searched recursively for *.so*).

Rows (wall time over all files):
- readelf:      `readelf -d -V -W FILES...` in one process (reads the same sections, no
                resolution): the cheapest possible baseline
- ldd:          `ldd FILE` per file (the real loader resolving each dependency tree)
- parse cold:   npu_doctor.linker.elf.read_elf over all files, empty cache
- parse warm:   the same again (per-file cache: what `watch` pays)
- probe cold:   the `libraries` probe (collector + whole dependency trees + version checks)
                over the same files, empty caches
- probe warm:   the same again

It also prints the bytes parsed versus the bytes of the files, and how often npu-doctor's
missing names and unmet versions over each whole tree equal what ldd reports `not found`
(agreement with the real loader; files of another architecture, which ldd cannot load, are
left out of that comparison).
Goal (issue 3): the probe over hundreds of libraries well under a second, and faster than ldd.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from npu_doctor import registry  # noqa: E402
from npu_doctor.host import LiveHost  # noqa: E402
from npu_doctor.linker import elf as elfmod  # noqa: E402
from npu_doctor.linker.ldso import Resolver  # noqa: E402
from npu_doctor.probe_runner import run_probes  # noqa: E402
from npu_doctor.probes import ProbeSpec  # noqa: E402

SO = re.compile(r"\.so(\.[0-9][\w.]*)?$")


def candidates(dirs, recursive_dirs, limit):
    files, seen = [], set()

    def add(p):
        try:
            if os.path.islink(p) or not os.path.isfile(p) or not SO.search(p):
                return
            with open(p, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    return
        except OSError:
            return
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            files.append(p)

    for d in dirs:
        if os.path.isdir(d):
            for n in sorted(os.listdir(d)):
                add(os.path.join(d, n))
    for d in recursive_dirs:
        for root, _dirs, names in os.walk(d):
            for n in sorted(names):
                add(os.path.join(root, n))
    return files[:limit] if limit else files


def clock(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


VERSION_NOT_FOUND = re.compile(r"version [`'](\S+)' not found")


def ldd_missing(files):
    """Per file: (names ldd reports `not found`, versions it reports `not found`)."""
    out = {}
    for f in files:
        r = subprocess.run(["ldd", f], capture_output=True, text=True)
        names = {line.split("=>")[0].strip() for line in r.stdout.splitlines()
                 if "=> not found" in line}
        out[f] = (names, set(VERSION_NOT_FOUND.findall(r.stdout + r.stderr)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", action="append", default=[], help="extra directory (recursive)")
    ap.add_argument("--limit", type=int, default=0, help="at most N files")
    ap.add_argument("--no-ldd", action="store_true", help="skip the ldd baseline")
    args = ap.parse_args()

    machine = platform.machine()
    native = [f"/usr/lib/{machine}-linux-gnu", f"/lib/{machine}-linux-gnu", "/usr/lib64"]
    site = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    files = candidates(native, sorted(set(site)) + args.dir, args.limit)
    if not files:
        print("no shared objects found")
        return 1
    total = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} shared objects, {total / 1e6:.0f} MB "
          f"({sys.implementation.name} {platform.python_version()}, {machine})")

    rows = []
    t, _ = clock(lambda: subprocess.run(["readelf", "-d", "-V", "-W", *files],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    rows.append(("readelf -d -V (1 process)", t))
    ldd = None
    if not args.no_ldd:
        t, ldd = clock(lambda: ldd_missing(files))
        rows.append(("ldd per file", t))

    host = LiveHost()
    elfmod.clear_cache()
    b0 = elfmod.STATS["bytes_read"]

    def parse_all():
        for f in files:
            try:
                elfmod.read_elf(host, f)
            except Exception:
                pass
    t_cold, _ = clock(parse_all)
    parsed_bytes = elfmod.STATS["bytes_read"] - b0
    t_warm, _ = clock(parse_all)
    rows += [("npu-doctor parse cold", t_cold), ("npu-doctor parse warm", t_warm)]

    registry.load_all()
    spec = ProbeSpec(id="libraries", collector="libraries", timeout_s=600, args={
        "location": [{"sdk": "bench", "globs": files}], "python_distributions": []})
    elfmod.clear_cache()
    t_probe, (facts, results) = clock(lambda: run_probes(host, [spec]))
    t_probe_warm, _ = clock(lambda: run_probes(host, [spec]))
    rows += [("npu-doctor probe cold", t_probe), ("npu-doctor probe warm", t_probe_warm)]
    status = results[0].status + (f" ({results[0].error})" if results[0].error else "")

    width = max(len(r[0]) for r in rows)
    base = dict(rows)
    for name, t in rows:
        print(f"  {name:<{width}}  {t * 1000:8.1f} ms  {t / len(files) * 1000:6.2f} ms/file")
    print(f"  bytes parsed: {parsed_bytes / 1e6:.2f} MB of {total / 1e6:.0f} MB "
          f"({100 * parsed_bytes / total:.3f} %)")
    print("ratios:")
    print(f"  probe cold / readelf      = {t_probe / base['readelf -d -V (1 process)']:.2f}")
    if ldd is not None:
        print(f"  probe cold / ldd          = {t_probe / base['ldd per file']:.3f}")
    print(f"  probe warm / probe cold   = {t_probe_warm / t_probe:.3f}")
    print(f"  probe: {status}, {len(facts.get('libraries', []))} records, "
          f"library_scan = {facts.get('library_scan', {}).get('files_parsed')} files parsed")
    if ldd is not None:
        # whole trees, as ldd reports them: every missing name and unmet version below a file
        resolver = Resolver(host)
        ours, foreign = {}, 0
        for f in files:
            try:
                nodes = resolver.tree(f)
            except Exception:
                continue
            if nodes[0].info.machine != machine:  # ldd cannot load another architecture
                foreign += 1
                continue
            ours[f] = ({n for node in nodes for n in node.missing},
                       {u["version"] for node in nodes for u in node.unsatisfied})
        same = [f for f in ours if ours[f] == ldd[f]]
        diff = [f for f in ours if ours[f] != ldd[f]]
        n_missing = sum(1 for f in ours if ours[f][0])
        n_version = sum(1 for f in ours if ours[f][1])
        print(f"  agreement with ldd (missing names and unmet versions, whole tree): "
              f"{len(same)}/{len(ours)} files ({n_missing} with missing libraries, "
              f"{n_version} with unmet versions; {foreign} other-architecture files left out)")
        for f in diff[:5]:
            print(f"    differs: {f}: npu-doctor {ours[f]} ldd {ldd[f]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
