#!/usr/bin/env python3
"""Build an N-GPU NVIDIA snapshot for benchmarks (watch CPU/RSS, check scaling).

    python benchmarks/gpu_snapshot.py OUT_DIR [--gpus 8]

From the real `nvidia-smi -q` of one GPU in tests/data/nvidia (a V100 on driver 418.67), the
GPU section repeated N times with distinct bus ids and minor numbers, plus what a PCI host
shows in sysfs for each card (vendor 0x10de, class 0x030200, runtime PM files) and the
/proc files the system probes read.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMI = REPO / "tests" / "data" / "nvidia" / "smi-q-418.67-v100-sxm2.txt"


def smi_q(n: int) -> str:
    text = SMI.read_text()
    head, gpu = text.split("\nGPU ", 1)
    head = re.sub(r"Attached GPUs\s*:\s*\d+", f"Attached GPUs                       : {n}", head)
    bus = gpu.split("\n", 1)[0].strip()
    out = [head]
    for i in range(n):
        addr = f"00000000:{0x18 + i * 0x10:02X}:00.0"
        g = gpu.replace(bus, addr)
        g = re.sub(r"(Minor Number\s*:\s*)\d+", rf"\g<1>{i}", g)
        out.append("GPU " + g)
    return "\n".join(out)


def build(out: Path, n: int) -> Path:
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
        d = fs / "sys" / "bus" / "pci" / "devices" / f"0000:{0x18 + i * 0x10:02x}:00.0"
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
    (out / "commands.toml").write_text(f"[[command]]\nargv = [\"nvidia-smi\", \"-q\"]\nreturncode = 0\n"
                                       f"stdout = '''\n{body}'''\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    print(build(Path(args.out), args.gpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
