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


def test_probes_of_a_snapshot_that_cannot_block_run_in_the_calling_thread(tmp_path):
    """A snapshot without a hung command only reads its own files: its probes run one after
    another in the calling thread (threads taking turns on the GIL were slower); one with a
    hung command keeps the worker threads, so the hang costs one timeout."""
    import threading

    from npu_doctor.host.snapshot import SnapshotHost
    from npu_doctor.probe_runner import run_probes
    from npu_doctor.probes import load_specs

    seen = set()
    specs = load_specs()

    def spy(host):
        real = host.read_bytes

        def read_bytes(path, *a, **k):
            seen.add(threading.current_thread().name)
            return real(path, *a, **k)
        host.read_bytes = read_bytes
        return host

    quiet = tmp_path / "quiet"
    (quiet / "fs/sys/class/thermal/thermal_zone0").mkdir(parents=True)
    (quiet / "fs/sys/class/thermal/thermal_zone0/temp").write_text("45000\n")
    (quiet / "fs/sys/class/thermal/thermal_zone0/type").write_text("soc-thermal\n")
    host = spy(SnapshotHost(str(quiet)))
    assert not host.may_block()
    run_probes(host, specs)
    assert seen == {threading.current_thread().name}

    hung = tmp_path / "hung"
    import shutil
    shutil.copytree(quiet, hung)
    (hung / "commands.toml").write_text('[[command]]\nargv = ["npu-smi", "info"]\ntimed_out = true\nsleep_s = 0.2\n')
    seen.clear()
    host = spy(SnapshotHost(str(hung)))
    assert host.may_block()
    run_probes(host, specs)
    assert seen and threading.current_thread().name not in seen
