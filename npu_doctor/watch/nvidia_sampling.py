"""The watch sampling path for NVIDIA GPUs: between full re-inventories, one
`nvidia-smi --query-gpu=... --format=csv,nounits` instead of the whole `nvidia-smi -q`.

The `nvidia` probe parses a report of ~250 lines per GPU (and reads apt's history, the NVML
library name, /proc/driver/nvidia/version) each time it runs; at 64 GPUs that was most of
what `watch` cost every second. `NvidiaSampler` keeps the probe's last full result and, on
the samples in between, asks nvidia-smi only for what changes (temperature, utilisation,
power, clock, performance state, clock event reasons, PCIe link; parsers.nvidia_query), and
puts the answers into a copy of that result: the same fact paths, units and names, so the
Tracker's events and the metrics are what the full probe would have given.

The full probe runs instead (and its result is kept for the next samples) when there is no
kept result or it was not a clean `ok` (nvidia-smi failed, a Jetson's integrated GPU), after
a udev event or every inventory interval (the daemon calls `invalidate`), and whenever the
query does not answer cleanly: missing (a snapshot whose commands.toml lacks this argv),
failed, timed out, unparsable, or naming a different set of GPUs (one fell off the bus).
A field the driver refuses (`Field "X" is not a valid field to query.`) is asked under its
new name (R535's `clocks_event_reasons.*`) or no more, and the query is tried again at once.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Dict, List, Optional

from ..errors import HostError
from ..host import Host
from ..parsers.nvidia_query import (
    OPTIONAL_FIELDS,
    REFRESHED,
    RENAMED,
    fields_for,
    invalid_field,
    query_argv,
    query_rows,
    refresh_record,
    sample_record,
)
from ..probes import ProbeResult

#: The probe id of the full `nvidia-smi -q` probe (probes/nvidia.toml).
NVIDIA_PROBE = "nvidia"


class NvidiaSampler:
    """The `nvidia` probe's last full result and the query that refreshes it."""

    def __init__(self) -> None:
        self.result: Optional[ProbeResult] = None
        self.fields: List[str] = []
        self._by_addr: Dict[str, int] = {}

    def invalidate(self) -> None:
        """A udev event, the inventory interval, a reload: the next sample runs the full probe."""
        self.result = None

    def store(self, result: ProbeResult) -> None:
        """Keep a full result of the `nvidia` probe when the samples after it may refresh it:
        status ok, nvidia-smi answered cleanly, each GPU has a PCI address, not a Jetson."""
        self.result = None
        facts = result.facts
        if result.status != "ok" or facts is None or facts.get("nvidia.smi.status") != "ok" \
                or facts.get("nvidia.smi.integrated"):
            return
        accels = facts.data.get("accelerators") or []
        addrs = [str(a.get("pci_address") or "") for a in accels if isinstance(a, dict)]
        if not accels or len(addrs) != len(accels) or not all(addrs) or len(set(addrs)) != len(addrs):
            return
        self.result = result
        self._by_addr = {a: i for i, a in enumerate(addrs)}
        # the fields stay those of the first inventory: one the driver refused stays dropped
        if not self.fields:
            self.fields = fields_for(accels)

    def refresh(self, host: Host, timeout_s: float = 15.0) -> Optional[ProbeResult]:
        """A copy of the kept result with the changing values read again, or None when the
        full probe must run instead (nothing kept, or the query did not answer cleanly)."""
        if self.result is None:
            return None
        start = time.monotonic()
        for _attempt in range(1 + len(OPTIONAL_FIELDS) + len(RENAMED)):
            try:
                res = host.run(query_argv(self.fields), timeout=timeout_s)
            except HostError:  # not installed, or a snapshot without this argv
                return None
            if res.timed_out:
                return None
            bad = invalid_field(res.stdout + "\n" + res.stderr) if res.returncode != 0 else None
            if bad and bad in self.fields:
                i = self.fields.index(bad)
                if bad in RENAMED and RENAMED[bad] not in self.fields:
                    self.fields[i] = RENAMED[bad]
                else:
                    del self.fields[i]
                continue
            if res.returncode != 0:
                return None
            try:
                rows = query_rows(res.stdout)
            except ValueError:
                return None
            return self._apply(rows, res.source or "$ " + " ".join(query_argv(self.fields)), start)
        return None

    def _apply(self, rows: List[Dict[str, Optional[str]]], source: str, start: float) -> Optional[ProbeResult]:
        kept = self.result
        assert kept is not None and kept.facts is not None
        samples = [sample_record(r) for r in rows]
        addrs = [s.get("pci_address") for s in samples]
        if len(samples) != len(self._by_addr) or set(addrs) != set(self._by_addr):
            return None  # a GPU appeared or went: the full probe says which
        facts = copy.copy(kept.facts)  # data and sources replaced below, the kept ones untouched
        accels = list(kept.facts.data["accelerators"])
        sources = dict(kept.facts.sources)
        for s in samples:
            i = self._by_addr[s["pci_address"]]
            accels[i] = refresh_record(accels[i], s, self.fields)
            _resource(sources, f"accelerators[{i}]", accels[i], self.fields, source)
        facts.data = dict(kept.facts.data, accelerators=accels)
        facts.sources = sources
        facts._index = None  # the copy must not share the kept result's accelerator index
        out = copy.copy(kept)
        out.facts = facts
        out.duration_s = time.monotonic() - start
        return out


#: Thermal values parsers.nvidia derives from the readings (limit, headroom).
_DERIVED = ("thermal.limit_c", "thermal.limit", "thermal.headroom_c", "thermal.memory_headroom_c",
            "thermal.max_operating_below_slowdown_c")


def _resource(sources: Dict[str, str], base: str, new: Dict[str, Any], fields: List[str],
              source: str) -> None:
    """Sources of a refreshed record: each value the query read (or that is derived from
    one) comes from the query, one it left unknown loses its source, the rest keep the full
    probe's."""
    keys = REFRESHED + _DERIVED + tuple(f"thermal.{k}" for f, k in OPTIONAL_FIELDS.items() if f in fields)
    for key in keys:
        group, _, leaf = key.partition(".")
        node = new.get(group) if leaf else None
        if (leaf in node) if isinstance(node, dict) else (not leaf and key in new):
            sources[f"{base}.{key}"] = source
        else:
            sources.pop(f"{base}.{key}", None)
