"""Watcher: the `npu-doctor watch` loop (sampling, full checks, systemd notify, signals)."""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import IO, Any, Callable, List, Optional, Sequence

from ..check import Config, run_check
from ..errors import ConfigError
from ..host import Host
from ..probe_runner import run_probes
from ..probes import ProbeSpec
from ..sdnotify import Notifier
from ..workerpool import WorkerPool, limit_malloc_arenas
from .events import DEFAULT_FAST_AREAS, Event, Tracker
from .nvidia_sampling import NVIDIA_PROBE, NvidiaSampler
from .sampling import InventoryCache

#: The fast probe that walks sysfs for accelerators (re-run only when InventoryCache says so).
INVENTORY_PROBE = "accelerators"


class Watcher:
    """The daemon loop. `out` receives one line per event."""

    def __init__(self, host: Host, config: Config, interval: float, check_interval: float,
                 log_format: str = "journal", out: IO[str] = sys.stdout,
                 textfile_dir: Optional[str] = None,
                 reload_config: Optional[Callable[[], Config]] = None,
                 notifier: Optional[Notifier] = None, use_udev: bool = True,
                 journal: Optional[Any] = None, prefix: bool = True,
                 snapshot: Optional[Any] = None, inventory_interval: float = 60.0) -> None:
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
        # sampling path: sysfs walked again on udev events and every inventory_interval seconds
        self.inventory = InventoryCache(inventory_interval)
        self.nvidia = NvidiaSampler()   # `nvidia-smi --query-gpu` between full `-q` runs
        self.pool = WorkerPool()        # the full checks' probe workers, for the daemon's life
        limit_malloc_arenas()           # before those workers allocate: one arena, flat RSS
        self._busy = False
        self._first = True
        self._prune = True
        self._last_ping = 0.0
        self._last_check = -1e18
        self._monitor = self._udev_monitor() if use_udev and host.source == "live" else None
        self.inventory_interval = inventory_interval
        self._last_inventory = time.monotonic()
        self._hotplug = False

    @staticmethod
    def _fast(specs: Sequence[ProbeSpec]) -> List[ProbeSpec]:
        flagged = [s for s in specs if s.fast]
        return flagged or [s for s in specs if s.area in DEFAULT_FAST_AREAS]

    def _udev_monitor(self):
        try:
            import pyudev

            ctx = pyudev.Context()
            mon = pyudev.Monitor.from_netlink(ctx)
            for sub in ("accel", "drm", "pci", "misc", "platform", "apex", "hailo_chardev", "hailo1x"):
                mon.filter_by(sub)
            mon.start()
            return mon
        except Exception:  # no libudev, no netlink permission: presence still comes from sampling
            return None

    def emit(self, ev: Event) -> None:
        """One event: to the journal (native protocol) when stdout is the journal, else one
        line on `out` (JSON, or journal style with the `<N>` prefix unless on a terminal); a closed or broken output is ignored (the loop keeps running)."""
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
        """SIGTERM/SIGINT stop the loop (interrupting a sample in progress), SIGHUP asks for a
        reload of probes and rules at the next turn. Main thread only (Python's rule)."""
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
        """One turn: sample the fast probes, emit their transitions, run the full check when
        `check_interval` seconds have passed, export the metrics (--listen, textfile), notify systemd
        (READY=1 after the first, WATCHDOG=1, STATUS=)."""
        now = time.time()
        self._reinventory()
        self._busy = True
        try:
            mono = time.monotonic()
            reuse = {}
            if self.inventory.reusable(mono):
                reuse[INVENTORY_PROBE] = self.inventory.refresh(self.host)
            nv_spec = next((s for s in self.fast_specs if s.id == NVIDIA_PROBE), None)
            nv = self.nvidia.refresh(self.host, nv_spec.timeout_s) if nv_spec is not None else None
            if nv is not None:
                reuse[NVIDIA_PROBE] = nv
            facts, results = run_probes(self.host, self.fast_specs, max_workers=0,
                                        options={"sample_s": 0, "signatures": self.config.signatures,
                                                 "catalogs": self.config.catalogs, "reuse": reuse})
            for r in results:
                if r.id == INVENTORY_PROBE and INVENTORY_PROBE not in reuse:
                    self.inventory.store(r, mono)
                elif r.id == NVIDIA_PROBE and NVIDIA_PROBE not in reuse:
                    self.nvidia.store(r)
            events = self.tracker.sample(facts, results, now)
            if self._prune:
                # a probe with nothing to read on this host is left alone from now on
                empty = {r.id for r in results if r.status == "no_data"}
                self.fast_specs = [s for s in self.fast_specs if s.id not in empty]
                self._prune = False
            if time.monotonic() - self._last_check >= self.check_interval:
                self._last_check = time.monotonic()
                try:
                    result = run_check(self.host, self.config, pool=self.pool)
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

    def _reinventory(self) -> None:
        """Bring back the fast probes pruned for having nothing to read, every
        `inventory_interval` seconds and after a udev event, so a device or thermal zone that
        appears after start (driver bound late, zones registered late) is found without a
        SIGHUP; those still empty are pruned again after the sample."""
        due = time.monotonic() - self._last_inventory >= self.inventory_interval
        if not (due or self._hotplug):
            return
        self._hotplug = False
        self._last_inventory = time.monotonic()
        self.inventory.invalidate()  # the accelerators probe walks sysfs again this sample
        self.nvidia.invalidate()     # and the nvidia probe reads the whole `nvidia-smi -q`
        every = self._fast(self.config.specs)
        if len(every) != len(self.fast_specs):
            self.fast_specs = every
            self._prune = True

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
        except Exception as e:  # any failure of a reload keeps the old config running (contract)
            first = (str(e).strip().splitlines() or [""])[0]
            self.emit(Event("config-rejected", "config", "error",
                            f"{type(e).__name__}: {first}; keeping the previous configuration"))
            return
        self.config = new
        self.fast_specs = self._fast(new.specs)
        self.inventory.invalidate()
        self.nvidia.invalidate()
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
                    self._hotplug = True
                    return  # a hot-plug event: re-inventory and sample now
            else:
                self.stop.wait(min(left, 0.5))

    def run(self) -> int:
        """Loop every `interval` seconds (sooner when the watchdog needs it, or on a hot-plug
        event) until stopped; reloads on SIGHUP. Returns the exit status: 0 after STOPPING=1."""
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
