"""AMD XDNA / Ryzen AI NPU (`amdxdna`): `xrt-smi examine`, sysfs, firmware files, kernel log.

Facts (accelerator records merge with the accelerators probe by pci_address / sysfs):
- `sdks.xrt` {version, hash} and `drivers.amdxdna` {version ("2.19.0_20250330" as xrt-smi
  prints it), hash, source} from `xrt-smi examine` (2.17-2.2x layouts); `drivers.amdxdna.version`
  falls back to /sys/module/amdxdna/version.
- `accelerators[]` {vendor: "amd-xdna", name ("RyzenAI-npu4"), pci_address, driver.name
  "amdxdna", driver.version, driver.drm_version, driver.probe_error, firmware.version (host
  report, when it lists one device), firmware.mbox_magic, firmware.not_alive, firmware.dir,
  firmware.files [names under /lib/firmware/amdnpu/<dev>_<rev>/], sysfs, initialized}.
- `xrt.warnings` / `xrt.errors` (lines xrt-smi printed; the Alveo `xclmgmt version is unknown`
  warning is kept as a warning only), `xrt.returncode`, `xrt.device_count`.
The mmap EAGAIN line of a non-root xrt-smi run (RLIMIT_MEMLOCK) is matched by the
`command-failures` probe (signature `mmap-locked-eagain`, probes/system.toml), not here.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional

from ..errors import CommandNotFound, HostError
from ..parsers.xdna import firmware_dir_name, parse_examine, parse_kernel_log
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector
from ..sysfs import accel_devices, module_version
from .logs import kernel_log

XRT_SMI = ["xrt-smi", "examine"]
FW_ROOTS = ("/lib/firmware/amdnpu", "/usr/lib/firmware/amdnpu")


def xdna_devices(host) -> List[Dict[str, str]]:
    """[{accel, sysfs, pci_address, device_id, revision}] for /sys/class/accel/accel* bound
    to amdxdna."""
    out = accel_devices(host, "amdxdna")
    for d in out:
        d["device_id"] = host.read_attr(posixpath.join(d["sysfs"], "device")) or ""
        d["revision"] = host.read_attr(posixpath.join(d["sysfs"], "revision")) or ""
    return out


def _examine(ctx: ProbeContext) -> Optional[str]:
    """Facts from `xrt-smi examine`; returns an error text when its output is unreadable."""
    try:
        res = ctx.run(XRT_SMI)
    except CommandNotFound:
        return None
    src = res.source.lstrip("$ ") or "xrt-smi examine"
    if res.timed_out:
        ctx.facts.set("xrt.timed_out", True, src)
        return "`xrt-smi examine` timed out"
    text = res.stdout + ("\n" + res.stderr if res.stderr.strip() else "")
    try:
        rep = parse_examine(text)
    except ValueError as e:
        last = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        if res.returncode not in (0, None):
            ctx.facts.set("xrt.errors", [last[0][:300]], src)
            ctx.facts.set("xrt.returncode", res.returncode, src)
            return None
        return f"unparsable `xrt-smi examine` output ({e}): {last[0][:120]!r}"
    ctx.facts.set("xrt.returncode", res.returncode, src)
    xrt = rep.get("xrt", {})
    if xrt.get("version"):
        ctx.facts.set("sdks.xrt.version", xrt["version"], src)
        ctx.facts.set("sdks.xrt.hash", xrt.get("hash"), src)
        ctx.facts.set("sdks.xrt.branch", xrt.get("branch"), src)
    drv = rep.get("drivers", {}).get("amdxdna", {})
    if drv.get("version"):
        ctx.facts.set("drivers.amdxdna.version", drv["version"], src)
        ctx.facts.set("drivers.amdxdna.hash", drv.get("hash"), src)
        ctx.facts.set("drivers.amdxdna.source", src, src)
    if rep.get("warnings"):
        ctx.facts.set("xrt.warnings", rep["warnings"], src)
    if rep.get("errors"):
        ctx.facts.set("xrt.errors", rep["errors"], src)
    if "device_count" in rep:
        ctx.facts.set("xrt.device_count", rep["device_count"], src)
    devices = rep.get("devices", [])
    for dev in devices:
        rec: Dict[str, Any] = {"vendor": "amd-xdna", "pci_address": dev["pci_address"],
                               "driver": {"name": "amdxdna"}}
        if dev.get("name"):
            rec["name"] = dev["name"]
        if drv.get("version"):
            rec["driver"]["version"] = drv["version"]
        if rep.get("firmware_version") and len(devices) == 1:
            rec["firmware"] = {"version": rep["firmware_version"]}
        ctx.facts.add_accelerator(rec, source=src)
    return None


@collector("xdna")
def collect_xdna(ctx: ProbeContext) -> None:
    host = ctx.host
    problem = _examine(ctx)

    for dev in xdna_devices(host):
        rec: Dict[str, Any] = {"vendor": "amd-xdna", "pci_address": dev["pci_address"],
                               "sysfs": dev["sysfs"], "driver": {"name": "amdxdna"}}
        fwdir = firmware_dir_name(dev["device_id"], dev["revision"])
        if fwdir:
            for root in FW_ROOTS:
                path = posixpath.join(root, fwdir)
                try:
                    names = host.listdir(path)
                except HostError:
                    continue
                rec["firmware"] = {"dir": path, "files": names}
                break
            else:
                rec["firmware"] = {"dir": posixpath.join(FW_ROOTS[0], fwdir), "files": []}
        ctx.facts.add_accelerator(rec, source=dev["sysfs"])

    modver, modpath = module_version(host.read_attr, "amdxdna")
    if modver and ctx.facts.get("drivers.amdxdna.version") is None:
        ctx.facts.set("drivers.amdxdna.version", modver, modpath)
        ctx.facts.set("drivers.amdxdna.source", modpath)

    got = kernel_log(ctx)
    if got is not None:
        source, text = got
        source = source.lstrip("$ ")
        for pci, st in parse_kernel_log(text).items():
            rec = {"vendor": "amd-xdna", "pci_address": pci, "name": "AMD XDNA NPU",
                   "driver": {"name": "amdxdna"}}
            if st.get("drm_version"):
                rec["driver"]["drm_version"] = st["drm_version"]
            if st.get("probe_error") is not None:
                rec["driver"]["probe_error"] = st["probe_error"]
            fw: Dict[str, Any] = {}
            if st.get("mbox_magic"):
                fw["mbox_magic"] = st["mbox_magic"]
            if st.get("firmware_not_alive"):
                fw["not_alive"] = True
            if st.get("firmware_request_error") is not None:
                fw["request_error"] = st["firmware_request_error"]
                fw["requested"] = st.get("firmware_file")
            if st.get("firmware_protocol"):
                fw["rejected_protocol"] = st["firmware_protocol"]
            if st.get("firmware_validate_error") is not None:
                fw["validate_error"] = st["firmware_validate_error"]
            if fw:
                rec["firmware"] = fw
            if st.get("initialized") is not None:
                rec["initialized"] = st["initialized"]
            if st.get("initialized") and st.get("minor") is not None:
                rec["dev"] = f"/dev/accel/accel{st['minor']}"
            ctx.facts.add_accelerator(rec, source=source)
    if problem:
        raise ProbeError(problem)
    if not ctx.facts.data:
        raise NoData("no AMD XDNA NPU, xrt-smi or amdxdna kernel-log line")
