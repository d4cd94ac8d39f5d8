"""Thermal zones and cooling devices: `thermal.zones[]`, `thermal.cooling_devices[]`.

Reads every `/sys/class/thermal/thermal_zone*` (type, temp, mode, policy,
trip_point_N_{type,temp,hyst}) and `cooling_device*` (type, cur_state, max_state). Units per
the kernel ABI (https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-class-thermal):
millidegrees become °C floats. A zone whose `temp` cannot be read (EIO, EINVAL, ENODATA —
sensors that are not ready, or a driver that refuses) is kept, with `temp_c` absent and
`read_error` saying why. Shapes are in npu_doctor/parsers/thermal.py (build_zone).
"""

from __future__ import annotations

import posixpath
import re
from typing import Dict, Optional, Tuple

from ..errors import AccessDenied, CommandNotFound, HostError, NotFound
from ..lazyregex import lazy
from ..parsers.thermal import build_zone, parse_int
from ..probes import NoData, ProbeContext
from ..registry import collector

THERMAL_CLASS = "/sys/class/thermal"
_ZONE_ATTR_RE = lazy(r"^(type|temp|mode|policy|trip_point_\d+_(?:type|temp|hyst))$")


def read_attr_err(ctx: ProbeContext, path: str) -> Tuple[Optional[str], Optional[str]]:
    """(stripped text, None) or (None, why it could not be read). Permission denied is also
    recorded in access.denied."""
    try:
        return ctx.host.read_text(path, 65536).strip().strip("\x00"), None
    except NotFound:
        return None, "missing"
    except AccessDenied:
        ctx.denied(path, "thermal zone temperature")
        return None, "permission denied"
    except HostError as e:
        return None, e.reason or str(e)


def _entries(ctx: ProbeContext, prefix: str):
    try:
        names = ctx.host.listdir(THERMAL_CLASS)
    except HostError:
        return []
    pat = re.compile(re.escape(prefix) + r"(\d+)$")
    found = [(int(m.group(1)), n) for n in names for m in [pat.match(n)] if m]
    return [n for _, n in sorted(found)]


@collector("thermal")
def collect_thermal(ctx: ProbeContext) -> None:
    zones = []
    for name in _entries(ctx, "thermal_zone"):
        base = posixpath.join(THERMAL_CLASS, name)
        try:
            attr_names = [a for a in ctx.host.listdir(base) if _ZONE_ATTR_RE.match(a)]
        except AccessDenied:
            ctx.denied(base, "thermal zone")
            continue
        except HostError:
            continue
        attrs: Dict[str, Optional[str]] = {}
        temp_error = None
        for a in attr_names:
            if a == "temp":
                attrs[a], temp_error = read_attr_err(ctx, posixpath.join(base, a))
            else:
                attrs[a] = ctx.read(posixpath.join(base, a))
        if "temp" not in attr_names:
            temp_error = "no temp attribute"
        zone = build_zone(name, attrs)
        if temp_error and "temp_c" not in zone:
            zone["read_error"] = temp_error
        zone["sysfs"] = base
        zones.append(zone)
    cooling = []
    for name in _entries(ctx, "cooling_device"):
        base = posixpath.join(THERMAL_CLASS, name)
        rec = {"name": name, "sysfs": base}
        ctype = ctx.read(posixpath.join(base, "type"))
        if ctype:
            rec["type"] = ctype
        for a in ("cur_state", "max_state"):
            v = parse_int(ctx.read(posixpath.join(base, a)))
            if v is not None:
                rec[a] = v
        cooling.append(rec)
    if not zones and not cooling:
        raise NoData(f"no thermal zones or cooling devices under {THERMAL_CLASS}")
    if zones:
        ctx.facts.set("thermal.zones", zones, THERMAL_CLASS)
        for i, z in enumerate(zones):
            # per-leaf provenance: the zone's own directory
            for key in ("temp_c", "headroom_c", "read_error", "reading_invalid"):
                if key in z:
                    ctx.facts.sources[f"thermal.zones[{i}].{key}"] = f"{z['sysfs']}/temp"
            for key, kind in (("passive_trip_c", "passive"), ("critical_trip_c", "critical"),
                              ("throttle_trip_c", "passive")):
                if key in z:
                    idx = next((t["index"] for t in z["trips"]
                                if t.get("type") == kind and t["temp_c"] == z[key]), None)
                    ctx.facts.sources[f"thermal.zones[{i}].{key}"] = f"{z['sysfs']}/trip_point_{idx}_temp"
            for key in ("type", "mode", "policy"):
                if key in z:
                    ctx.facts.sources[f"thermal.zones[{i}].{key}"] = f"{z['sysfs']}/{key}"
    if cooling:
        ctx.facts.set("thermal.cooling_devices", cooling, THERMAL_CLASS)
        for i, c in enumerate(cooling):
            for key in ("type", "cur_state", "max_state"):
                if key in c:
                    ctx.facts.sources[f"thermal.cooling_devices[{i}].{key}"] = f"{c['sysfs']}/{key}"


#: The Raspberry Pi firmware's throttle word: `vcgencmd get_throttled` prints "throttled=0x%x";
#: the downstream kernel's firmware driver shows the same word as "%x" in sysfs
#: (raspberrypi/linux drivers/firmware/raspberrypi.c, get_throttled_show).
RPI_GET_THROTTLED = ["vcgencmd", "get_throttled"]
RPI_THROTTLED_SYSFS = "/sys/devices/platform/soc/soc:firmware/get_throttled"
_HEX_RE = lazy(r"^(?:0x)?([0-9a-fA-F]{1,8})$")


@collector("rpi_throttled")
def collect_rpi_throttled(ctx: ProbeContext) -> None:
    """`power.rpi_throttled` (the word as "0x..."), and the catalog events of its bits: the
    meaning of each bit is catalog data (catalogs/power.toml supply bits, catalogs/thermal.toml
    temperature bits), matched on the line in vcgencmd's own format so that a pasted
    `vcgencmd get_throttled` in a log and the live word read the same way."""
    from .logs import _add_catalog_events

    word: Optional[str] = None
    source = ""
    try:
        res = ctx.run(RPI_GET_THROTTLED)
        m = re.search(r"throttled=(0x[0-9a-fA-F]+)", res.stdout or "")
        if m:
            word, source = m.group(1).lower(), "vcgencmd get_throttled"
    except (CommandNotFound, HostError):
        pass
    if word is None:
        m = _HEX_RE.match((ctx.read(RPI_THROTTLED_SYSFS) or "").strip())
        if m:
            word, source = f"0x{int(m.group(1), 16):x}", RPI_THROTTLED_SYSFS
    if word is None:
        raise NoData("not a Raspberry Pi (no vcgencmd get_throttled, no firmware get_throttled)")
    ctx.facts.set("power.rpi_throttled", word, source)
    _add_catalog_events(ctx, f"throttled={word}", source, ("kernel", "runtime"), "runtime")
