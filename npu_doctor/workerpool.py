"""Threads that outlive one run of the probes: the `watch` daemon keeps one pool for its
lifetime, so its full checks reuse the same probe workers instead of starting new ones.

Starting a thread per probe per check made the daemon's RSS climb (36 -> 74 MiB over 120 s
with a full check every sample, issue 14): glibc gives a new thread's allocations their own
arena, and memory freed in arenas of threads that are gone is rarely handed back. A thread
that stays keeps its arena, so RSS stays flat.

`submit` runs a job at once, on an idle thread of the pool or on a new one (never queued
behind a busy thread: the probe runner counts on a started worker starting, and a worker
stuck in a hung command must not hold the next check). A job's thread goes back to the pool
when the job returns; beyond `max_idle` idle threads, it ends.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, List, Optional


class _Slot:
    __slots__ = ("job", "ready")

    def __init__(self) -> None:
        self.job: Optional[Callable[[], None]] = None
        self.ready = threading.Event()


class WorkerPool:
    """Long-lived daemon threads running submitted jobs (callables without arguments).
    `started` counts the threads ever started (how well the pool is reused)."""

    def __init__(self, max_idle: int = 8, name: str = "probe-worker") -> None:
        self.max_idle = max_idle
        self.name = name
        self.started = 0
        self._lock = threading.Lock()
        self._idle: List[_Slot] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` now on an idle pool thread, else on a new one. An exception in the job
        ends the job, not the thread."""
        with self._lock:
            slot = self._idle.pop() if self._idle else None
            if slot is None:
                self.started += 1
        if slot is not None:
            slot.job = job
            slot.ready.set()
            return
        slot = _Slot()
        slot.job = job
        threading.Thread(target=self._loop, args=(slot,), name=self.name, daemon=True).start()

    def idle(self) -> int:
        """Threads waiting for a job."""
        with self._lock:
            return len(self._idle)

    def _loop(self, slot: _Slot) -> None:
        while True:
            job, slot.job = slot.job, None
            try:
                if job is not None:
                    job()
            except Exception:  # the probe runner reports its own failures; keep the thread
                pass
            with self._lock:
                if len(self._idle) >= self.max_idle:
                    return
                slot.ready.clear()
                self._idle.append(slot)
            slot.ready.wait()


#: mallopt(3) parameter number of M_ARENA_MAX (glibc malloc.h).
_M_ARENA_MAX = -8


def limit_malloc_arenas(n: int = 1) -> bool:
    """Let glibc malloc use at most `n` arenas from now on (mallopt M_ARENA_MAX), unless the
    environment sets MALLOC_ARENA_MAX itself. Returns whether the limit was set (False off
    glibc, or when the environment decides).

    Why: glibc gives each thread that allocates its own arena (up to 8 per core) and rarely
    returns their freed pages; a daemon whose 8 probe workers each parse a full check's
    output kept ~70 MB resident where one arena holds ~40 MB, flat over 1 000 samples
    (benchmarks/bench_watch_rss.py --live). The GIL serialises the workers anyway, so they
    lose nothing by sharing an arena.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        return bool(mallopt(_M_ARENA_MAX, n))
    except (OSError, AttributeError, TypeError):
        return False
