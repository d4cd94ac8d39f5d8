"""Events and the Tracker that turns successive fact samples into them (docs/architecture.md,
"Contract: watch events")."""

from __future__ import annotations

import datetime as _dt
import json
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..facts import Facts, accelerator_key, accelerator_label
from ..probes import ProbeResult
from ..textsafe import escape_controls

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
        """`<PRIORITY>event subject: message`, the journald form (sd-daemon priority prefix)."""
        # subject and message carry machine text (zone types, log lines): escaped, so a value
        # with a newline cannot forge a second journal line
        return (f"<{PRIORITY[self.severity]}>{self.event} {escape_controls(str(self.subject))}: "
                f"{escape_controls(str(self.message))}")

    def json_line(self) -> str:
        """One JSON object: `ts` (ISO 8601, UTC, milliseconds), `event`, `subject`, `severity`,
        `message`, then the event's `fields`."""
        d = {"ts": _dt.datetime.fromtimestamp(self.ts, _dt.timezone.utc).isoformat(timespec="milliseconds"),
             "event": self.event, "subject": self.subject, "severity": self.severity,
             "message": self.message}
        d.update(self.fields)
        return json.dumps(d, ensure_ascii=False, sort_keys=False, default=str)


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
        """The events since the previous sample of the fast facts (`now`: seconds since the epoch):
        throttling start/end, device added/removed, runtime suspend/resume, fallback
        suspected/cleared, probe failures. Empty when nothing changed."""
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
        now_present = {accelerator_key(a): accelerator_label(a) for a in facts.get("accelerators", []) or []}
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
            key, label = accelerator_key(a), accelerator_label(a)
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
        """finding-raised / finding-cleared events against the previous full check, keyed by
        (rule id, subject); the first call raises every finding."""
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
        """The one-line state for systemd's STATUS=: accelerators, throttling zones, suspended
        devices, suspected fallback, finding counts."""
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
