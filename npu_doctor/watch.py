"""`npu-doctor watch`: a daemon that logs transitions, never one line per sample.

Every `interval` seconds it runs the fast probes (thermal zones, devfreq, accelerators, CPU
load; specs with `fast = true`) and turns what changed into events (ARCHITECTURE.md,
"Contract: watch events"): throttling-start/-end (with hysteresis: a zone that crossed its
passive trip must cool below trip minus the trip's hysteresis, default 2 °C, to end),
runtime-suspend/-resume, device-added/-removed, fallback-suspected/-cleared (accelerator near
idle while the CPU is busy for 3 samples in a row), probe-failed. Every `check_interval` it
runs the whole check and logs finding-raised / finding-cleared.

systemd: `READY=1` after the first complete sample, `WATCHDOG=1` only from this loop after a
sample completes (a hung probe stops the pings, so systemd restarts us), `STATUS=` one line,
`STOPPING=1` then exit 0 on SIGTERM; SIGHUP reloads probes and rules (`config-rejected` keeps
the old ones running).
"""

from __future__ import annotations

import datetime as _dt
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, IO, List, Optional, Sequence, Set, Tuple

from .check import Config, run_check
from .errors import ConfigError
from .facts import Facts
from .host import Host
from .probes import ProbeResult, ProbeSpec, run_probes
from .sdnotify import Notifier

PRIORITY = {"error": 3, "warning": 4, "info": 6}
#: Samples in a row a condition must hold before fallback-suspected (and clear after).
FALLBACK_SAMPLES = 3
FALLBACK_ACCEL_IDLE_PERCENT = 5.0
FALLBACK_CPU_BUSY_PERCENT = 50.0
DEFAULT_HYST_C = 2.0
#: Used when no probe spec is marked `fast = true`.
DEFAULT_FAST_AREAS = ("thermal", "accelerators", "power", "cpu")


@dataclass
class Event:
    """One transition. `ts` is seconds since the epoch; `fields` carry the numbers."""

    event: str
    subject: str
    severity: str
    message: str
    ts: float = field(default_factory=time.time)
    fields: Dict[str, Any] = field(default_factory=dict)

    def journal_line(self) -> str:
        return f"<{PRIORITY[self.severity]}>{self.event} {self.subject}: {self.message}"

    def json_line(self) -> str:
        d = {"ts": _dt.datetime.fromtimestamp(self.ts, _dt.timezone.utc).isoformat(timespec="milliseconds"),
             "event": self.event, "subject": self.subject, "severity": self.severity,
             "message": self.message}
        d.update(self.fields)
        return json.dumps(d, ensure_ascii=False, sort_keys=False, default=str)


def _accel_key(a: Dict[str, Any]) -> str:
    return (a.get("pci_address") or a.get("sysfs") or a.get("dev")
            or f"{a.get('vendor', '?')}:{a.get('index', '?')}")


def _accel_label(a: Dict[str, Any]) -> str:
    name = a.get("name") or a.get("vendor") or "accelerator"
    where = a.get("pci_address") or (a.get("sysfs") or "").rsplit("/", 1)[-1]
    return f"{name} {where}".strip() if where and where != name else name


def _c(v: float) -> str:
    """A temperature with one decimal, or two when the sensor gives them (86.25)."""
    two = f"{v:.2f}"
    return two[:-1] if two.endswith("0") else two


def _fmt_s(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


class Tracker:
    """Turns successive fact samples into events; holds the state and the counters."""

    def __init__(self) -> None:
        self.throttling: Dict[str, float] = {}          # zone (thermal_zoneN) -> start time
        self.zone_names: Dict[str, str] = {}            # zone -> type, for the status line
        self.throttle_count: Dict[str, int] = {}
        self.throttle_seconds: Dict[str, float] = {}
        self.runtime: Dict[str, str] = {}               # accel key -> runtime_status
        self.suspend_since: Dict[str, float] = {}
        self.suspend_count: Dict[str, int] = {}
        self.suspend_seconds: Dict[str, float] = {}
        self.present: Optional[Dict[str, str]] = None   # accel key -> label
        self.fallback_streak = 0
        self.clear_streak = 0
        self.fallback = False
        self.failed_probes: Set[str] = set()
        self.findings: Optional[Dict[Tuple[str, str], Any]] = None
        self.last_facts: Facts = Facts()
        self.probe_ok: Dict[str, bool] = {}             # probe id -> last run did not fail
        self.check_ok: Optional[bool] = None            # the last full check ran to the end

    # -- fast facts ---------------------------------------------------------------------
    def sample(self, facts: Facts, results: Sequence[ProbeResult], now: float) -> List[Event]:
        events: List[Event] = []
        self.last_facts = facts
        events += self._thermal(facts, now)
        events += self._presence(facts)
        events += self._runtime_pm(facts, now)
        events += self._fallback(facts)
        events += self._probes(results)
        return events

    def _thermal(self, facts: Facts, now: float) -> List[Event]:
        """throttling-start when a zone reaches a passive trip; -end when it falls below the
        lowest passive trip minus that trip's hysteresis. Zones are keyed by their sysfs name
        (two zones may share a type, e.g. two acpitz); the subject is the type."""
        out = []
        for z in facts.get("thermal.zones", []) or []:
            temp, first = z.get("temp_c"), z.get("passive_trip_c")
            key = z.get("zone") or z.get("type") or "thermal"
            name = z.get("type") or key
            if z.get("reading_invalid") or not isinstance(temp, (int, float)) \
                    or not isinstance(first, (int, float)):
                continue
            passive = [t for t in z.get("trips", []) or []
                       if t.get("type") == "passive" and isinstance(t.get("temp_c"), (int, float))]
            crossed = max((t["temp_c"] for t in passive if temp >= t["temp_c"]), default=first)
            hyst = DEFAULT_HYST_C
            for t in passive:
                if t.get("temp_c") == first and isinstance(t.get("hyst_c"), (int, float)):
                    hyst = max(float(t["hyst_c"]), 0.5)
            if key not in self.throttling and temp >= first:
                self.throttling[key] = now
                self.zone_names[key] = name
                self.throttle_count[key] = self.throttle_count.get(key, 0) + 1
                out.append(Event("throttling-start", name, "warning",
                                 f"{_c(temp)} °C >= passive trip {_c(crossed)} °C",
                                 fields={"zone": key, "temp_c": temp, "trip_c": crossed}))
            elif key in self.throttling and temp < first - hyst:
                started = self.throttling.pop(key)
                dur = now - started
                self.throttle_seconds[key] = self.throttle_seconds.get(key, 0.0) + dur
                out.append(Event("throttling-end", name, "info",
                                 f"{_c(temp)} °C < passive trip {_c(first)} °C - {hyst:g} °C hysteresis "
                                 f"after {_fmt_s(dur)} of throttling",
                                 fields={"zone": key, "temp_c": temp, "trip_c": first,
                                         "duration_s": round(dur, 3)}))
        return out

    def _presence(self, facts: Facts) -> List[Event]:
        now_present = {_accel_key(a): _accel_label(a) for a in facts.get("accelerators", []) or []}
        out = []
        if self.present is not None:
            for k in sorted(set(now_present) - set(self.present)):
                out.append(Event("device-added", now_present[k], "info", "accelerator appeared",
                                 fields={"key": k}))
            for k in sorted(set(self.present) - set(now_present)):
                out.append(Event("device-removed", self.present[k], "error",
                                 "accelerator disappeared (removed, fell off the bus or driver unbound)",
                                 fields={"key": k}))
                self.runtime.pop(k, None)
        self.present = now_present
        return out

    def _runtime_pm(self, facts: Facts, now: float) -> List[Event]:
        out = []
        for a in facts.get("accelerators", []) or []:
            key, label = _accel_key(a), _accel_label(a)
            status = (a.get("power") or {}).get("runtime_status")
            if status not in ("active", "suspended"):
                continue
            prev = self.runtime.get(key)
            self.runtime[key] = status
            if prev is None or prev == status:
                if prev is None and status == "suspended":
                    self.suspend_since[key] = now
                continue
            control = (a.get("power") or {}).get("control", "?")
            if status == "suspended":
                self.suspend_since[key] = now
                self.suspend_count[key] = self.suspend_count.get(key, 0) + 1
                out.append(Event("runtime-suspend", label, "warning",
                                 f"runtime PM suspended the device (power/control={control}); "
                                 "the next inference pays the resume",
                                 fields={"control": control}))
            else:
                since = self.suspend_since.pop(key, None)
                dur = (now - since) if since is not None else None
                if dur is not None:
                    self.suspend_seconds[key] = self.suspend_seconds.get(key, 0.0) + dur
                out.append(Event("runtime-resume", label, "info",
                                 "device resumed" + (f" after {_fmt_s(dur)} suspended" if dur is not None else ""),
                                 fields={"duration_s": round(dur, 3) if dur is not None else None}))
        return out

    def _fallback(self, facts: Facts) -> List[Event]:
        cpu = facts.get("cpu.busy_percent")
        if cpu is None:
            cpu = facts.get("cpu.load_percent")
        utils = [a.get("utilization_percent") for a in facts.get("accelerators", []) or []
                 if isinstance(a.get("utilization_percent"), (int, float))]
        if not isinstance(cpu, (int, float)) or not utils:
            return []
        suspect = cpu >= FALLBACK_CPU_BUSY_PERCENT and max(utils) <= FALLBACK_ACCEL_IDLE_PERCENT
        out = []
        if suspect:
            self.fallback_streak += 1
            self.clear_streak = 0
            if not self.fallback and self.fallback_streak >= FALLBACK_SAMPLES:
                self.fallback = True
                out.append(Event("fallback-suspected", "cpu", "warning",
                                 f"CPU {cpu:.0f} % busy while accelerators are at {max(utils):.0f} % "
                                 f"for {self.fallback_streak} samples: the model may be running on the CPU",
                                 fields={"cpu_percent": cpu, "accelerator_percent": max(utils)}))
        else:
            self.clear_streak += 1
            self.fallback_streak = 0
            if self.fallback and self.clear_streak >= FALLBACK_SAMPLES:
                self.fallback = False
                out.append(Event("fallback-cleared", "cpu", "info",
                                 f"CPU {cpu:.0f} %, accelerators up to {max(utils):.0f} %",
                                 fields={"cpu_percent": cpu, "accelerator_percent": max(utils)}))
        return out

    def _probes(self, results: Sequence[ProbeResult]) -> List[Event]:
        out = []
        for r in results:
            self.probe_ok[r.id] = r.status != "error"
            if r.status == "error" and r.id not in self.failed_probes:
                self.failed_probes.add(r.id)
                out.append(Event("probe-failed", r.id, "warning", r.error or "failed"))
            elif r.status != "error":
                self.failed_probes.discard(r.id)
        return out

    # -- slow facts -----------------------------------------------------------------------
    def check(self, findings: Sequence[Any]) -> List[Event]:
        now = {(f.id, f.subject): f for f in findings}
        out: List[Event] = []
        prev = self.findings or {}
        for key in [k for k in now if k not in prev]:
            f = now[key]
            out.append(Event("finding-raised", f.subject or f.id, f.severity, f"{f.id}: {f.message}",
                             fields={"rule": f.id}))
        for key in [k for k in prev if k not in now]:
            f = prev[key]
            out.append(Event("finding-cleared", f.subject or f.id, "info", f"{f.id}: no longer reported",
                             fields={"rule": f.id}))
        self.findings = now
        return out

    def status_line(self) -> str:
        accels = len(self.present or {})
        parts = [f"{accels} accelerator{'s' if accels != 1 else ''}"]
        parts.append("throttling: " + (", ".join(sorted(self.zone_names.get(k, k) for k in self.throttling))
                                       or "none"))
        susp = sum(1 for s in self.runtime.values() if s == "suspended")
        if susp:
            parts.append(f"{susp} suspended")
        if self.fallback:
            parts.append("CPU fallback suspected")
        if self.findings is not None:
            sev = [f.severity for f in self.findings.values()]
            parts.append(f"findings: {len(sev)}" + (f" ({sev.count('error')} error)" if "error" in sev else ""))
        return "; ".join(parts)


class Watcher:
    """The daemon loop. `out` receives one line per event."""

    def __init__(self, host: Host, config: Config, interval: float, check_interval: float,
                 log_format: str = "journal", out: IO[str] = sys.stdout,
                 textfile_dir: Optional[str] = None,
                 reload_config: Optional[Callable[[], Config]] = None,
                 notifier: Optional[Notifier] = None, use_udev: bool = True,
                 journal: Optional[Any] = None, prefix: bool = True,
                 snapshot: Optional[Any] = None) -> None:
        self.host = host
        self.config = config
        self.interval = interval
        self.check_interval = check_interval
        self.log_format = log_format
        self.out = out
        self.textfile_dir = textfile_dir
        self.reload_config = reload_config
        self.notifier = notifier or Notifier()
        self.tracker = Tracker()
        self.journal = journal          # journal.JournalSender when stdout is the journal
        self.prefix = prefix            # `<N>` priority prefixes (not on a terminal)
        self.snapshot = snapshot        # metrics.Snapshot served by --listen
        self._textfile_failing = False
        self.stop = threading.Event()
        self.reload = threading.Event()
        self.fast_specs = self._fast(config.specs)
        self._busy = False
        self._first = True
        self._prune = True
        self._last_ping = 0.0
        self._last_check = -1e18
        self._monitor = self._udev_monitor() if use_udev and host.source == "live" else None

    @staticmethod
    def _fast(specs: Sequence[ProbeSpec]) -> List[ProbeSpec]:
        flagged = [s for s in specs if s.fast]
        return flagged or [s for s in specs if s.area in DEFAULT_FAST_AREAS]

    def _udev_monitor(self):
        try:
            import pyudev

            ctx = pyudev.Context()
            mon = pyudev.Monitor.from_netlink(ctx)
            for sub in ("accel", "drm", "pci", "misc", "platform", "apex", "hailo_chardev"):
                mon.filter_by(sub)
            mon.start()
            return mon
        except Exception:  # no libudev, no netlink permission: presence still comes from sampling
            return None

    def emit(self, ev: Event) -> None:
        if self.journal is not None and self.log_format == "journal":
            from .journal import event_fields

            if self.journal.send(event_fields(ev)):
                return
        if self.log_format == "json":
            line = ev.json_line()
        else:
            line = ev.journal_line() if self.prefix else ev.journal_line().split(">", 1)[1]
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass

    # -- signals --------------------------------------------------------------------------
    def install_signals(self) -> None:
        def on_term(signum, frame):
            self.stop.set()
            if self._busy:
                raise _Stop()

        def on_hup(signum, frame):
            self.reload.set()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        signal.signal(signal.SIGHUP, on_hup)

    # -- loop -----------------------------------------------------------------------------
    def run_once(self) -> None:
        now = time.time()
        self._busy = True
        try:
            facts, results = run_probes(self.host, self.fast_specs, max_workers=0,
                                        options={"sample_s": 0, "signatures": self.config.signatures,
                                                 "catalogs": self.config.catalogs})
            events = self.tracker.sample(facts, results, now)
            if self._prune:
                # a probe with nothing to read on this host is left alone from now on
                empty = {r.id for r in results if r.status == "no_data"}
                self.fast_specs = [s for s in self.fast_specs if s.id not in empty]
                self._prune = False
            if time.monotonic() - self._last_check >= self.check_interval:
                self._last_check = time.monotonic()
                try:
                    result = run_check(self.host, self.config)
                    events += self.tracker.check(result.findings)
                    self.tracker.check_ok = True
                    for r in result.probes:
                        self.tracker.probe_ok[r.id] = r.status != "error"
                except Exception as e:  # a bug in a rule or deriver must not stop the daemon
                    self.tracker.check_ok = False
                    events.append(Event("probe-failed", "check", "error",
                                        f"the full check failed: {type(e).__name__}: {e}"))
        finally:
            self._busy = False
        for ev in events:
            self.emit(ev)
        self._export(now)
        if self._first:
            self.notifier.send(READY="1", STATUS=self.tracker.status_line())
            self._first = False
            self._ping(force=True)
        else:
            self._ping()
            self.notifier.send(STATUS=self.tracker.status_line())

    def _export(self, now: float) -> None:
        """Metrics for --listen and the textfile. A failing write is one `textfile-failed`
        event when it starts and one `textfile-cleared` when a write succeeds again."""
        if not self.textfile_dir and self.snapshot is None:
            return
        from . import metrics

        fams = metrics.families(self.tracker, now)
        if self.snapshot is not None:
            self.snapshot.update(fams)
        if not self.textfile_dir:
            return
        path = f"{self.textfile_dir}/{metrics.FILENAME}"
        try:
            metrics.write_atomic(path, metrics.render(fams))
        except OSError as e:
            if not self._textfile_failing:
                self._textfile_failing = True
                self.emit(Event("textfile-failed", path, "error",
                                f"cannot write metrics: {e.strerror or e}; retrying every sample"))
            return
        if self._textfile_failing:
            self._textfile_failing = False
            self.emit(Event("textfile-cleared", path, "info", "metrics written again"))

    def _ping(self, force: bool = False) -> None:
        """WATCHDOG=1 after a completed sample; the loop samples at least every half
        WATCHDOG_USEC, so a loop that keeps completing samples keeps systemd content."""
        if self.notifier.watchdog_interval_s is None:
            return
        self.notifier.send(WATCHDOG="1")
        self._last_ping = time.monotonic()

    def _do_reload(self) -> None:
        self.reload.clear()
        if self.reload_config is None:
            return
        # systemd: RELOADING=1 (with the monotonic time, for Type=notify-reload) ... READY=1
        self.notifier.send(RELOADING="1", MONOTONIC_USEC=str(int(time.monotonic() * 1e6)))
        try:
            self._reload_config()
        finally:
            self.notifier.send(READY="1", STATUS=self.tracker.status_line())

    def _reload_config(self) -> None:
        try:
            new = self.reload_config()  # type: ignore[misc]
        except ConfigError as e:
            self.emit(Event("config-rejected", "config", "error", f"{e}; keeping the previous configuration"))
            return
        self.config = new
        self.fast_specs = self._fast(new.specs)
        self._prune = True
        self._last_check = -1e18
        self.emit(Event("config-reloaded", "config", "info",
                        f"{len(new.specs)} probes, {len(new.rules.rules)} rules"))

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.is_set() and not self.reload.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._monitor is not None:
                try:
                    dev = self._monitor.poll(timeout=min(left, 0.5))
                except Exception:
                    dev = None
                if dev is not None:
                    return  # a hot-plug event: sample now
            else:
                self.stop.wait(min(left, 0.5))

    def run(self) -> int:
        period = self.interval
        if self.notifier.watchdog_interval_s is not None:
            period = min(period, self.notifier.watchdog_interval_s)
        try:
            while not self.stop.is_set():
                if self.reload.is_set():
                    self._do_reload()
                started = time.monotonic()
                self.run_once()
                self._wait(max(0.0, period - (time.monotonic() - started)))
        except _Stop:
            pass
        self.notifier.send(STOPPING="1", STATUS="stopping")
        return 0


class _Stop(BaseException):
    """Raised from the SIGTERM handler to leave a sample that is still running."""
