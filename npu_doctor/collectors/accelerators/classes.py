"""Class devices: /sys/class/accel, apex (Coral), hailo_chardev, DRM render nodes."""

from __future__ import annotations

import posixpath
import re
from typing import Any, Dict, Optional

from ...host import Host
from ...parsers.thermal import plausible_c, plausible_trip_c
from .inventory import _INDEX_RE, _apply_row, _device_common, _int, _Inventory, _is_link, _set


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
    temp_c = round(val / 1000.0, 2)
    sensor: Dict[str, Any] = {"available": True, "path": path}
    rec.setdefault("sensors", {})["temperature"] = sensor
    if not plausible_c(temp_c):
        # -87.9 °C from an apex whose sensor stopped reporting (google-coral/edgetpu#843):
        # not a temperature, so not used for throttling; the raw value is kept as evidence
        sensor.update(reading_invalid=True, raw_c=temp_c)
        for key in ("sensors.temperature.raw_c", "sensors.temperature.path",
                    "sensors.temperature.reading_invalid"):
            srcs[key] = path
    else:
        _set(rec, srcs, "temperature_c", temp_c, path)
    trips = []  # (°C, attribute path); an implausible trip (a truncated value) is left out
    for t in info.get("trip_attrs", []):
        tv = _int(host.read_attr(f"{classdev}/{t}"))
        if tv is not None and plausible_trip_c(tv / 1000.0):
            trips.append((round(tv / 1000.0, 2), f"{classdev}/{t}"))
    if trips:
        _set(rec, srcs, "trip_points_c", [t for t, _ in trips], classdev)
        # the driver's throttle steps (Coral: 500 -> 250 -> 125 -> 62.5 MHz at trip 0/1/2):
        # the highest one the temperature has reached is the one in force
        if "temperature_c" in rec:
            crossed = [(t, p) for t, p in trips if rec["temperature_c"] >= t]
            if crossed:
                t, p = max(crossed)
                _set(rec, srcs, "throttle_trip_c", t, p)
