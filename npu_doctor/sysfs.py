"""Small sysfs walks that several collectors share (the kernel's ABI, not a vendor's)."""

from __future__ import annotations

import posixpath
from typing import Callable, Dict, List, Optional, Tuple

from .errors import HostError
from .host import Host


def module_version(read: Callable[[str], Optional[str]], module: str) -> Tuple[Optional[str], str]:
    """(MODULE_VERSION of a loaded kernel module or None, the file it comes from):
    `/sys/module/<module>/version` (only modules that declare a version have one). `read` is
    the caller's reader (ProbeContext.read records a denied file; Host.read_attr does not)."""
    path = f"/sys/module/{module}/version"
    return read(path), path


def driver_of(host: Host, device: str) -> str:
    """Name of the driver bound to a sysfs device directory ('' when none)."""
    link = posixpath.join(device, "driver")
    try:
        return posixpath.basename(host.readlink(link))
    except HostError:
        if not host.exists(link):
            return ""
        return posixpath.basename(host.realpath(link))


def accel_devices(host: Host, driver: str) -> List[Dict[str, str]]:
    """[{accel, sysfs, pci_address}] for each /sys/class/accel/accel* bound to `driver`
    (Documentation/accel/introduction.rst: one accel minor per device, `device` links to it)."""
    out = []
    for accel in host.glob("/sys/class/accel/accel*"):
        dev = posixpath.join(accel, "device")
        if not host.exists(dev) or driver_of(host, dev) != driver:
            continue
        real = host.realpath(dev)
        out.append({"accel": accel, "sysfs": real, "pci_address": posixpath.basename(real).lower()})
    return out
