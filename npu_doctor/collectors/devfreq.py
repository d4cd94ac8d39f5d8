"""devfreq devices: `devfreq.devices[]`.

Every `/sys/class/devfreq/NAME` (cur_freq, min_freq, max_freq, target_freq, governor,
available_governors, available_frequencies; Hz per
https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-class-devfreq) becomes
{name, sysfs: "/sys/class/devfreq/NAME", device, cur_hz, min_hz, max_hz, governor,
available_governors, available_hz}. `device` is the realpath of the device the devfreq
instance belongs to: the target of its `device` link when there is one, else the directory
above the class directory (`/sys/devices/platform/fdab0000.npu/devfreq/fdab0000.npu` ->
`/sys/devices/platform/fdab0000.npu`, the RK3588 NPU layout).
"""

from __future__ import annotations

import posixpath
from typing import Dict, Optional

from ..errors import AccessDenied, HostError
from ..parsers.thermal import build_devfreq
from ..probes import NoData, ProbeContext
from ..registry import collector

DEVFREQ_CLASS = "/sys/class/devfreq"
ATTRS = ("cur_freq", "min_freq", "max_freq", "target_freq", "governor", "available_governors",
         "available_frequencies")


def parent_device(ctx: ProbeContext, base: str) -> Optional[str]:
    """Realpath of the device that owns the devfreq instance at `base` (a class path)."""
    link = posixpath.join(base, "device")
    try:
        ctx.host.readlink(link)
        return ctx.host.realpath(link)
    except HostError:
        pass
    real = ctx.host.realpath(base)
    if real == base or not real.startswith("/sys/devices/"):
        return None
    parent = posixpath.dirname(real)
    if posixpath.basename(parent) == "devfreq":
        parent = posixpath.dirname(parent)
    return parent


@collector("devfreq")
def collect_devfreq(ctx: ProbeContext) -> None:
    try:
        names = ctx.host.listdir(DEVFREQ_CLASS)
    except AccessDenied:
        ctx.denied(DEVFREQ_CLASS, "devfreq devices")
        return
    except HostError:
        raise NoData(f"no {DEVFREQ_CLASS}") from None
    devices = []
    for name in names:
        base = posixpath.join(DEVFREQ_CLASS, name)
        attrs: Dict[str, Optional[str]] = {a: ctx.read(posixpath.join(base, a)) for a in ATTRS}
        if not any(v is not None for v in attrs.values()):
            continue
        rec = build_devfreq(name, attrs)
        rec["sysfs"] = base
        dev = parent_device(ctx, base)
        if dev:
            rec["device"] = dev
        devices.append(rec)
    if not devices:
        raise NoData(f"no devfreq devices under {DEVFREQ_CLASS}")
    ctx.facts.set("devfreq.devices", devices, DEVFREQ_CLASS)
    for i, rec in enumerate(devices):
        for key, attr in (("cur_hz", "cur_freq"), ("min_hz", "min_freq"), ("max_hz", "max_freq"),
                          ("target_hz", "target_freq"), ("governor", "governor"),
                          ("available_governors", "available_governors"),
                          ("available_hz", "available_frequencies")):
            if key in rec:
                ctx.facts.sources[f"devfreq.devices[{i}].{key}"] = f"{rec['sysfs']}/{attr}"
