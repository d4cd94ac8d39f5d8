"""Which kernel modules a lock pins: the accelerator-relevant ones, not every module of the
machine (a `vxlan` or `tcp_cubic` update on a VM is not an accelerator drift).

A module is pinned when it is
- the driver bound to an accelerator (`accelerators[*].driver.name`),
- a driver of the vendor tables (`[catalog.drivers]` of catalogs/*.toml: `rknpu`, `hailo_pci`,
  `nvidia`, `amdxdna`, `intel_vpu`, `apex`/`gasket`, Ascend's `drv_*` ...),
- a dependency of one of those: a module whose /proc/modules "used by" column (4th) names
  one of them, transitively (`drm` and `gpu_sched` under `amdxdna`, `gasket` under `apex`),
- or named by the lockspec's `[modules] also = [...]` (shell patterns; `["*"]` pins all).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Set

from ..namematch import any_match
from ..host import Host


def _norm(name: str) -> str:
    return name.replace("-", "_")


def vendor_drivers() -> Set[str]:
    """Module names of the vendor tables (`[catalog.drivers]` of every shipped catalog)."""
    try:
        from ..catalog import load_catalogs

        return {_norm(n) for n in load_catalogs().drivers}
    except Exception:  # a broken catalog is reported by `check`; the lock still pins bound drivers
        return set()


def used_by(host: Host) -> Dict[str, Set[str]]:
    """{module: modules that use it} from /proc/modules (`name size refcount users, state ...`)."""
    out: Dict[str, Set[str]] = {}
    try:
        text = host.read_text("/proc/modules")
    except Exception:
        return out
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1].isdigit():
            out[_norm(parts[0])] = {_norm(u) for u in parts[3].split(",") if u and u != "-"}
    return out


def accelerator_modules(facts: Dict[str, Any], host: Host, also: Iterable[str] = ()) -> Set[str]:
    """The normalised names (`-` as `_`) of the modules a lock pins (see the module doc)."""
    roots = set(vendor_drivers())
    for acc in facts.get("accelerators") or []:
        if isinstance(acc, dict):
            drv = acc.get("driver")
            name = drv.get("name") if isinstance(drv, dict) else None
            if isinstance(name, str) and name:
                roots.add(_norm(name))
    users = used_by(host)
    keep = set(roots)
    changed = True
    while changed:   # dependencies of what is kept, transitively
        changed = False
        for mod, by in users.items():
            if mod not in keep and by & keep:
                keep.add(mod)
                changed = True
    pats = [_norm(p) for p in also]
    drivers = facts.get("drivers") or {}
    if isinstance(drivers, dict):
        keep |= {_norm(m) for m in drivers if any_match(_norm(m), pats)}
    return keep


def is_pinned(module: str, keep: Set[str]) -> bool:
    return _norm(module) in keep
