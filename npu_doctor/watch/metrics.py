"""Prometheus textfile for node_exporter's textfile collector (prometheus_client, atomic).

`write_textfile(dir, tracker)` writes `<dir>/npu_doctor.prom`: temperatures (°C),
utilisation (%), throttling state, counts and seconds, runtime-suspend counts and seconds,
and the current findings. prometheus_client writes a temporary file and renames it, so
node_exporter never reads half a file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..facts import accelerator_key, accelerator_label

if TYPE_CHECKING:  # pragma: no cover
    from .events import Tracker

FILENAME = "npu_doctor.prom"


def write_textfile(directory: str, tracker: "Tracker") -> str:
    """Write the metrics file; returns its path. Raises OSError (or ImportError without
    prometheus-client: install npu-doctor[watch])."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    facts = tracker.last_facts
    zl = ["zone", "type"]  # zone is unique (thermal_zone3); two zones may share a type
    zone_temp = Gauge("npu_doctor_thermal_zone_temperature_celsius", "Thermal zone temperature",
                      zl, registry=reg)
    zone_trip = Gauge("npu_doctor_thermal_zone_passive_trip_celsius", "Lowest passive trip point",
                      zl, registry=reg)
    throttling = Gauge("npu_doctor_throttling", "1 while the zone is at or above its passive trip",
                       zl, registry=reg)
    throttle_n = Gauge("npu_doctor_throttling_events", "Throttling episodes since start", zl, registry=reg)
    throttle_s = Gauge("npu_doctor_throttling_seconds", "Seconds spent throttling (ended episodes)",
                       zl, registry=reg)
    for z in facts.get("thermal.zones", []) or []:
        key = z.get("zone") or z.get("type") or "thermal"
        lab = (key, z.get("type") or key)
        if isinstance(z.get("temp_c"), (int, float)) and not z.get("reading_invalid"):
            zone_temp.labels(*lab).set(z["temp_c"])
        if isinstance(z.get("passive_trip_c"), (int, float)):
            zone_trip.labels(*lab).set(z["passive_trip_c"])
        throttling.labels(*lab).set(1 if key in tracker.throttling else 0)
        throttle_n.labels(*lab).set(tracker.throttle_count.get(key, 0))
        throttle_s.labels(*lab).set(tracker.throttle_seconds.get(key, 0.0))
    labels = ["accelerator", "vendor"]
    a_temp = Gauge("npu_doctor_accelerator_temperature_celsius", "Accelerator temperature", labels, registry=reg)
    a_util = Gauge("npu_doctor_accelerator_utilization_percent", "Accelerator utilisation", labels, registry=reg)
    a_susp = Gauge("npu_doctor_accelerator_runtime_suspended", "1 while runtime PM has the device suspended",
                   labels, registry=reg)
    a_susp_n = Gauge("npu_doctor_accelerator_runtime_suspend_events", "Runtime suspends since start",
                     labels, registry=reg)
    a_susp_s = Gauge("npu_doctor_accelerator_runtime_suspended_seconds", "Seconds suspended (ended episodes)",
                     labels, registry=reg)
    for a in facts.get("accelerators", []) or []:
        key, lab = accelerator_key(a), (accelerator_label(a), a.get("vendor", "unknown"))
        if isinstance(a.get("temperature_c"), (int, float)):
            a_temp.labels(*lab).set(a["temperature_c"])
        if isinstance(a.get("utilization_percent"), (int, float)):
            a_util.labels(*lab).set(a["utilization_percent"])
        a_susp.labels(*lab).set(1 if tracker.runtime.get(key) == "suspended" else 0)
        a_susp_n.labels(*lab).set(tracker.suspend_count.get(key, 0))
        a_susp_s.labels(*lab).set(tracker.suspend_seconds.get(key, 0.0))
    finding = Gauge("npu_doctor_finding", "1 for each finding of the last check",
                    ["id", "severity", "subject"], registry=reg)
    for (rid, subject), f in (tracker.findings or {}).items():
        finding.labels(rid, f.severity, subject).set(1)
    fb = Gauge("npu_doctor_cpu_fallback_suspected", "1 while CPU fallback is suspected", registry=reg)
    fb.set(1 if tracker.fallback else 0)
    path = os.path.join(directory, FILENAME)
    write_to_textfile(path, reg)
    return path
