"""Hangs cost one timeout: every vendor tool hung costs about the largest command limit, not
the sum; one limit per argv whoever asks; no child process outlives npu-doctor."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from npu_doctor.host import LiveHost
from npu_doctor.probes import COMMAND_TIMEOUT_S, CommandCache


class _Hung:
    """A host whose every command hangs until its timeout (counting what it was given)."""

    source = "live"

    def __init__(self) -> None:
        self.asked = []

    def run(self, argv, timeout=10.0):
        from npu_doctor.host.base import CommandResult

        self.asked.append((tuple(argv), timeout))
        time.sleep(min(timeout, 0.3))
        return CommandResult(list(argv), None, timed_out=True)


def test_one_timeout_per_argv_and_late_commands_get_what_is_left(monkeypatch):
    host = _Hung()
    cache = CommandCache(host)
    cache.run(["dmesg"], COMMAND_TIMEOUT_S)
    cache.run(["dmesg"], 5.0)  # a second probe asking: the cached result, no second run
    assert host.asked[0] == (("dmesg",), COMMAND_TIMEOUT_S) and len(host.asked) == 1
    monkeypatch.setattr(cache, "_t0", time.monotonic() - COMMAND_TIMEOUT_S)  # budget spent
    cache.run(["npu-smi", "info"], COMMAND_TIMEOUT_S)
    assert host.asked[1] == (("npu-smi", "info"), CommandCache.MIN_LATE_TIMEOUT_S)


@pytest.mark.slow
def test_hung_command_killed_when_npu_doctor_exits():
    script = ("import threading, time\n"
              "from npu_doctor.host import LiveHost\n"
              "threading.Thread(target=LiveHost().run, args=(['sleep', '31.4159'], 60), daemon=True).start()\n"
              "time.sleep(0.5)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    time.sleep(0.2)
    left = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "31.4159"]]
    for p in left:
        p.kill()
    assert left == []


def test_live_host_runs_still_work():
    res = LiveHost().run(["true"], timeout=5)
    assert res.ok
