"""PCI devices whose class or id the detection tables list (probes/accelerators.toml)."""

from __future__ import annotations

import posixpath

from .inventory import _apply_row, _device_common, _Inventory, _set


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
