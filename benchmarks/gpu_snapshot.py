#!/usr/bin/env python3
"""Build an N-GPU NVIDIA snapshot for benchmarks (watch CPU/RSS, check scaling).

    python benchmarks/gpu_snapshot.py OUT_DIR [--gpus 8] [--no-query]

From the real `nvidia-smi -q` of one GPU in tests/data/nvidia (a V100 on driver 418.67), the
GPU section repeated N times with distinct bus ids and minor numbers, plus what a PCI host
shows in sysfs for each card (vendor 0x10de, class 0x030200, runtime PM files) and the
/proc files the system probes read. Unless --no-query, commands.toml also answers the
`nvidia-smi --query-gpu=... --format=csv,nounits` that `watch` samples with between full
`-q` runs, its values those of the `-q` report (so a sample changes nothing by itself).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parent.parent
SMI = REPO / "tests" / "data" / "nvidia" / "smi-q-418.67-v100-sxm2.txt"


def slot(i: int) -> Tuple[int, int]:
    """(PCI domain, bus) of GPU i: 14 cards a domain, buses 0x18, 0x28, ... 0xe8."""
    return i // 14, 0x18 + (i % 14) * 0x10


def smi_q(n: int) -> str:
    text = SMI.read_text()
    head, gpu = text.split("\nGPU ", 1)
    head = re.sub(r"Attached GPUs\s*:\s*\d+", f"Attached GPUs                       : {n}", head)
    bus = gpu.split("\n", 1)[0].strip()
    out = [head]
    for i in range(n):
        dom, num = slot(i)
        addr = f"{dom:08X}:{num:02X}:00.0"
        g = gpu.replace(bus, addr)
        g = re.sub(r"(Minor Number\s*:\s*)\d+", rf"\g<1>{i}", g)
        out.append("GPU " + g)
    return "\n".join(out)


def query_csv(smi_text: str) -> Tuple[List[str], str]:
    """(argv, stdout) of the `--query-gpu` that watch asks of these GPUs, the values taken
    from the `-q` report, as nvidia-smi prints them under nounits (units in the header only)."""
    from npu_doctor.parsers.nvidia import parse_nvidia_smi_q
    from npu_doctor.parsers.nvidia_query import REASON_BITS, fields_for, query_argv

    gpus = parse_nvidia_smi_q(smi_text)["gpus"]
    fields = fields_for(gpus)
    units = {"utilization.gpu": "%", "utilization.memory": "%", "power.draw": "W",
             "clocks.current.graphics": "MHz"}
    lines = [", ".join(f"{f} [{units[f]}]" if f in units else f for f in fields)]
    for g in gpus:
        mask = sum(bit for bit, name in REASON_BITS if name in g.get("clocks_event_reasons", []))
        dom, bus, dev_fn = g["pci_address"].split(":")
        vals = {"index": g["index"], "pci.bus_id": f"{int(dom, 16):08X}:{bus.upper()}:{dev_fn.upper()}",
                "temperature.gpu": g.get("temperature_c"), "utilization.gpu": g.get("utilization_percent"),
                "utilization.memory": g.get("memory_utilization_percent"),
                "power.draw": f"{g['power_w']:.2f}" if "power_w" in g else None,
                "clocks.current.graphics": g.get("freq", {}).get("cur_hz", 0) // 1_000_000 or None,
                "pstate": g.get("performance_state"),
                "clocks_throttle_reasons.active": f"0x{mask:016X}",
                "pcie.link.gen.current": g.get("pcie", {}).get("cur_gen"),
                "pcie.link.width.current": g.get("pcie", {}).get("cur_width"),
                "temperature.memory": g.get("thermal", {}).get("memory_c"),
                "temperature.gpu.tlimit": g.get("thermal", {}).get("margin_c")}
        lines.append(", ".join("[N/A]" if vals[f] is None else str(vals[f]) for f in fields))
    return query_argv(fields), "\n".join(lines) + "\n"


def build(out: Path, n: int, query: bool = True) -> Path:
    fs = out / "fs"
    (fs / "proc").mkdir(parents=True, exist_ok=True)
    (fs / "etc").mkdir(parents=True, exist_ok=True)
    (fs / "proc" / "loadavg").write_text("0.52 0.58 0.59 1/1024 12345\n")
    (fs / "proc" / "stat").write_text("cpu  1000 0 500 100000 10 0 5 0 0 0\n")
    (fs / "etc" / "os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    (fs / "proc" / "driver" / "nvidia").mkdir(parents=True, exist_ok=True)
    (fs / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  418.67  Sat Apr  6 03:07:24 CDT 2019\n"
        "GCC version:  gcc version 7.3.0 (Ubuntu 7.3.0-16ubuntu3)\n")
    for i in range(n):
        dom, bus = slot(i)
        d = fs / "sys" / "bus" / "pci" / "devices" / f"{dom:04x}:{bus:02x}:00.0"
        (d / "power").mkdir(parents=True, exist_ok=True)
        for k, v in {"vendor": "0x10de", "device": "0x1db5", "class": "0x030200",
                     "current_link_speed": "8.0 GT/s PCIe", "max_link_speed": "8.0 GT/s PCIe",
                     "current_link_width": "16", "max_link_width": "16"}.items():
            (d / k).write_text(v + "\n")
        (fs / "sys" / "bus" / "pci" / "drivers" / "nvidia").mkdir(parents=True, exist_ok=True)
        if not (d / "driver").is_symlink():
            (d / "driver").symlink_to("../../../bus/pci/drivers/nvidia")
        (d / "power" / "control").write_text("on\n")
        (d / "power" / "runtime_status").write_text("active\n")
    body = smi_q(n).replace("'''", "")
    toml = f"[[command]]\nargv = [\"nvidia-smi\", \"-q\"]\nreturncode = 0\nstdout = '''\n{body}'''\n"
    if query:
        argv, csv = query_csv(body)
        toml += (f"\n[[command]]\nargv = {json.dumps(argv)}\nreturncode = 0\n"
                 f"stdout = '''\n{csv}'''\n")
    (out / "commands.toml").write_text(toml)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--no-query", action="store_true",
                    help="no `--query-gpu` answer: watch falls back to the full `-q` every sample")
    args = ap.parse_args()
    print(build(Path(args.out), args.gpus, query=not args.no_query))
    return 0


if __name__ == "__main__":
    sys.exit(main())
