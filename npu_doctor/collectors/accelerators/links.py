"""Derivers that join accelerators with other probes' facts: devfreq, thermal zones, and the
inventory count."""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional, Tuple

from ...facts import Facts
from ...host import Host
from ...registry import deriver
from .inventory import _int


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


@deriver(after=("derive_catalog_facts",))
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


@deriver(after=("link_devfreq",))
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


@deriver(after=("derive_catalog_facts", "derive_coral", "derive_hailo"))
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
