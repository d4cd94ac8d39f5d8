#!/usr/bin/env python3
"""Benchmark `npu-doctor check` against baselines measured in the same run, as ratios.

    python benchmarks/bench_check.py [--runs N] [--case DIR] [--python PY]

Rows (median wall time of N runs of a fresh process each; the rows take turns, run by run):
- floor:        python -c "import click, packaging"  (what any such CLI pays; issue 14's floor)
- collect_env:  python -m torch.utils.collect_env            (what users run today; needs torch,
                in this interpreter or the --python one)
- collect-env:  npu-doctor check --collect-env --python PY   (the same report, every framework)
- check live:   npu-doctor check --format json on this host
- check snap:   npu-doctor check --snapshot CASE --format json
- check hang:   a snapshot whose every command hangs (timed_out = true): costs only the timeout

Goals (issue 14): snapshot <= 2.5x floor; live <= 0.08x collect_env; hang ~= the largest probe
timeout, not the sum of them. Issue 13: collect-env <= 0.1x collect_env.
The user cache (~/.cache/npu-doctor: parsed data files, the validated configuration, derived
regex facts, ELF and interpreter answers) is warmed by one untimed run of each command first,
as on any machine after the first run; --cold turns it off (NPU_DOCTOR_NO_CACHE=1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CASE = REPO.parent / "shared" / "cases" / "k01-rk3588-npu-autosuspend"
HANG_ARGVS = [["dmesg"], ["npu-smi", "info"], ["hailortcli", "fw-control", "identify"],
              ["xrt-smi", "examine"], ["nvidia-smi", "-q"], ["ldconfig", "-p"], ["id"],
              ["dpkg-query", "-W"]]


def timed(argv, runs, env=None):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        times.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 1):
            return None, proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
    return statistics.median(times), None


def hang_snapshot(base: Path) -> Path:
    snap = Path(tempfile.mkdtemp(prefix="npu-doctor-bench-hang-"))
    if base.is_dir() and (base / "fs").is_dir():
        shutil.copytree(base / "fs", snap / "fs", symlinks=True)
    lines = []
    for argv in HANG_ARGVS:
        lines.append("[[command]]\nargv = [%s]\ntimed_out = true\n" % ", ".join('"%s"' % a for a in argv))
    (snap / "commands.toml").write_text("\n".join(lines))
    return snap


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--case", default=str(DEFAULT_CASE))
    ap.add_argument("--cold", action="store_true", help="without the user cache (every run parses "
                                                        "and validates everything)")
    ap.add_argument("--python", help="an application interpreter with torch (for collect_env and "
                                     "npu-doctor --python); default: this one")
    args = ap.parse_args()
    py = sys.executable
    tool = [py, "-m", "npu_doctor"]
    env = dict(os.environ, NO_COLOR="1")
    # compare like with like: installed packages run from bytecode, so ours does too
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    import npu_doctor

    subprocess.run([py, "-m", "compileall", "-q", os.path.dirname(npu_doctor.__file__)],
                   stdout=subprocess.DEVNULL, env=env)
    if args.cold:
        env["NPU_DOCTOR_NO_CACHE"] = "1"
    app = args.python or py
    have_torch = subprocess.run([app, "-c", "import torch.utils.collect_env"],
                                capture_output=True).returncode == 0
    for warm in (["check", "--collect-env", "--python", app], ["check", "--format", "json"],
                 ["check", "--snapshot", args.case, "--format", "json"]):
        subprocess.run(tool + warm + ["--fail-on", "never"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
    argvs = {
        "floor": [py, "-c", "import click, packaging"],
        "collect_env": [app, "-m", "torch.utils.collect_env"] if have_torch else None,
        "collect-env": tool + ["check", "--collect-env", "--python", app, "--fail-on", "never"],
        "check live": tool + ["check", "--format", "json", "--fail-on", "never"],
        "check snap": tool + ["check", "--snapshot", args.case, "--format", "json", "--fail-on", "never"],
    }
    # the rows take turns, run after run: a machine that slows down for a while (another job,
    # a frequency change) slows every row alike, and the ratios stay fair
    times: Dict[str, List[float]] = {k: [] for k in argvs}
    rows: Dict[str, Tuple[Optional[float], Optional[List[str]]]] = {}
    if not have_torch:
        rows["collect_env"] = (None, ["torch not installed: pip install torch==2.13.0"])
    for _ in range(args.runs):
        for name, argv in argvs.items():
            if argv is None or name in rows:
                continue
            t, err = timed(argv, 1, env)
            if t is None:
                rows[name] = (None, err)
            else:
                times[name].append(t)
    for name in argvs:
        if name not in rows:
            rows[name] = (statistics.median(times[name]), None)
    hang = hang_snapshot(Path(args.case))
    try:
        rows["check hang"] = timed(tool + ["check", "--snapshot", str(hang), "--format", "json",
                                           "--fail-on", "never"], 1, env)
    finally:
        shutil.rmtree(hang, ignore_errors=True)

    print(f"{'row':<12} {'median s':>9}  note")
    for name, (t, err) in rows.items():
        print(f"{name:<12} {t:>9.3f}" if t is not None else f"{name:<12} {'n/a':>9}  {err[0] if err else ''}")
    floor = rows["floor"][0]
    snap = rows["check snap"][0]
    live = rows["check live"][0]
    cenv = rows["collect_env"][0]
    print()
    if floor and snap:
        print(f"snapshot / floor     = {snap / floor:.2f}x  (goal <= 2.5)")
    if cenv and live:
        print(f"live / collect_env   = {live / cenv:.3f}x  (goal <= 0.08)")
    if cenv and rows["collect-env"][0]:
        print(f"collect-env / collect_env = {rows['collect-env'][0] / cenv:.3f}x  (goal <= 0.1; "
              f"both on {app})")
    if floor and live:
        print(f"live / floor         = {live / floor:.2f}x")
    if rows["check hang"][0] is not None:
        from npu_doctor.probes import COMMAND_TIMEOUT_S, load_specs

        specs = load_specs()
        total = sum(s.timeout_s for s in specs)
        print(f"all commands hang    = {rows['check hang'][0]:.2f} s  (one command's limit is "
              f"{COMMAND_TIMEOUT_S:g} s; the probe timeouts add up to {total:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
