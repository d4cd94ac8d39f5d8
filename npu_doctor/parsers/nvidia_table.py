"""nvidia-smi's default table (plain `nvidia-smi`), as pasted into logs and bug reports.

Every driver release prints the same cells in one of these layouts:
- up to R520: 79 columns, two rows per GPU
  `|   0  TITAN Xp            Off  | 00000000:41:00.0  On |                  N/A |`
  `| 29%   47C    P5    28W / 250W |   2789MiB / 12174MiB |      0%      Default |`
  (R450+ add a third row with the MIG mode; before R410 the header has no "CUDA Version";
  R3xx print a 4-digit PCI domain, `0000:01:00.0`);
- R525 on: 91 columns, the same cells wider, three rows per GPU (the third: MIG M.);
- Windows: WDDM/TCC/MCDM in the Persistence-M cell.
A cell nvidia-smi could not read shows `ERR!` (an NVML query for that reading failed), one it
does not support `N/A`: both leave the fact out (unknown, not 0); `ERR!` cells are listed in
`smi_unreadable`. A name too long for its cell ends in "..." (`name_truncated`).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..registry import parser
from .nvidia import pci_address

_HEADER = re.compile(r"NVIDIA-SMI\s+(?P<smi>\d+(?:\.\d+)+)\s+Driver Version:\s*(?P<driver>\d+(?:\.\d+)+)"
                     r"(?:\s+CUDA Version:\s*(?P<cuda>\d+\.\d+))?")
_ROW1 = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?P<persist>On|Off|WDDM|TCC|MCDM|N/A)\s*"
                   r"\|\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+"
                   r"(?P<disp>On|Off|N/A)\s*\|\s*(?P<ecc>[^|]*?)\s*\|\s*$")
_CELL = r"(?:\d+(?:\.\d+)?{unit}|N/A|ERR!)"
_ROW2 = re.compile(
    r"^\|\s*(?P<fan>" + _CELL.format(unit="%") + r")\s+(?P<temp>" + _CELL.format(unit="C") + r")\s+"
    r"(?P<perf>P\d+|N/A|ERR!)\s+(?P<power>" + _CELL.format(unit="W") + r")\s*/\s*(?P<cap>"
    + _CELL.format(unit="W") + r")\s*\|\s*(?P<mem_used>" + _CELL.format(unit="MiB") + r")\s*/\s*"
    r"(?P<mem_total>" + _CELL.format(unit="MiB") + r")\s*\|\s*(?P<util>" + _CELL.format(unit="%")
    + r")\s+(?P<compute>[^|]*?)\s*\|\s*$")
_UNITS = ("MiB", "%", "C", "W")


def _number(cell: str) -> Optional[float]:
    for unit in _UNITS:
        if cell.endswith(unit):
            try:
                return float(cell[:-len(unit)])
            except ValueError:
                return None
    return None


def _gpu_row(m: "re.Match[str]") -> Dict[str, Any]:
    rec: Dict[str, Any] = {"vendor": "nvidia", "index": int(m.group("index"))}
    name = m.group("name").strip()
    if name.endswith("..."):
        rec["name_truncated"] = True
    rec["name"] = name
    addr = pci_address(m.group("bus"))
    if addr:
        rec["pci_address"] = addr
    persist = m.group("persist")
    if persist in ("On", "Off"):
        rec["persistence_mode"] = "Enabled" if persist == "On" else "Disabled"
    elif persist != "N/A":
        rec["driver_model"] = persist  # Windows: the cell shows the driver model
    ecc = m.group("ecc").strip()
    if ecc.isdigit():
        rec["ecc_uncorrectable_volatile"] = int(ecc)
    return rec


def _readings(rec: Dict[str, Any], m: "re.Match[str]") -> None:
    unreadable = [k for k in ("fan", "temp", "perf", "power", "cap", "mem_used", "mem_total", "util")
                  if m.group(k) == "ERR!"]
    for key, field, scale in (("fan", "fan_percent", 1), ("temp", "temperature_c", 1),
                              ("power", "power_w", 1), ("cap", "power_limit_w", 1),
                              ("mem_used", "memory_used_bytes", 1 << 20),
                              ("mem_total", "memory_total_bytes", 1 << 20),
                              ("util", "utilization_percent", 1)):
        v = _number(m.group(key))
        if v is not None:
            rec[field] = int(v * scale) if scale != 1 else v
    if m.group("perf").startswith("P"):
        rec["performance_state"] = m.group("perf")
    compute = m.group("compute").strip()
    if compute and compute != "N/A":
        rec["compute_mode"] = compute
    if unreadable:
        rec["smi_unreadable"] = unreadable


@parser("nvidia_smi_table")
def parse_nvidia_smi_table(text: str) -> Dict[str, Any]:
    """{driver_version, cuda_version, gpus: [accelerator records]} of the last table in text
    (a header starts a new table; rows without a header count as one table)."""
    out: Dict[str, Any] = {"driver_version": None, "cuda_version": None, "gpus": []}
    gpus: List[Dict[str, Any]] = out["gpus"]
    pending: Optional[Dict[str, Any]] = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        h = _HEADER.search(line)
        if h:
            gpus.clear()
            out["driver_version"], out["cuda_version"] = h.group("driver"), h.group("cuda")
            pending = None
            continue
        m = _ROW1.match(line)
        if m:
            pending = _gpu_row(m)
            gpus.append(pending)
            continue
        m = _ROW2.match(line)
        if m and pending is not None:
            _readings(pending, m)
            pending = None
    return out


__all__ = ["parse_nvidia_smi_table"]
