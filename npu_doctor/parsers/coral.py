"""Google Coral / Edge TPU formats: compiler and runtime versions, apex kernel-log lines,
the DKMS build log of the gasket/apex module.

Sources (see tests/data/coral/SOURCE):
- compiler versions `Edge TPU Compiler version 16.0.384591198`, the switch from `2.1.302470888`
  to `14.1`: google-coral/edgetpu issues #480, jsk-ros-pkg/coral_usb_ros PR #78;
  docs/matrices.md
- `Package requires runtime version (14), which is newer than this runtime version (13)`:
  google-coral/edgetpu #435.
- apex kernel lines `RAM did not enable within timeout (12000 ms)`, `Error in device open cb:
  -110`: google-coral/edgetpu #345.
- gasket DKMS failures on new kernels (`no_llseek`, `class_create`): google/gasket-driver #36,
  #12, #18.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from ..lazyregex import lazy
from ..registry import parser

_COMPILER = lazy(r"Edge TPU Compiler version\s+(?P<v>\d+(?:\.\d+)+)", re.I)
_RUNTIME_LEVEL = lazy(r"RuntimeVersion\((?P<n>\d+)\)")
_PKG_RUNTIME = lazy(r"Package requires runtime version \((?P<package>\d+)\), which is newer "
                    r"than this runtime version \((?P<runtime>\d+)\)")
_DKMS_HEADER = lazy(r"DKMS (?:\(dkms-[\d.]+\) )?make\.log for (?P<module>[\w.-]+?)[-/](?P<version>[\d.]+[\w.-]*) for "
                    r"kernel (?P<kernel>\S+?)(?:\s*\((?P<arch>[\w-]+)\))?\s*$")


@parser("edgetpu_compiler_version")
def parse_compiler_version(text: str) -> Dict[str, Any]:
    """`Edge TPU Compiler version 16.0.384591198` -> {"version": "16.0.384591198",
    "release": "16.0", "cl": 384591198}; `2.1.302470888` -> release "2.1". Raises ValueError."""
    m = _COMPILER.search(text or "")
    if not m:
        raise ValueError("no `Edge TPU Compiler version` line")
    v = m.group("v")
    parts = v.split(".")
    out: Dict[str, Any] = {"version": v, "release": ".".join(parts[:2])}
    if len(parts) >= 3 and parts[2].isdigit() and len(parts[2]) >= 6:
        out["cl"] = int(parts[2])
    return out


def compiler_order(version: str) -> Tuple[int, int, int]:
    """Sort key for Edge TPU compiler versions across the 2.x -> 14.1 renumbering.

    Google went from `2.0.267685300` / `2.1.302470888` straight to `14.1.317412892`, so a plain
    numeric compare is right only by accident; the third field (the changelist number) orders
    every release. Returns (changelist or 0, major, minor).
    """
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    cl = parts[2] if parts[2] >= 100000 else 0
    return (cl, parts[0], parts[1])


def runtime_level(text: str) -> Optional[int]:
    """`... RuntimeVersion(14)` (pycoral get_runtime_version) -> 14; None when absent."""
    m = _RUNTIME_LEVEL.search(text or "")
    return int(m.group("n")) if m else None


def package_runtime_mismatch(text: str) -> Optional[Dict[str, int]]:
    """The runtime's refusal of a model compiled for a newer runtime -> {package, runtime}."""
    m = _PKG_RUNTIME.search(text or "")
    if not m:
        return None
    return {"package": int(m.group("package")), "runtime": int(m.group("runtime"))}


def parse_dkms_header(line: str) -> Optional[Dict[str, str]]:
    """`DKMS make.log for gasket-1.0 for kernel 6.12.0-custom(x86_64)` ->
    {module: gasket, version: 1.0, kernel: 6.12.0-custom, arch: x86_64}."""
    m = _DKMS_HEADER.search(line.strip())
    if not m:
        return None
    return {k: v for k, v in m.groupdict().items() if v}


def kernel_major_minor(release: Optional[str]) -> Optional[Tuple[int, int]]:
    """`6.12.0-custom` -> (6, 12); None when unreadable."""
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None
