"""`npu-doctor watch`: a daemon that logs transitions, never one line per sample.

Every `interval` seconds it runs the fast probes (thermal zones, devfreq, accelerators, CPU
load; specs with `fast = true`) and turns what changed into events (docs/architecture.md,
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

from .daemon import Watcher
from .events import Event, Tracker

__all__ = ["Event", "Tracker", "Watcher"]
