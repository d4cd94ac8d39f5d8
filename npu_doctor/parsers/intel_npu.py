"""Intel Core Ultra NPU (`intel_vpu`): kernel log lines, firmware blob version strings, UMD
package versions.

Kernel log formats (verbatim, with sources):
- firmware loaded: `intel_vpu 0000:00:0b.0: [drm] Firmware: intel/vpu/vpu_37xx_v0.0.bin, version:
  20250306*MTL_CLIENT_SILICON-release*1130*ci_tag_ud202512_vpu_rc_20250306_1130*5064b5debc3`
  (intel/linux-npu-driver#93), Lunar Lake form `... vpu_40xx_v1.bin, version: Nov 13 2025*NPU40xx*
  ci_tag_ud202548_vpu_rc_20251112_1901-1-g72f907ffc78*72f9...` (intel/compute-runtime#875)
- driver initialised: `[drm] Initialized intel_vpu 1.0.0 for 0000:00:0b.0 on minor 0` (6.8+),
  older kernels add a date: `[drm] Initialized intel_vpu 1.0.0 20230117 for 0000:00:0b.0 on minor 0`
  (intel/linux-npu-driver#15)
- a fallback name tried first: `intel_vpu 0000:00:0b.0: firmware: failed to load vpu_37xx.bin (-2)`
  (harmless when a `Firmware:` line follows, intel/linux-npu-driver#93)
- every name failed: `intel_vpu 0000:00:0b.0: [drm] *ERROR* ivpu_fw_request(): Failed to request
  firmware: -2`, then `Failed to initialize VPU device: -2` and either
  `intel_vpu: probe of 0000:00:0b.0 failed with error -2` (older driver core) or
  `intel_vpu 0000:00:0b.0: probe with driver intel_vpu failed with error -2` (6.x)
  (intel/linux-npu-driver#31, Dasharo/dasharo-issues#1492)
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..lazyregex import lazy
from ..registry import parser

_PCI = r"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
_PREFIX_RE = lazy(r"intel_vpu\s+" + _PCI + r":")
_FW_LOADED_RE = lazy(r"\[drm\] Firmware:\s*(\S+?),\s*version:\s*(.+?)\s*$")
_INIT_RE = lazy(r"\[drm\] Initialized intel_vpu (\d+\.\d+\.\d+)(?: (\d{8}))? for " + _PCI +
                r" on minor (\d+)")
_FW_FAIL_NAME_RE = lazy(r"firmware: failed to load (\S+) \((-?\d+)\)|"
                        r"Direct firmware load for (\S+) failed with error (-?\d+)")
_FW_REQUEST_RE = lazy(r"ivpu_fw_request\(\): Failed to request firmware:\s*(-?\d+)")
_PROBE_OLD_RE = lazy(r"intel_vpu: probe of " + _PCI + r" failed with error (-?\d+)")
_PROBE_NEW_RE = lazy(r"probe with driver intel_vpu failed with error (-?\d+)")
_ERROR_RE = lazy(r"\*ERROR\*\s*(.*)$")


def _dev(by_pci: Dict[str, Dict[str, Any]], pci: str) -> Dict[str, Any]:
    pci = pci.lower()
    return by_pci.setdefault(pci, {"pci_address": pci})


@parser("intel_vpu_kernel_log")
def parse_kernel_log(text: str) -> Dict[str, Dict[str, Any]]:
    """Per NPU (keyed by PCI address "0000:00:0b.0"): what the kernel log says about it.

    Each value: {pci_address, firmware: {file, version}, firmware_failures: [{name, error}],
    firmware_request_error (int, every name failed), probe_error (int), driver_version
    ("1.0.0", the DRM driver version), driver_date ("20230117", older kernels), minor (int),
    errors: [text of *ERROR* lines]}. The last firmware load and the last init win (a log can
    hold several boots or module reloads). Empty dict when no intel_vpu line is present.
    """
    by_pci: Dict[str, Dict[str, Any]] = {}
    for line in text.splitlines():
        if "intel_vpu" not in line:
            continue
        m = _INIT_RE.search(line)
        if m:
            d = _dev(by_pci, m.group(3))
            d["driver_version"] = m.group(1)
            if m.group(2):
                d["driver_date"] = m.group(2)
            d["minor"] = int(m.group(4))
            d["initialized"] = True
            d.pop("probe_error", None)
            continue
        m = _PROBE_OLD_RE.search(line)
        if m:
            d = _dev(by_pci, m.group(1))
            d["probe_error"] = int(m.group(2))
            d["initialized"] = False
            continue
        p = _PREFIX_RE.search(line)
        if not p:
            continue
        d = _dev(by_pci, p.group(1))
        m = _PROBE_NEW_RE.search(line)
        if m:
            d["probe_error"] = int(m.group(1))
            d["initialized"] = False
            continue
        m = _FW_LOADED_RE.search(line)
        if m:
            d["firmware"] = {"file": m.group(1), "version": m.group(2)}
            d.pop("firmware_request_error", None)
            continue
        m = _FW_REQUEST_RE.search(line)
        if m:
            d["firmware_request_error"] = int(m.group(1))
        m = _FW_FAIL_NAME_RE.search(line)
        if m:
            name = m.group(1) or m.group(3)
            err = int(m.group(2) or m.group(4))
            d.setdefault("firmware_failures", []).append({"name": name, "error": err})
            continue
        m = _ERROR_RE.search(line)
        if m:
            d.setdefault("errors", []).append(m.group(1).strip())
    for d in by_pci.values():
        fails = d.get("firmware_failures")
        if fails:
            # one entry per distinct name; the count of attempts is kept
            seen: Dict[str, Dict[str, Any]] = {}
            for f in fails:
                seen.setdefault(f["name"], {"name": f["name"], "error": f["error"], "attempts": 0})
                seen[f["name"]]["attempts"] += 1
            d["firmware_failures"] = list(seen.values())
    return by_pci


#: Version string inside a firmware blob: `20240611*MTL_CLIENT_SILICON-release*0003*...` or
#: `Mar  5 2026*NPU40xx*ci_tag_...` (linux-npu-driver release notes, `strings vpu_37xx_v1.bin`).
FW_BLOB_RE = lazy(
    rb"((?:20\d{6}|[A-Z][a-z]{2} [ \d]\d \d{4})\*[A-Za-z0-9_]+[A-Za-z0-9_+\-]*\*[\x21-\x7e]{4,200})")


def firmware_blob_version(data: bytes) -> Optional[str]:
    """The build string embedded in an NPU firmware file, or None.

    Matches both forms: `20240611*MTL_CLIENT_SILICON-release*0003*ci_tag_...*f3e8a8f2747` and
    `Jun 11 2024*LNL*ci_tag_...` / `Mar  5 2026*NPU40xx*...`.
    """
    m = FW_BLOB_RE.search(data)
    return m.group(1).decode("ascii", "replace") if m else None


_DEB_UD_RE = lazy(r"^(?:\d+:)?(\d+\.\d+\.\d+)\.(\d{8})-(\S+)$")


def split_package_version(deb_version: str) -> Dict[str, str]:
    """{version, build?} of an Intel NPU package version.

    `1.5.1.20240708-9842236399` -> {version: "1.5.1", build: "20240708-9842236399"};
    other forms (`1.17.6`, `1:2024.2.0-15519`) -> the upstream part without epoch/revision.
    """
    m = _DEB_UD_RE.match(deb_version.strip())
    if m:
        return {"version": m.group(1), "build": f"{m.group(2)}-{m.group(3)}"}
    v = deb_version.strip()
    if re.match(r"^\d+:", v):
        v = v.split(":", 1)[1]
    if "-" in v:
        up, _, rev = v.rpartition("-")
        if up and re.match(r"^\d", up):
            return {"version": up, "build": rev}
    return {"version": v}


def soname_version(filename: str, stem: str) -> Optional[str]:
    """`libze_intel_npu.so.1.5.1` with stem `libze_intel_npu.so` -> `1.5.1` (None for `.so.1`)."""
    if not filename.startswith(stem + "."):
        return None
    tail = filename[len(stem) + 1:]
    if re.match(r"^\d+\.\d+(\.\d+)*$", tail) and tail.count(".") >= 1:
        return tail
    return None


__all__: List[str] = ["parse_kernel_log", "firmware_blob_version", "split_package_version",
                      "soname_version"]
