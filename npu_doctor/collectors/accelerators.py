"""Accelerator inventory from sysfs, and the Rockchip RKNPU debugfs files.

Collector `accelerators` (probe spec and detection tables: probes/accelerators.toml) finds:

- PCI devices (`/sys/bus/pci/devices/*`) whose class starts with a listed prefix (0x12,
  processing accelerator) or whose `vendor:device` / vendor+class is in the tables;
- class devices: `/sys/class/accel/accel*`, `/sys/class/apex/apex_*` (Coral),
  `/sys/class/hailo_chardev/hailo*`, and DRM render nodes `/sys/class/drm/renderD*` of a device
  already found;
- platform NPUs: platform devices whose `of_node/compatible` is in the table
  (`rockchip,rk3588-rknpu` at fdab0000.npu ...);
- NPU devfreq devices (`/sys/class/devfreq/*`) whose device is listed by name
  (`27700000.npu`), for captures that hold nothing else.

Each becomes one `accelerators[]` record (ARCHITECTURE.md): vendor, name, index, pci_address
("0000:5a:00.0"), pci_id ("8086:7d1d"), sysfs (realpath of the device directory), driver.name
(basename of the `driver` link), driver.version (`driver/module/version`), numa_node, dev (the
main /dev node), dev_nodes [{path, type, mode "0660", uid, gid, group, can_open, exists}],
access {can_open, path, mode, owner, group, user, udev_rule} (when a node was checked),
power {control, runtime_status, autosuspend_delay_ms, runtime_suspended_time_ms,
runtime_active_time_ms} from `<device>/power/`, pcie {cur_speed_gts, max_speed_gts, cur_width,
max_width}, freq.devfreq (the devfreq class path; freq.devfreq_name, cur_hz ... are filled by
the `link_devfreq` deriver),
driver.bound (true when the `driver` link or anything only a bound driver creates exists:
a class device, debugfs, a devfreq device), udev.match (udev match keys for this device, used
by the persistent fixes), sensors.temperature {available, zone_types, path}.

Collector `rknpu_debugfs` reads `version` and `load` of the RKNPU driver (debugfs or procfs)
-> `drivers.rknpu.version`, the rknpu accelerator's driver.version, load {cores_percent,
max_percent, mean_percent} and utilization_percent. utilization_percent is the busiest core
(max, not mean): it answers "is the NPU doing work", and a model pinned to one core of the
three is not "33 % busy". A core over 100 % is an impossible reading (counter wrap after a hung
job): the raw values stay in load.cores_percent, utilization_percent is left unknown, and
sensor-reading-invalid reports it. With `--sample S` the load is read over the window and
utilization_percent is the mean of the per-read maxima.

Derivers (after all probes): `link_devfreq` copies devfreq.devices[] (device = realpath of
the parent device) onto the accelerator with the same sysfs -> freq.{cur_hz,min_hz,max_hz,
governor}; `link_thermal` takes temperature_c and thermal_zone from the thermal.zones[] entry
whose type is in the vendor's zone_types; `count_inventory` sets inventory.accelerator_count
only when the count is known (no vendor probe recorded `inventory.unknown[]` {vendor, reason}:
its tool failed, so the number of its devices is unknown).
"""

from __future__ import annotations

import posixpath
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from ..errors import AccessDenied, HostError
from ..facts import Facts
from ..host import Host
from ..parsers.rknpu import parse_rknpu_load, parse_rknpu_version
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector, deriver

_SPEED_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GT/s")
_INDEX_RE = re.compile(r"(\d+)$")


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


# -- PCI ----------------------------------------------------------------------------------
def scan_pci(inv: _Inventory) -> None:
    host = inv.host
    for dev in host.glob("/sys/bus/pci/devices/*"):
        addr = posixpath.basename(dev).lower()
        cls = (host.read_attr(f"{dev}/class") or "").lower()
        ven = (host.read_attr(f"{dev}/vendor") or "").lower().replace("0x", "")
        did = (host.read_attr(f"{dev}/device") or "").lower().replace("0x", "")
        if not cls and not ven:
            continue
        row = inv.pci_match(ven, did, cls)
        if row is None:
            continue
        sysfs = host.realpath(dev)
        rec, srcs = inv.get(sysfs)
        _set(rec, srcs, "pci_address", addr, dev)
        _set(rec, srcs, "pci_id", f"{ven}:{did}", f"{dev}/vendor")
        _set(rec, srcs, "pci_class", cls, f"{dev}/class")
        _apply_row(rec, srcs, row, f"{dev}/device")
        _device_common(inv, rec, srcs, sysfs)
        _set(rec, srcs, "vendor", inv.driver_vendor(rec.get("driver", {}).get("name")), f"{dev}/driver")
        _set(rec, srcs, "name", f"PCI accelerator [{ven}:{did}]", f"{dev}/device")
        _set(rec, srcs, "udev.match",
             f'SUBSYSTEM=="pci", ATTR{{vendor}}=="0x{ven}", ATTR{{device}}=="0x{did}"')
        _set(rec, srcs, "udev.subsystem", "pci")
        if rec.get("driver", {}).get("bound") is None:
            _set(rec, srcs, "driver.bound", False, f"{dev}/driver")


# -- platform (device tree) -----------------------------------------------------------------
def _compatibles(host: Host, path: str) -> List[str]:
    try:
        raw = host.read_bytes(path, 4096)
    except HostError:
        return []
    return [c for c in raw.decode("utf-8", "replace").split("\x00") if c.strip()]


def scan_platform(inv: _Inventory) -> None:
    host = inv.host
    seen = set()
    cands = host.glob("/sys/bus/platform/devices/*") + host.glob("/sys/devices/platform/*")
    for dev in cands:
        sysfs = host.realpath(dev)
        if sysfs in seen:
            continue
        seen.add(sysfs)
        comp_path = f"{sysfs}/of_node/compatible"
        compats = _compatibles(host, comp_path)
        row = inv.compat_match(compats) if compats else None
        name = posixpath.basename(sysfs)
        if row is None:
            if not compats:
                row = inv.name_match(name)
            if row is None:
                continue
            src = sysfs
        else:
            src = comp_path
        rec, srcs = inv.get(sysfs)
        _apply_row(rec, srcs, row, src)
        if compats:
            _set(rec, srcs, "compatible", compats[0], comp_path)
        _device_common(inv, rec, srcs, sysfs)
        _set(rec, srcs, "platform_device", name, sysfs)
        _set(rec, srcs, "udev.match", f'SUBSYSTEM=="platform", KERNEL=="{name}"')
        _set(rec, srcs, "udev.subsystem", "platform")


def scan_devicetree_disabled(inv: _Inventory) -> List[Dict[str, str]]:
    """NPU nodes of the device tree that are present but `status = "disabled"`.

    Such a node never becomes a platform device, so no driver can bind: the NPU must first be
    enabled (a board overlay). Looks at the nodes of /proc/device-tree up to `dt_depth` levels
    (NPUs sit at the root or under a `soc` bus node).
    """
    host = inv.host
    found = []
    depth = int(inv.args.get("dt_depth", 2))
    pattern = "/proc/device-tree"
    for _level in range(depth):
        pattern += "/*"
        for comp_path in host.glob(pattern + "/compatible"):
            compats = _compatibles(host, comp_path)
            row = inv.compat_match(compats) if compats else None
            if row is None:
                continue
            node = posixpath.dirname(comp_path)
            status = (host.read_attr(f"{node}/status") or "okay").strip("\x00")
            if status not in ("okay", "ok"):
                found.append({"node": node[len("/proc/device-tree"):], "compatible": compats[0],
                              "status": status, "name": row.get("name", ""),
                              "vendor": row.get("vendor", "")})
    return found


# -- class devices ---------------------------------------------------------------------------
def _class_parent(host: Host, classdev: str) -> Optional[str]:
    """Realpath of the device a class device belongs to, or None when not known."""
    if _is_link(host, f"{classdev}/device"):
        return host.realpath(f"{classdev}/device")
    real = host.realpath(classdev)
    if real.startswith("/sys/devices/"):
        parent = posixpath.dirname(posixpath.dirname(real))
        if parent.startswith("/sys/devices/"):
            return parent
    return None


def _devname(host: Host, classdev: str, dev_dir: str) -> Optional[str]:
    """The /dev path of a class device: DEVNAME from uevent, else dev_dir/<name>.

    None when the class device has no `dev` attribute (no device node at all).
    """
    uevent = host.read_attr(f"{classdev}/uevent") or ""
    for line in uevent.splitlines():
        if line.startswith("DEVNAME="):
            name = line.split("=", 1)[1].strip()
            return name if name.startswith("/") else "/dev/" + name
    if not host.exists(f"{classdev}/dev"):
        return None
    return posixpath.join(dev_dir, posixpath.basename(classdev))


def scan_class_devices(inv: _Inventory) -> None:
    host = inv.host
    for spec in inv.args.get("class_devices", []):
        cls = spec.get("class")
        pattern = spec.get("pattern", "*")
        for classdev in host.glob(f"/sys/class/{cls}/{pattern}"):
            if not host.is_dir(classdev):
                continue  # a dangling link: the device behind it is gone
            cname = posixpath.basename(classdev)
            parent = _class_parent(host, classdev)
            key = inv.find_by_sysfs(parent)
            if key is None:
                if not spec.get("standalone"):
                    continue
                key = parent or classdev
            if inv.records.get(key, {}).get("vendor") in spec.get("skip_vendors", []):
                continue
            rec, srcs = inv.get(key)
            if parent and key == parent and "sysfs" not in rec:
                _device_common(inv, rec, srcs, parent)
                pci = posixpath.basename(parent)
                if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", pci):
                    _set(rec, srcs, "pci_address", pci, parent)
                    ven = (host.read_attr(f"{parent}/vendor") or "").lower().replace("0x", "")
                    did = (host.read_attr(f"{parent}/device") or "").lower().replace("0x", "")
                    if ven and did:
                        _set(rec, srcs, "pci_id", f"{ven}:{did}", f"{parent}/vendor")
                        row = inv.pci_match(ven, did, (host.read_attr(f"{parent}/class") or "").lower())
                        if row:
                            _apply_row(rec, srcs, row, f"{parent}/device")
                        _set(rec, srcs, "udev.match",
                             f'SUBSYSTEM=="pci", ATTR{{vendor}}=="0x{ven}", ATTR{{device}}=="0x{did}"')
                        _set(rec, srcs, "udev.subsystem", "pci")
            _set(rec, srcs, "vendor", spec.get("vendor"), classdev)
            _set(rec, srcs, "vendor", inv.driver_vendor(rec.get("driver", {}).get("name")), classdev)
            _set(rec, srcs, "name", spec.get("name"), classdev)
            _set(rec, srcs, "class_device", f"/sys/class/{cls}/{cname}", classdev)
            # a class device exists only while its driver is bound
            rec.setdefault("driver", {})
            if rec["driver"].get("bound") is not True:
                rec["driver"]["bound"] = True
                srcs["driver.bound"] = classdev
            if spec.get("standalone"):
                m = _INDEX_RE.search(cname)
                if m:
                    _set(rec, srcs, "index", int(m.group(1)), classdev)
            node = _devname(host, classdev, spec.get("dev_dir", "/dev"))
            if node:
                nodes = rec.setdefault("dev_nodes", [])
                if not any(n.get("path") == node for n in nodes):
                    nodes.append({"path": node, "subsystem": cls, "kernel": cname})
            _vendor_class_attrs(inv, rec, srcs, classdev)


def _vendor_class_attrs(inv: _Inventory, rec: Dict[str, Any], srcs: Dict[str, str],
                        classdev: str) -> None:
    """Temperature and trip points a vendor keeps on its class device (Coral apex)."""
    info = inv.vendor_info(rec.get("vendor"))
    attr = info.get("temperature_attr")
    if not attr:
        return
    host = inv.host
    path = f"{classdev}/{attr}"
    raw = host.read_attr(path)
    val = _int(raw) if raw else None
    if val is None:
        # No temperature attribute (or an empty/unparsable one): that driver build exposes no
        # sensor. Unknown, not OK.
        exists = host.exists(path)
        rec.setdefault("sensors", {})["temperature"] = {
            "available": False, "path": path,
            "reason": ("unreadable" if exists else "attribute missing in this driver build")}
        srcs["sensors.temperature"] = classdev
        return
    _set(rec, srcs, "temperature_c", round(val / 1000.0, 2), path)
    rec.setdefault("sensors", {})["temperature"] = {"available": True, "path": path}
    trips = []
    for t in info.get("trip_attrs", []):
        tv = _int(host.read_attr(f"{classdev}/{t}"))
        if tv is not None:
            trips.append(round(tv / 1000.0, 2))
    if trips:
        _set(rec, srcs, "trip_points_c", trips, classdev)


# -- devfreq by device name --------------------------------------------------------------
def scan_devfreq(inv: _Inventory) -> None:
    host = inv.host
    for d in host.glob("/sys/class/devfreq/*"):
        name = posixpath.basename(d)
        parent = None
        if _is_link(host, f"{d}/device"):
            parent = host.realpath(f"{d}/device")
        else:
            real = host.realpath(d)
            if real.startswith("/sys/devices/") and "/devfreq/" in real:
                parent = real.split("/devfreq/")[0]
        if parent and parent in inv.records:
            rec, srcs = inv.get(parent)
            _set(rec, srcs, "freq.devfreq", f"/sys/class/devfreq/{name}", d)
            continue
        row = None
        if parent:
            row = inv.compat_match(_compatibles(host, f"{parent}/of_node/compatible"))
            row = row or inv.name_match(posixpath.basename(parent))
        row = row or inv.name_match(name)
        if row is None:
            continue
        key = parent or d
        rec, srcs = inv.get(key)
        _apply_row(rec, srcs, row, d)
        if parent:
            _device_common(inv, rec, srcs, parent)
            pname = posixpath.basename(parent)
            _set(rec, srcs, "platform_device", pname, parent)
            _set(rec, srcs, "udev.match", f'SUBSYSTEM=="platform", KERNEL=="{pname}"')
            _set(rec, srcs, "udev.subsystem", "platform")
        _set(rec, srcs, "freq.devfreq", f"/sys/class/devfreq/{name}", d)
        # a devfreq device is registered by the bound driver
        rec.setdefault("driver", {})["bound"] = True
        srcs["driver.bound"] = d


# -- device nodes and access -------------------------------------------------------------
def _mode_str(mode: Optional[int]) -> Optional[str]:
    return None if mode is None else format(mode, "04o")


def finish_nodes(inv: _Inventory, rec: Dict[str, Any], srcs: Dict[str, str]) -> None:
    host = inv.host
    nodes = rec.get("dev_nodes") or []
    if not nodes:
        return
    prio = {"accel": 0, "apex": 1, "hailo_chardev": 1, "drm": 2}
    nodes.sort(key=lambda n: (prio.get(n.get("subsystem", ""), 5), n["path"]))
    for n in nodes:
        st = host.stat(n["path"])
        if st is None:
            n["exists"] = False
            continue
        n["exists"] = True
        n["type"] = st.type
        if st.mode is not None:
            n["mode"] = _mode_str(st.mode)
        if st.uid is not None:
            n["uid"] = st.uid
        if st.gid is not None:
            n["gid"] = st.gid
            grp = inv.group_name(st.gid)
            if grp:
                n["group"] = grp
        can = host.can_open(n["path"])
        if can is not None:
            n["can_open"] = can
    _set(rec, srcs, "dev", nodes[0]["path"], rec.get("class_device"))
    checked = [n for n in nodes if "can_open" in n]
    if not checked:
        return
    denied = [n for n in checked if n["can_open"] is False]
    user = None
    try:
        user = host.identity().user
    except HostError:
        pass
    if not denied:
        rec["access"] = {"can_open": True, "path": checked[0]["path"]}
        return
    n = denied[0]
    group = n.get("group") or (str(n["gid"]) if "gid" in n else None)
    access: Dict[str, Any] = {"can_open": False, "path": n["path"],
                              "denied": [d["path"] for d in denied]}
    for k in ("mode", "uid", "gid"):
        if k in n:
            access[k] = n[k]
    if group is not None:
        access["group"] = group
    if user:
        access["user"] = user
    # A group-accessible node owned by a real group: joining the group is the fix. Otherwise
    # (root:root 0600 ...) a udev rule has to hand the node to a group first.
    mode = int(n["mode"], 8) if "mode" in n else 0
    access["group_can_open"] = bool(mode & 0o060 == 0o060 and n.get("gid") not in (None, 0))
    sub, kern = n.get("subsystem"), n.get("kernel")
    if sub and kern:
        kern_glob = _INDEX_RE.sub("*", kern) if _INDEX_RE.search(kern) else kern
        grp = group if access["group_can_open"] else "render"
        access["udev_rule"] = (f'SUBSYSTEM=="{sub}", KERNEL=="{kern_glob}", '
                               f'GROUP="{grp}", MODE="0660"')
        access["fix_group"] = grp
    rec["access"] = access
    srcs["access"] = n["path"]


# -- collectors ---------------------------------------------------------------------------
@collector("accelerators")
def collect_accelerators(ctx: ProbeContext) -> None:
    inv = _Inventory(ctx)
    scan_pci(inv)
    scan_platform(inv)
    scan_class_devices(inv)
    scan_devfreq(inv)
    for key in list(inv.records):
        rec, srcs = inv.records[key], inv.sources[key]
        finish_nodes(inv, rec, srcs)
        info = inv.vendor_info(rec.get("vendor"))
        if info.get("driver") and rec.get("driver", {}).get("name") is None:
            rec.setdefault("driver", {})["expected"] = info["driver"]
        if info.get("thermal_zone_types") and "temperature_c" not in rec:
            rec.setdefault("sensors", {}).setdefault("temperature", {})["zone_types"] = list(
                info["thermal_zone_types"])
        if rec.get("driver", {}).get("bound") is None and rec.get("sysfs"):
            # a platform/PCI device with no `driver` link and nothing a driver creates
            rec.setdefault("driver", {})["bound"] = False
            srcs["driver.bound"] = f"{rec['sysfs']}/driver"
    if ctx.host.is_dir("/sys/bus") or ctx.host.is_dir("/sys/devices") or ctx.host.is_dir("/sys/class"):
        # only a host (or snapshot) that has sysfs can say "none": a snapshot of logs alone
        # leaves the count unknown
        ctx.facts.set("inventory.sysfs_scanned", True, "/sys")
    disabled = scan_devicetree_disabled(inv)
    if disabled:
        ctx.facts.set("inventory.disabled_in_devicetree", disabled, "/proc/device-tree")
    if not inv.records:
        raise NoData("no accelerator in sysfs (PCI class 0x12 or known ids, /sys/class/accel, "
                     "device tree, devfreq)")
    for key in sorted(inv.records, key=lambda k: (inv.records[k].get("pci_address") or "~", k)):
        rec = inv.records[key]
        ctx.facts.add_accelerator(rec, sources=inv.sources[key], source=key)


def _rknpu_hint(ctx: ProbeContext) -> bool:
    """Whether this host looks like a Rockchip board (so unreadable debugfs matters)."""
    prefix = (ctx.args or {}).get("hint_compatible_prefix", "rockchip,")
    for c in _compatibles(ctx.host, "/proc/device-tree/compatible"):
        if c.startswith(prefix):
            return True
    return bool(ctx.host.glob("/sys/class/devfreq/*.npu"))


def _read_load(ctx: ProbeContext, path: str, errors: Optional[List[str]] = None
               ) -> Optional[Dict[str, Any]]:
    text = ctx.read(path)
    if text is None:
        return None
    try:
        return parse_rknpu_load(text)
    except ValueError as e:
        if errors is not None:
            errors.append(f"{path}: {e}")
        return None


@collector("rknpu_debugfs")
def collect_rknpu_debugfs(ctx: ProbeContext) -> None:
    host = ctx.host
    args = ctx.args or {}
    base = None
    for d in args.get("dirs", ["/sys/kernel/debug/rknpu", "/proc/rknpu"]):
        if host.exists(f"{d}/version") or host.exists(f"{d}/load"):
            base = d
            break
    if base is None:
        root = args.get("debugfs_root", "/sys/kernel/debug")
        try:
            host.listdir(root)
        except AccessDenied:
            if _rknpu_hint(ctx):
                ctx.denied(f"{root}/rknpu", "RKNPU driver version and NPU load (debugfs)")
                return
        except HostError:
            pass
        raise NoData("no RKNPU debugfs/procfs files")
    rec: Dict[str, Any] = {"vendor": "rknpu", "driver": {"name": "rknpu"},
                           "name": args.get("name", "Rockchip NPU")}
    srcs: Dict[str, str] = {}
    errors: List[str] = []
    vpath = f"{base}/version"
    vtext = ctx.read(vpath)
    if vtext is not None:
        try:
            ver = parse_rknpu_version(vtext)["version"]
        except ValueError as e:
            ver = None
            errors.append(f"{vpath}: {e}")
        if ver:
            rec["driver"]["version"] = ver
            srcs["driver.version"] = vpath
            ctx.facts.set("drivers.rknpu.version", ver, vpath)
            ctx.facts.set("drivers.rknpu.loaded", True, vpath)
            ctx.facts.set("drivers.rknpu.source", vpath)
    lpath = f"{base}/load"
    load = _read_load(ctx, lpath, errors)
    if load is not None:
        rec["load"] = dict(load, source=lpath)
        srcs["load"] = lpath
        samples = [load]
        sample_s = float(ctx.options.get("sample_s", 0) or 0)
        if sample_s > 0:
            step = min(0.5, sample_s / 4.0)
            end = time.monotonic() + sample_s
            while time.monotonic() < end:
                time.sleep(step)
                nxt = _read_load(ctx, lpath)
                if nxt is not None:
                    samples.append(nxt)
            rec["load"]["samples"] = len(samples)
        if all(0 <= c <= 100 for s in samples for c in s["cores_percent"]):
            util = sum(s["max_percent"] for s in samples) / len(samples)
            rec["utilization_percent"] = int(util) if util == int(util) else round(util, 1)
            srcs["utilization_percent"] = lpath
        else:
            bad = [s for s in samples if any(not 0 <= c <= 100 for c in s["cores_percent"])][0]
            rec["load"].update(bad)
            rec["load"]["invalid"] = True
    if "load" not in rec and "version" not in rec["driver"]:
        if errors:
            raise ProbeError("unparsable " + "; ".join(errors))
        raise NoData(f"{base}: no readable version or load")
    # debugfs exists only while the rknpu driver is bound
    rec["driver"]["bound"] = True
    srcs["driver.bound"] = base
    ctx.facts.add_accelerator(rec, sources=srcs, source=base)
    if errors:
        # what could be read is kept; the rest is a probe error (probe-failed says which)
        raise ProbeError("unparsable " + "; ".join(errors))


# -- derivers -----------------------------------------------------------------------------
def _devfreq_read(host: Host, path: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for attr, key in (("cur_freq", "cur_hz"), ("min_freq", "min_hz"), ("max_freq", "max_hz")):
        v = _int(host.read_attr(f"{path}/{attr}"))
        if v is not None:
            out[key] = v
    gov = host.read_attr(f"{path}/governor")
    if gov:
        out["governor"] = gov
    return out


def _devfreq_name(facts: Facts, base: str, name: str, source: Optional[str]) -> None:
    if not name:
        return
    facts.set(f"{base}.devfreq_name", name, source)
    # the persistent fix of governor-not-performance (a rule template cannot hold ATTR{...})
    facts.set(f"{base}.udev_rule", f'ACTION=="add", SUBSYSTEM=="devfreq", KERNEL=="{name}", '
                                   'ATTR{governor}="performance"', source)


@deriver(order=60)
def link_devfreq(facts: Facts, host: Host) -> None:
    """accelerators[].freq from the devfreq device of the same sysfs device (or devfreq path)."""
    accels = facts.get("accelerators") or []
    devs = facts.get("devfreq.devices") or []
    for i, a in enumerate(accels):
        want = (a.get("freq") or {}).get("devfreq")
        sysfs = a.get("sysfs")
        match = None
        for j, d in enumerate(devs):
            if (sysfs and d.get("device") == sysfs) or (want and d.get("sysfs") == want):
                match = j
                break
        base = f"accelerators[{i}].freq"
        if match is not None:
            d = devs[match]
            facts.set(f"{base}.devfreq", d.get("sysfs"), facts.source_of(f"devfreq.devices[{match}]"))
            _devfreq_name(facts, base, d.get("name") or posixpath.basename(d.get("sysfs") or ""),
                          facts.source_of(f"devfreq.devices[{match}]"))
            for key in ("cur_hz", "min_hz", "max_hz", "governor"):
                if d.get(key) is not None and facts.get(f"{base}.{key}") is None:
                    facts.set(f"{base}.{key}", d[key],
                              facts.source_of(f"devfreq.devices[{match}].{key}"))
        elif want and not devs:
            # the devfreq probe gave nothing (not run, or another layout): read the few files
            _devfreq_name(facts, base, posixpath.basename(want), want)
            for key, val in _devfreq_read(host, want).items():
                if facts.get(f"{base}.{key}") is None:
                    attr = {"cur_hz": "cur_freq", "min_hz": "min_freq", "max_hz": "max_freq"}.get(key, key)
                    facts.set(f"{base}.{key}", val, f"{want}/{attr}")


def _zones(facts: Facts, host: Host) -> List[Tuple[Dict[str, Any], str]]:
    zones = facts.get("thermal.zones")
    if zones:
        return [(z, facts.source_of(f"thermal.zones[{k}]") or z.get("sysfs", "")) for k, z in enumerate(zones)]
    out = []
    for zdir in host.glob("/sys/class/thermal/thermal_zone*"):
        ztype = host.read_attr(f"{zdir}/type")
        temp = _int(host.read_attr(f"{zdir}/temp"))
        if ztype is None:
            continue
        z: Dict[str, Any] = {"zone": posixpath.basename(zdir), "type": ztype}
        if temp is not None:
            z["temp_c"] = round(temp / 1000.0, 3)
        out.append((z, f"{zdir}/temp"))
    return out


@deriver(order=61)
def link_thermal(facts: Facts, host: Host) -> None:
    """temperature_c / thermal_zone of a SoC accelerator from its thermal zone by type."""
    accels = facts.get("accelerators") or []
    wanted = [(i, a) for i, a in enumerate(accels)
              if a.get("temperature_c") is None
              and ((a.get("sensors") or {}).get("temperature") or {}).get("zone_types")]
    if not wanted:
        return
    zones = _zones(facts, host)
    for i, a in wanted:
        types = a["sensors"]["temperature"]["zone_types"]
        same_vendor = [x for x in accels if x.get("vendor") == a.get("vendor")]
        if len(same_vendor) != 1:
            continue  # a zone is per SoC; several devices of one vendor cannot share it
        for t in types:
            hit = [(z, src) for z, src in zones if z.get("type") == t and z.get("temp_c") is not None]
            if hit:
                z, src = hit[0]
                facts.set(f"accelerators[{i}].temperature_c", z["temp_c"], src)
                facts.set(f"accelerators[{i}].thermal_zone", z.get("zone"), src)
                facts.set(f"accelerators[{i}].sensors.temperature.available", True, src)
                facts.set(f"accelerators[{i}].sensors.temperature.zone_type", t, src)
                break


@deriver(order=90)
def count_inventory(facts: Facts, host: Host) -> None:
    """inventory.accelerator_count, only when the count is known.

    Unknown when the sysfs scan did not complete, or a vendor probe recorded
    `inventory.unknown[]` (or `inventory.incomplete[]`): its tool failed, so devices that only
    it can see may exist.
    """
    if not facts.get("inventory.sysfs_scanned"):
        return
    if facts.get("inventory.incomplete") or facts.get("inventory.unknown"):
        return
    facts.set("inventory.accelerator_count", len(facts.get("accelerators") or []), "/sys")
