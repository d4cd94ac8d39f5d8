"""Prometheus metrics of `watch`: node_exporter's textfile collector and `--listen`.

Names follow https://prometheus.io/docs/practices/naming/: base units (`_celsius`, `_hertz`,
`_watts`, `_seconds`), ratios 0-1 (`_ratio`), counters `_total` whose value includes the
episode still in progress. Accelerator series carry `vendor`, `model` (the name the vendor
tool gives) and `device` (PCI address, sysfs name or device node); thermal zones `zone`
(thermal_zoneN) and `type`.

    npu_doctor_thermal_zone_temperature_celsius{zone,type}          gauge
    npu_doctor_thermal_zone_passive_trip_celsius{zone,type}         gauge
    npu_doctor_thermal_zone_throttling{zone,type}                   gauge 0/1
    npu_doctor_thermal_zone_throttling_episodes_total{zone,type}    counter
    npu_doctor_thermal_zone_throttling_seconds_total{zone,type}     counter
    npu_doctor_accelerator_temperature_celsius{vendor,model,device} gauge
    npu_doctor_accelerator_utilization_ratio{...}                   gauge 0-1
    npu_doctor_accelerator_power_watts{...}                         gauge
    npu_doctor_accelerator_clock_hertz{...}, _clock_max_hertz{...}  gauge
    npu_doctor_accelerator_runtime_suspended{...}                   gauge 0/1
    npu_doctor_accelerator_runtime_suspends_total{...}              counter
    npu_doctor_accelerator_runtime_suspended_seconds_total{...}     counter
    npu_doctor_devfreq_clock_hertz{device,governor}, _clock_max_hertz{device}   gauge
    npu_doctor_cpu_busy_ratio                                        gauge 0-1
    npu_doctor_cpu_fallback_suspected                                gauge 0/1
    npu_doctor_finding{id,severity,subject}                          gauge 1 per current finding
    npu_doctor_check_success                                         gauge 0/1 (last full check ran)
    npu_doctor_probe_success{probe}                                  gauge 0/1
    npu_doctor_info{version}                                         gauge 1

`write_textfile` writes `<dir>/npu_doctor.prom` world-readable (0644, whatever the umask:
node_exporter runs as its own user) through a temporary file in the same directory, fsync,
then rename, so node_exporter never reads half a file. Needs prometheus-client
(npu-doctor[watch]).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..facts import accelerator_key

if TYPE_CHECKING:  # pragma: no cover
    from .events import Tracker

FILENAME = "npu_doctor.prom"
ZONE = ["zone", "type"]
ACCEL = ["vendor", "model", "device"]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def accel_labels(a: Dict[str, Any]) -> Tuple[str, str, str]:
    """(vendor, model, device) of an accelerator fact."""
    device = (a.get("pci_address") or (a.get("sysfs") or "").rstrip("/").rsplit("/", 1)[-1]
              or a.get("dev") or str(a.get("index", "")) or "unknown")
    return (str(a.get("vendor") or "unknown"), str(a.get("name") or a.get("vendor") or "unknown"), str(device))


def families(tracker: "Tracker", now: Optional[float] = None) -> List[Any]:
    """The metric families for the tracker's last sample (prometheus_client Metric objects)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from .. import __version__

    now = time.time() if now is None else now
    facts = tracker.last_facts
    g = lambda name, doc, labels=(): GaugeMetricFamily(name, doc, labels=list(labels))  # noqa: E731
    c = lambda name, doc, labels=(): CounterMetricFamily(name, doc, labels=list(labels))  # noqa: E731
    p = "npu_doctor_"
    z_temp = g(p + "thermal_zone_temperature_celsius", "Thermal zone temperature", ZONE)
    z_trip = g(p + "thermal_zone_passive_trip_celsius", "Lowest passive trip point of the zone", ZONE)
    z_thr = g(p + "thermal_zone_throttling", "1 while the zone is at or above its passive trip", ZONE)
    z_n = c(p + "thermal_zone_throttling_episodes", "Throttling episodes since the daemon started", ZONE)
    z_s = c(p + "thermal_zone_throttling_seconds", "Seconds spent throttling, the episode in progress included", ZONE)
    for z in facts.get("thermal.zones", []) or []:
        key = z.get("zone") or z.get("type") or "thermal"
        lab = [key, z.get("type") or key]
        if _num(z.get("temp_c")) and not z.get("reading_invalid"):
            z_temp.add_metric(lab, z["temp_c"])
        if _num(z.get("passive_trip_c")):
            z_trip.add_metric(lab, z["passive_trip_c"])
        start = tracker.throttling.get(key)
        z_thr.add_metric(lab, 1 if start is not None else 0)
        z_n.add_metric(lab, tracker.throttle_count.get(key, 0))
        z_s.add_metric(lab, tracker.throttle_seconds.get(key, 0.0) + (max(0.0, now - start) if start is not None else 0.0))
    a_temp = g(p + "accelerator_temperature_celsius", "Accelerator temperature", ACCEL)
    a_util = g(p + "accelerator_utilization_ratio", "Accelerator busy fraction (0-1)", ACCEL)
    a_pow = g(p + "accelerator_power_watts", "Accelerator power draw", ACCEL)
    a_clk = g(p + "accelerator_clock_hertz", "Accelerator core clock", ACCEL)
    a_clkmax = g(p + "accelerator_clock_max_hertz", "Accelerator maximum core clock", ACCEL)
    a_susp = g(p + "accelerator_runtime_suspended", "1 while runtime PM has the device suspended", ACCEL)
    a_n = c(p + "accelerator_runtime_suspends", "Runtime suspends since the daemon started", ACCEL)
    a_s = c(p + "accelerator_runtime_suspended_seconds", "Seconds runtime-suspended, the episode in progress included", ACCEL)
    for a in facts.get("accelerators", []) or []:
        key, lab = accelerator_key(a), list(accel_labels(a))
        if _num(a.get("temperature_c")):
            a_temp.add_metric(lab, a["temperature_c"])
        if _num(a.get("utilization_percent")):
            a_util.add_metric(lab, a["utilization_percent"] / 100.0)
        if _num(a.get("power_w")):
            a_pow.add_metric(lab, a["power_w"])
        freq = a.get("freq") or {}
        if _num(freq.get("cur_hz")):
            a_clk.add_metric(lab, freq["cur_hz"])
        if _num(freq.get("max_hz")):
            a_clkmax.add_metric(lab, freq["max_hz"])
        suspended = tracker.runtime.get(key) == "suspended"
        a_susp.add_metric(lab, 1 if suspended else 0)
        a_n.add_metric(lab, tracker.suspend_count.get(key, 0))
        since = tracker.suspend_since.get(key) if suspended else None
        a_s.add_metric(lab, tracker.suspend_seconds.get(key, 0.0) + (max(0.0, now - since) if since is not None else 0.0))
    d_clk = g(p + "devfreq_clock_hertz", "devfreq device current frequency", ["device", "governor"])
    d_max = g(p + "devfreq_clock_max_hertz", "devfreq device maximum frequency", ["device"])
    for d in (facts.get("devfreq.devices", []) or []):
        name = str(d.get("name") or "devfreq")
        if _num(d.get("cur_hz")):
            d_clk.add_metric([name, str(d.get("governor") or "")], d["cur_hz"])
        if _num(d.get("max_hz")):
            d_max.add_metric([name], d["max_hz"])
    cpu = g(p + "cpu_busy_ratio", "CPU busy fraction over the last sample (0-1)")
    busy = facts.get("cpu.busy_percent")
    if not _num(busy):
        busy = facts.get("cpu.load_percent")
    if _num(busy):
        cpu.add_metric([], max(0.0, min(1.0, busy / 100.0)))
    fb = g(p + "cpu_fallback_suspected", "1 while CPU fallback is suspected")
    fb.add_metric([], 1 if tracker.fallback else 0)
    finding = g(p + "finding", "1 for each finding of the last full check", ["id", "severity", "subject"])
    for (rid, subject), f in sorted((tracker.findings or {}).items()):
        finding.add_metric([rid, f.severity, subject or ""], 1)
    check_ok = g(p + "check_success", "1 when the last full check ran to the end")
    if tracker.check_ok is not None:
        check_ok.add_metric([], 1 if tracker.check_ok else 0)
    probe_ok = g(p + "probe_success", "1 when the probe ran (0: it failed)", ["probe"])
    for pid, ok in sorted(tracker.probe_ok.items()):
        probe_ok.add_metric([pid], 1 if ok else 0)
    info = g(p + "info", "npu-doctor version", ["version"])
    info.add_metric([__version__], 1)
    return [z_temp, z_trip, z_thr, z_n, z_s, a_temp, a_util, a_pow, a_clk, a_clkmax, a_susp, a_n,
            a_s, d_clk, d_max, cpu, fb, finding, check_ok, probe_ok, info]


class Snapshot:
    """A prometheus_client collector serving the families of the last completed sample
    (built by the daemon loop, so a scrape never reads the tracker while it changes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: List[Any] = []

    def update(self, fams: List[Any]) -> None:
        with self._lock:
            self._families = list(fams)

    def collect(self):
        with self._lock:
            return iter(list(self._families))


def render(fams: List[Any]) -> bytes:
    """The text exposition format of these families."""
    from prometheus_client import CollectorRegistry, generate_latest

    snap = Snapshot()
    snap.update(fams)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(snap)
    return generate_latest(reg)


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write the textfile atomically with an explicit mode (node_exporter runs as another user,
    so the umask must not decide); the temp file is a dot-file node_exporter ignores.
    Raises OSError."""
    from ..outputs import OutputPathError
    from ..outputs import write_atomic as _write

    try:
        _write(path, data, "metrics textfile", mode)
    except OutputPathError as e:
        raise OSError(str(e)) from None


def write_textfile(directory: str, tracker: "Tracker", now: Optional[float] = None) -> str:
    """Write `<directory>/npu_doctor.prom`; returns its path. Raises OSError (or ImportError
    without prometheus-client: install npu-doctor[watch])."""
    path = os.path.join(directory, FILENAME)
    write_atomic(path, render(families(tracker, now)))
    return path


def check_writable(directory: str) -> None:
    """Raise OSError unless a file can be created (and removed) in `directory`: the daemon's
    start-up test, so that a wrong directory is exit 2 and not an error every sample."""
    probe = os.path.join(directory, f".npu_doctor-write-test-{os.getpid()}")
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    os.unlink(probe)


def serve(address: str, snapshot: Snapshot):
    """Serve /metrics of `snapshot` on `address` ("HOST:PORT", "[::1]:PORT" or ":PORT") in a
    daemon thread. Returns the server. Raises ValueError for a bad address, OSError when the
    port cannot be bound."""
    from prometheus_client import CollectorRegistry, start_http_server

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen {address}: expected HOST:PORT (e.g. 127.0.0.1:9435)")
    host = host.strip("[]") or "0.0.0.0"
    reg = CollectorRegistry(auto_describe=False)
    reg.register(snapshot)
    return start_http_server(int(port), addr=host, registry=reg)
