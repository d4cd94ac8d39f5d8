"""The worker pool watch keeps for its lifetime: full checks reuse its probe workers (no new
thread per probe per check), a job never waits behind a busy worker, a failing job keeps its
thread, idle threads beyond max_idle end."""

from __future__ import annotations

import importlib.util
import io
import threading
import time
from pathlib import Path

from npu_doctor.check import Config
from npu_doctor.host import open_host
from npu_doctor.watch.daemon import Watcher
from npu_doctor.workerpool import WorkerPool

REPO = Path(__file__).resolve().parent.parent


def _until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_busy_threads_do_not_hold_a_new_job_and_threads_are_reused():
    pool = WorkerPool(max_idle=8)
    release, ran = threading.Event(), []
    pool.submit(release.wait)               # a worker stuck in a hung command
    pool.submit(lambda: ran.append(1))      # runs at once, on a second thread
    _until(lambda: ran == [1])
    release.set()
    _until(lambda: pool.idle() == 2)
    for _ in range(5):
        pool.submit(lambda: ran.append(2))
        _until(lambda: pool.idle() == 2)
    assert pool.started == 2 and ran == [1] + [2] * 5


def test_failing_job_keeps_its_thread_and_idle_threads_are_capped():
    pool = WorkerPool(max_idle=2)
    pool.submit(lambda: 1 / 0)
    _until(lambda: pool.idle() == 1)
    done = []
    pool.submit(lambda: done.append(1))
    _until(lambda: done == [1] and pool.idle() == 1)
    assert pool.started == 1
    release = threading.Event()
    for _ in range(4):
        pool.submit(release.wait)
    assert pool.started == 4
    release.set()
    _until(lambda: pool.idle() == 2)  # two of the four threads ended
    time.sleep(0.05)
    assert pool.idle() == 2


def test_watch_full_checks_reuse_the_pool(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_snapshot", REPO / "benchmarks" / "gpu_snapshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    snap = mod.build(tmp_path / "snap", 2)
    others = set(threading.enumerate())
    w = Watcher(open_host(snapshot=str(snap)), Config.load(), 1.0, 3600, out=io.StringIO(), use_udev=False)
    # as on a live host: the full check's probes run in workers, each with its timeout (a
    # snapshot without a hung command runs them in the calling thread)
    w.host.may_block = lambda: True  # type: ignore[method-assign]
    w.run_once()  # the first sample runs a full check
    assert w.pool.started > 0
    for _ in range(6):
        w._last_check = -1e18  # a full check on each of these samples
        w.run_once()
        assert w.tracker.check_ok
    # seven checks of up to 8 workers each: without the pool, up to 56 threads started. A
    # loaded machine can make a probe look blocked in a command (BLOCKED_AFTER_S), and the
    # runner then adds a worker for the queue behind it: a few more than 8, never one set per check
    assert w.pool.started <= 16
    assert len(set(threading.enumerate()) - others) <= 16
