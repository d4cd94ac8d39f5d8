"""AMD XDNA (Ryzen AI NPU): `xrt-smi examine` / `xbutil examine` text and amdxdna kernel log.

`xrt-smi examine` layouts (verbatim samples in tests/data/xdna/, with their sources):
- 2.17 / 2.18 (`xbutil examine`): upper-case driver keys `XOCL`, `XCLMGMT`, `AMDXDNA : 0.1,
  unknown`, `Firmware Version : N/A`, and a `Devices present` list
  `[0000:c7:00.1]  :  RyzenAI-npu1` or `0 devices found` (Xilinx/XRT#8145, Xilinx/mlir-aie#1618).
- 2.19+: lower-case keys `amdxdna : 2.19.0_20250330, <hash>`, `NPU Firmware Version : 1.0.0.63`
  and a `Device(s) Present` table `|[0000:67:00.1]  |RyzenAI-npu4  |` (Xilinx/mlir-aie#2167,
  amd/xdna-driver#903, #958). Some 2.19/2.20 builds print `xocl : unknown, unknown` plus
  `WARNING: xclmgmt version is unknown. Is xclmgmt driver loaded? Or is MSD/MPD running?` on
  Ryzen AI systems: xocl/xclmgmt are Alveo card drivers, so that warning is not a failure
  (removed for amdxdna systems by Xilinx/XRT PR 8666).
- A run that fails after its header prints `XRT build version: 2.21.0` / `Build hash: ...` and an
  `[xrt-smi] ERROR: ...` line (amd/xdna-driver#903).

Kernel log (amd/xdna-driver#389, #1257; Umio-Yasuno/amdgpu_top#120):
`amdxdna 0000:c6:00.1: [drm] *ERROR* aie2_get_mgmt_chann_info: Invalid mbox magic 0x30ec000`,
`... aie2_hw_start: firmware is not alive`, `... probe with driver amdxdna failed with error -22`,
`[drm] Initialized amdxdna_accel_driver 0.6.0 for 0000:c6:00.1 on minor 0`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..lazyregex import lazy
from ..registry import parser

_KV_RE = lazy(r"^\s+([A-Za-z][A-Za-z0-9 /_()\-]*?)\s*:\s*(.*?)\s*$")
_BDF_RE = lazy(r"\[([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\]")
_HEADER_RE = lazy(r"^(XRT build version|Build hash|Build date|Git branch|PID|UID|HOST|EXE):\s*(.*?)\s*$")
_UNKNOWN = ("unknown", "n/a", "")


def _version_pair(value: str) -> Dict[str, str]:
    """`2.19.0_20250330, 7c1d273e...` -> {version, hash}; `unknown, unknown` -> {}."""
    parts = [p.strip() for p in value.split(",")]
    out: Dict[str, str] = {}
    if parts and parts[0].lower() not in _UNKNOWN:
        out["version"] = parts[0]
    if len(parts) > 1 and parts[1].lower() not in _UNKNOWN:
        out["hash"] = parts[1]
    return out


@parser("xrt_smi_examine")
def parse_examine(text: str) -> Dict[str, Any]:
    """The host report of `xrt-smi examine` (any layout 2.17 ... 2.2x).

    Returns {system: {release, distribution, glibc, model, bios_version, processor, ...},
    xrt: {version, branch, hash, hash_date}, drivers: {amdxdna: {version, hash}, xocl: {...},
    ...} (unknown versions left out), firmware_version (NPU firmware, host section),
    devices: [{pci_address, name}], device_count (int, when the report states the list),
    warnings: [lines starting WARNING], errors: [lines with ERROR], header: {...} for a run
    that printed only its build header}. Raises ValueError when the text is not an
    xrt-smi/xbutil report at all.
    """
    out: Dict[str, Any] = {"system": {}, "xrt": {}, "drivers": {}, "devices": [],
                           "warnings": [], "errors": []}
    section = None
    in_devices = False
    recognised = False
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        h = _HEADER_RE.match(stripped)
        if h:
            out.setdefault("header", {})[h.group(1)] = h.group(2)
            recognised = True
            continue
        if stripped.startswith("WARNING"):
            out["warnings"].append(stripped)
            continue
        if "ERROR" in stripped and not stripped.startswith("|"):
            out["errors"].append(stripped)
            recognised = True
            continue
        if not line.startswith((" ", "\t", "|", "[")):
            low = stripped.lower()
            if low == "system configuration":
                section, in_devices = "system", False
                recognised = True
            elif low == "xrt":
                section, in_devices = "xrt", False
                recognised = True
            elif low.startswith("device(s) present") or low.startswith("devices present"):
                section, in_devices = "devices", True
                recognised = True
                out["device_count"] = 0
            elif not in_devices:
                section = None
            if not in_devices:
                continue
            if low.startswith(("device(s) present", "devices present")):
                continue
        if in_devices:
            if re.match(r"^\s*0 devices found", stripped):
                out["device_count"] = 0
                continue
            m = _BDF_RE.search(stripped)
            if m:
                rest = stripped[m.end():]
                cells = [c.strip() for c in re.split(r"\|", rest) if c.strip()]
                if not cells:
                    cells = [c.strip() for c in rest.split(":", 1)[-1:] if c.strip()]
                dev: Dict[str, Any] = {"pci_address": m.group(1).lower()}
                name = cells[0].lstrip(":").strip() if cells else ""
                if name:
                    dev["name"] = name
                out["devices"].append(dev)
                out["device_count"] = len(out["devices"])
            continue
        m = _KV_RE.match(line)
        if not m or section is None:
            continue
        key, value = m.group(1).strip(), m.group(2)
        lk = key.lower()
        if section == "system":
            out["system"][re.sub(r"[^a-z0-9]+", "_", lk).strip("_")] = value
        elif section == "xrt":
            if lk in ("version", "branch", "hash", "hash date"):
                out["xrt"][lk.replace(" ", "_")] = value
            elif "firmware version" in lk:
                if value.lower() not in _UNKNOWN:
                    kind = "cert" if lk.startswith("cert") else "npu"
                    if kind == "npu":
                        out["firmware_version"] = value
                    else:
                        out["cert_firmware_version"] = value
            elif lk in ("uc build date",):
                continue
            else:
                drv = re.sub(r"\s+version$", "", lk)
                pair = _version_pair(value)
                out["drivers"][drv] = pair
    if not recognised:
        raise ValueError("not an xrt-smi examine report (no System Configuration/XRT/header)")
    hdr = out.get("header", {})
    if not out["xrt"].get("version") and hdr.get("XRT build version"):
        out["xrt"]["version"] = hdr["XRT build version"]
        if hdr.get("Build hash"):
            out["xrt"]["hash"] = hdr["Build hash"]
    return out


_PCI = r"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
_PREFIX_RE = lazy(r"amdxdna\s+" + _PCI + r":")
_INIT_RE = lazy(r"\[drm\] Initialized amdxdna(?:_accel_driver)? (\d+\.\d+\.\d+)(?: \d{8})? for "
                + _PCI + r" on minor (\d+)")
_PROBE_RE = lazy(r"probe with driver amdxdna failed with error (-?\d+)")
_PROBE_OLD_RE = lazy(r"amdxdna: probe of " + _PCI + r" failed with error (-?\d+)")
_MBOX_RE = lazy(r"Invalid mbox magic (0x[0-9a-fA-F]+)")
_NOT_ALIVE_RE = lazy(r"firmware is not alive")
_FW_REQUEST_RE = lazy(r"failed to request_firmware (\S+), ret (-?\d+)")
_PROTOCOL_RE = lazy(r"Incompatible firmware protocol major (\d+) minor (\d+)")
_VALIDATE_RE = lazy(r"failed to validate fw, ret (-?\d+)")
_ERROR_RE = lazy(r"\*ERROR\*\s*(.*)$")


@parser("amdxdna_kernel_log")
def parse_kernel_log(text: str) -> Dict[str, Dict[str, Any]]:
    """Per XDNA NPU (keyed by PCI address): what the kernel log says about it.

    Each value: {pci_address, drm_version ("0.6.0" from `Initialized amdxdna_accel_driver`),
    minor, initialized (bool), probe_error (int), mbox_magic ("0x30ec000"), firmware_not_alive
    (True), firmware_file + firmware_request_error (`aie2_init: failed to request_firmware
    amdnpu/17f0_10/npu.sbin, ret -2`), firmware_protocol ("7.3", rejected by
    `aie2_check_protocol`), firmware_validate_error (int, `failed to validate fw`), errors:
    [*ERROR* texts]}. Empty when no amdxdna line.
    """
    by_pci: Dict[str, Dict[str, Any]] = {}

    def dev(pci: str) -> Dict[str, Any]:
        return by_pci.setdefault(pci.lower(), {"pci_address": pci.lower()})

    for line in text.splitlines():
        if "amdxdna" not in line:
            continue
        m = _INIT_RE.search(line)
        if m:
            d = dev(m.group(2))
            d["drm_version"] = m.group(1)
            d["minor"] = int(m.group(3))
            d["initialized"] = True
            d.pop("probe_error", None)
            continue
        m = _PROBE_OLD_RE.search(line)
        if m:
            d = dev(m.group(1))
            d["probe_error"], d["initialized"] = int(m.group(2)), False
            continue
        p = _PREFIX_RE.search(line)
        if not p:
            continue
        d = dev(p.group(1))
        m = _PROBE_RE.search(line)
        if m:
            d["probe_error"], d["initialized"] = int(m.group(1)), False
            continue
        m = _MBOX_RE.search(line)
        if m:
            d["mbox_magic"] = m.group(1)
        if _NOT_ALIVE_RE.search(line):
            d["firmware_not_alive"] = True
        m = _FW_REQUEST_RE.search(line)
        if m:
            d["firmware_file"] = m.group(1)
            d["firmware_request_error"] = int(m.group(2))
        m = _PROTOCOL_RE.search(line)
        if m:
            d["firmware_protocol"] = f"{m.group(1)}.{m.group(2)}"
        m = _VALIDATE_RE.search(line)
        if m:
            d["firmware_validate_error"] = int(m.group(1))
        m = _ERROR_RE.search(line)
        if m:
            d.setdefault("errors", []).append(m.group(1).strip())
    return by_pci


def firmware_dir_name(device_id: Optional[str], revision: Optional[str]) -> Optional[str]:
    """`/lib/firmware/amdnpu/<dir>` for a PCI device: device `0x1502`, revision `0x00` ->
    `1502_00` (amd/xdna-driver tools/WHENCE). None when either is unknown."""
    if not device_id or not revision:
        return None
    try:
        return f"{int(device_id, 16):04x}_{int(revision, 16):02x}"
    except ValueError:
        return None


__all__: List[str] = ["parse_examine", "parse_kernel_log", "firmware_dir_name"]
