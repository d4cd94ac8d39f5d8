"""Platform NPUs from the device tree (`of_node/compatible`), disabled device-tree nodes,
and NPU devfreq devices found by name."""

from __future__ import annotations

import posixpath
from typing import Dict, List

from ...errors import HostError
from ...host import Host
from .inventory import _apply_row, _device_common, _Inventory, _is_link, _set


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
