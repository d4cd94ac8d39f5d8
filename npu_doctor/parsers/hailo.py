"""Hailo formats: `hailortcli fw-control identify`, HailoRT error lines, `hailortcli --version`,
library file names, TAPPAS version lines.

Sources (real outputs the tests replay, see tests/data/hailo/SOURCE):
- identify: hailo-ai/hailo-rpi5-examples #99 (HailoRT 4.20, Hailo-8L, `Board Name: Hailo-8`
  with `Device Architecture: HAILO8L`), blakeblackshear/frigate #22202 (4.21.0).
- driver/library mismatch: roflcoopter/viseron #1490 (`Driver version (4.23.0) is different
  from library version (4.22.0)`, exit 76), blakeblackshear/frigate #16716 (4.20.0 vs 4.19.0).
- the rules themselves: hailo-ai/hailort `hailort_driver.cpp` validate_driver_version() (exact
  match, HAILO_INVALID_DRIVER_VERSION = 76) and `device.cpp` (firmware major.minor).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from .. import versions
from ..lazyregex import lazy
from ..registry import parser

#: HailoRT's status for a driver/library mismatch; hailortcli exits with it.
HAILO_INVALID_DRIVER_VERSION = 76

_KEYS = {
    "control protocol version": "control_protocol_version",
    "firmware version": "firmware_version",
    "logger version": "logger_version",
    "board name": "board_name",
    "device architecture": "device_architecture",
    "serial number": "serial_number",
    "part number": "part_number",
    "product name": "product_name",
}
_DRV_LIB = lazy(r"Driver version \((?P<driver>[0-9][0-9.]*)\) is different from library "
                r"version \((?P<library>[0-9][0-9.]*)\)")
_STATUS = lazy(r"status\s*[=:]?\s*(?P<name>HAILO_[A-Z_]+)\s*\((?P<code>\d+)\)")
_EXECUTING = lazy(r"^Executing on device:\s*(\S+)")
_BDF = lazy(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_FW_HOST = lazy(r"Unsupported firmware operation\. Host: (?P<host>[0-9.]+), Device: (?P<device>[0-9.]+)")


@parser("hailo_identify")
def parse_identify(text: str) -> Dict[str, Any]:
    """`hailortcli fw-control identify` -> {pci_address ("0000:01:00.0", from `Executing on
    device:`), control_protocol_version, firmware_version ("4.20.0", the token), firmware_flags
    ("release,app,extended context switch buffer"), logger_version, board_name,
    device_architecture ("HAILO8L"), serial_number, part_number, product_name,
    architecture (the device architecture, else derived from the board name)}.

    Trust `Device Architecture` over `Board Name`: a Hailo-8L module reports the board name
    `Hailo-8`. Raises ValueError when no `Firmware Version` / `Board Name` line is present.
    """
    out: Dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _EXECUTING.match(line) if line.startswith("Executing") else None
        if m:
            dev = m.group(1).lower()
            if _BDF.match(dev):
                out["pci_address"] = dev
            else:
                out["device_id"] = m.group(1)
            continue
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        name = _KEYS.get(key.strip().lower())
        if not name:
            continue
        value = value.strip()
        if name == "firmware_version":
            tok, build = versions.split_build(value)
            out["firmware_version"] = tok
            if build:
                out["firmware_flags"] = build
        else:
            out[name] = value
    if "firmware_version" not in out and "board_name" not in out:
        raise ValueError("not hailortcli identify output")
    arch = out.get("device_architecture")
    if not arch and out.get("board_name"):
        arch = re.sub(r"[^A-Za-z0-9]", "", out["board_name"]).upper()
    if arch:
        out["architecture"] = arch.upper()
    return out


def parse_runtime_error(text: str) -> Dict[str, Any]:
    """HailoRT error lines -> {driver_version, library_version (the exact-match failure),
    status_name, status_code, fw_host_version, fw_device_version}; {} when none."""
    out: Dict[str, Any] = {}
    m = _DRV_LIB.search(text)
    if m:
        out["driver_version"], out["library_version"] = m.group("driver"), m.group("library")
    m = _STATUS.search(text)
    if m:
        out["status_name"], out["status_code"] = m.group("name"), int(m.group("code"))
    m = _FW_HOST.search(text)
    if m:
        out["fw_host_version"], out["fw_device_version"] = m.group("host"), m.group("device")
    return out


def parse_cli_version(text: str) -> Optional[str]:
    """`HailoRT-CLI version 4.23.0` -> `4.23.0`; None when absent."""
    m = re.search(r"HailoRT-CLI version\s+([0-9][0-9.]*)", text or "")
    return m.group(1) if m else None


def library_version_from_name(path: str) -> Optional[str]:
    """`/usr/lib/libhailort.so.4.23.0` -> `4.23.0` (the SONAME carries x.y.z); None otherwise."""
    m = re.search(r"libhailort\.so\.(\d+\.\d+\.\d+)$", path)
    return m.group(1) if m else None


def family_of(version: Optional[str]) -> Optional[str]:
    """HailoRT/driver major -> device family: 4 -> `hailo8` (Hailo-8/8R/8L, hailo_pci),
    5 -> `hailo1x` (Hailo-10H/15H/15L, hailo1x_pci)."""
    if not version:
        return None
    major = version.split(".")[0]
    return {"4": "hailo8", "5": "hailo1x"}.get(major)


def arch_family(arch: Optional[str]) -> Optional[str]:
    """`HAILO8L` -> `hailo8`; `HAILO10H` / `HAILO15H` -> `hailo1x`."""
    a = (arch or "").upper().replace("-", "")
    if a.startswith("HAILO8"):
        return "hailo8"
    if re.match(r"^HAILO1\d", a):
        return "hailo1x"
    return None


def same_minor(a: Optional[str], b: Optional[str]) -> Optional[bool]:
    """Whether two x.y.z versions share major.minor (HailoRT's firmware rule); None if unknown."""
    if not a or not b:
        return None
    pa, pb = a.split("."), b.split(".")
    if len(pa) < 2 or len(pb) < 2:
        return None
    return pa[:2] == pb[:2]
