"""The watch sampling path: between full re-inventories, re-read only what changes.

The `accelerators` probe walks all of sysfs (PCI devices, classes, device tree, devfreq)
to find accelerators; on an 8-GPU node that was most of a sample's cost, every second, for a
list that changes only on hot-plug. `InventoryCache` keeps the probe's last result and, on
the samples in between, re-reads only the attributes that change at run time (runtime PM
state and counters, PCIe link speed and width) of the devices it already knows. A full
re-inventory runs on the first sample, after a udev event, and every `interval_s` seconds.

Only an inventory whose changing facts are all of that kind is reused: a device whose
temperature, load or clock the inventory itself reads (SoC NPUs, Hailo, Coral) gets the
full probe every sample, as before.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Optional, Tuple

from ..collectors.accelerators.inventory import parse_link_speed
from ..host import Host
from ..probes import ProbeResult

#: Seconds between full re-inventories when no udev event asks for one sooner.
INVENTORY_INTERVAL_S = 60.0


def _int(v: Optional[str]) -> Optional[int]:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


#: (fact key under accelerators[i], attribute under the device's sysfs dir, conversion)
REFRESH: Tuple[Tuple[str, str, Callable[[Optional[str]], Any]], ...] = (
    ("power.control", "power/control", lambda v: v or None),
    ("power.runtime_status", "power/runtime_status", lambda v: v or None),
    ("power.autosuspend_delay_ms", "power/autosuspend_delay_ms", _int),
    ("power.runtime_suspended_time_ms", "power/runtime_suspended_time", _int),
    ("power.runtime_active_time_ms", "power/runtime_active_time", _int),
    ("pcie.cur_speed_gts", "current_link_speed", parse_link_speed),
    ("pcie.cur_width", "current_link_width", _int),
)
#: Facts of an accelerators[] record that the inventory reads once and that do not change
#: while the device stays (anything else: the full probe runs every sample).
STATIC_PREFIXES = ("vendor", "name", "soc", "index", "pci_", "sysfs", "dev", "udev.",
                   "driver.", "pcie.max_", "numa_node", "sensors.", "ids.", "class", "subsystem",
                   "nodes", "render", "freq.devfreq", "firmware.")


def _refreshable(result: ProbeResult) -> bool:
    if result.status != "ok" or result.facts is None:
        return False
    keys = {k for k, _a, _c in REFRESH}
    for path, _v in result.facts.flat():
        if not path.startswith("accelerators["):
            continue
        rel = path.split("].", 1)[1] if "]." in path else ""
        if rel in keys or rel.startswith(STATIC_PREFIXES):
            continue
        return False
    return True


class InventoryCache:
    """The `accelerators` probe's last full result and when it was taken."""

    def __init__(self, interval_s: float = INVENTORY_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.result: Optional[ProbeResult] = None
        self.at = float("-inf")
        self.refreshable = False

    def invalidate(self) -> None:
        """A udev event or a reload: the next sample re-inventories."""
        self.result = None

    def store(self, result: ProbeResult, now: float) -> None:
        """Keep a full inventory taken at monotonic time `now` (seconds)."""
        self.result, self.at = result, now
        self.refreshable = _refreshable(result)

    def reusable(self, now: float) -> bool:
        """Whether the sample at monotonic time `now` may refresh the kept inventory instead
        of walking sysfs again."""
        return self.result is not None and self.refreshable and now - self.at < self.interval_s

    def refresh(self, host: Host) -> ProbeResult:
        """A copy of the stored result with the changing attributes read again."""
        assert self.result is not None
        res = copy.copy(self.result)
        res.facts = copy.deepcopy(self.result.facts)
        res.duration_s = 0.0
        accels = res.facts.data.get("accelerators") or []
        for i, rec in enumerate(accels):
            sysfs = rec.get("sysfs") if isinstance(rec, dict) else None
            if not sysfs:
                continue
            for key, attr, conv in REFRESH:
                path = f"{sysfs}/{attr}"
                value = conv(host.read_attr(path))
                group, leaf = key.split(".", 1)
                node: Dict[str, Any] = rec.get(group) or {}
                if value is None:
                    node.pop(leaf, None)
                    res.facts.sources.pop(f"accelerators[{i}].{key}", None)
                else:
                    node[leaf] = value
                    res.facts.sources[f"accelerators[{i}].{key}"] = path
                if node:
                    rec[group] = node
        return res
