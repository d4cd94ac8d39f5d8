"""The inventory being built: one record (and its fact sources) per device, small sysfs
readers, and the attributes every device has (driver, numa node, power, PCIe link)."""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional, Tuple

from ...errors import HostError
from ...host import Host
from ...lazyregex import lazy
from ...probes import ProbeContext

_SPEED_RE = lazy(r"([0-9]+(?:\.[0-9]+)?)\s*GT/s")
_INDEX_RE = lazy(r"(\d+)$")

# -- small readers ---------------------------------------------------------------------
def _int(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        try:
            return int(float(text.strip()))
        except ValueError:
            return None


def parse_link_speed(text: Optional[str]) -> Optional[float]:
    """`16.0 GT/s PCIe` / `8 GT/s` / `2.5 GT/s` -> GT/s as float; `Unknown` -> None."""
    if not text:
        return None
    m = _SPEED_RE.search(text)
    return float(m.group(1)) if m else None


def _link_name(host: Host, path: str) -> Optional[str]:
    try:
        return posixpath.basename(host.readlink(path).rstrip("/")) or None
    except HostError:
        return None


def _is_link(host: Host, path: str) -> bool:
    try:
        host.readlink(path)
        return True
    except HostError:
        return False


class _Inventory:
    """Records being built, keyed by sysfs device path (or a synthetic key)."""

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.host = ctx.host
        self.args = ctx.args or {}
        self.records: Dict[str, Dict[str, Any]] = {}
        self.sources: Dict[str, Dict[str, str]] = {}
        self._groups: Optional[Dict[int, str]] = None

    # -- tables ----------------------------------------------------------------------
    def pci_match(self, vendor_id: str, device_id: str, cls: str) -> Optional[Dict[str, Any]]:
        pid = f"{vendor_id}:{device_id}"
        for row in self.args.get("pci_ids", []):
            if str(row.get("id", "")).lower() == pid:
                return row
        for row in self.args.get("pci_vendor_classes", []):
            if (str(row.get("vendor_id", "")).lower() == vendor_id
                    and cls.startswith(str(row.get("class_prefix", "-")).lower())):
                return row
        for prefix in self.args.get("pci_class_prefixes", []):
            if cls.startswith(str(prefix).lower()):
                return {}
        return None

    def compat_match(self, compats: List[str]) -> Optional[Dict[str, Any]]:
        table = self.args.get("compatible", [])
        for c in compats:  # most specific first, as the device tree lists them
            for row in table:
                if row.get("compatible") == c:
                    return row
        return None

    def name_match(self, name: str) -> Optional[Dict[str, Any]]:
        for row in self.args.get("platform_names", []):
            if row.get("device") == name:
                return row
        return None

    def driver_vendor(self, driver: Optional[str]) -> Optional[str]:
        if not driver:
            return None
        return (self.args.get("drivers") or {}).get(driver)

    def vendor_info(self, vendor: Optional[str]) -> Dict[str, Any]:
        return ((self.args.get("vendors") or {}).get(vendor or "") or {})

    # -- records ---------------------------------------------------------------------
    def get(self, key: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
        if key not in self.records:
            self.records[key] = {}
            self.sources[key] = {}
        return self.records[key], self.sources[key]

    def find_by_sysfs(self, sysfs: Optional[str]) -> Optional[str]:
        if sysfs and sysfs in self.records:
            return sysfs
        return None

    def group_name(self, gid: Optional[int]) -> Optional[str]:
        if gid is None:
            return None
        if self._groups is None:
            self._groups = {}
            try:
                text = self.host.read_text("/etc/group")
            except HostError:
                text = ""
            for line in text.splitlines():
                parts = line.split(":")
                if len(parts) >= 3 and parts[2].strip().isdigit():
                    self._groups.setdefault(int(parts[2]), parts[0])
        return self._groups.get(gid)


def _set(rec: Dict[str, Any], srcs: Dict[str, str], path: str, value: Any,
         source: Optional[str] = None) -> None:
    """Set a dotted leaf in a plain record unless already known; None is not stored."""
    if value is None:
        return
    node = rec
    parts = path.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if node.get(parts[-1]) is not None:
        return
    node[parts[-1]] = value
    if source:
        srcs[path] = source


# -- generic device attributes -----------------------------------------------------------
def _device_common(inv: _Inventory, rec: Dict[str, Any], srcs: Dict[str, str], sysfs: str) -> None:
    """driver, power/, PCIe link, numa of a device directory."""
    host = inv.host
    _set(rec, srcs, "sysfs", sysfs)
    drv = _link_name(host, f"{sysfs}/driver")
    if drv:
        _set(rec, srcs, "driver.name", drv, f"{sysfs}/driver")
        _set(rec, srcs, "driver.bound", True, f"{sysfs}/driver")
        for mod_path in (f"{sysfs}/driver/module/version",):
            ver = host.read_attr(mod_path)
            if ver:
                _set(rec, srcs, "driver.version", ver, mod_path)
        mod = _link_name(host, f"{sysfs}/driver/module")
        _set(rec, srcs, "driver.module", mod, f"{sysfs}/driver/module")
    pw = f"{sysfs}/power"
    for attr, key, conv in (("control", "control", str), ("runtime_status", "runtime_status", str),
                            ("autosuspend_delay_ms", "autosuspend_delay_ms", _int),
                            ("runtime_suspended_time", "runtime_suspended_time_ms", _int),
                            ("runtime_active_time", "runtime_active_time_ms", _int)):
        val = host.read_attr(f"{pw}/{attr}")
        if val is None or val == "":
            continue
        _set(rec, srcs, f"power.{key}", conv(val), f"{pw}/{attr}")
    cur_s = host.read_attr(f"{sysfs}/current_link_speed")
    max_s = host.read_attr(f"{sysfs}/max_link_speed")
    _set(rec, srcs, "pcie.cur_speed_gts", parse_link_speed(cur_s), f"{sysfs}/current_link_speed")
    _set(rec, srcs, "pcie.max_speed_gts", parse_link_speed(max_s), f"{sysfs}/max_link_speed")
    _set(rec, srcs, "pcie.cur_width", _int(host.read_attr(f"{sysfs}/current_link_width")),
         f"{sysfs}/current_link_width")
    _set(rec, srcs, "pcie.max_width", _int(host.read_attr(f"{sysfs}/max_link_width")),
         f"{sysfs}/max_link_width")
    numa = _int(host.read_attr(f"{sysfs}/numa_node"))
    if numa is not None and numa >= 0:
        _set(rec, srcs, "numa_node", numa, f"{sysfs}/numa_node")
    # devfreq of this device (SoC NPUs): <device>/devfreq/<name>
    try:
        names = host.listdir(f"{sysfs}/devfreq")
    except HostError:
        names = []
    for name in names:
        _set(rec, srcs, "freq.devfreq", f"/sys/class/devfreq/{name}", f"{sysfs}/devfreq/{name}")
        _set(rec, srcs, "driver.bound", True, f"{sysfs}/devfreq/{name}")
        break


def _apply_row(rec: Dict[str, Any], srcs: Dict[str, str], row: Dict[str, Any], source: str) -> None:
    for key in ("vendor", "name", "soc"):
        _set(rec, srcs, key, row.get(key), source)
