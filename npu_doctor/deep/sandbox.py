"""The probe subprocess: the application's interpreter running worker.py, fenced in.

Safety (issue 15): the child cannot hang or crash npu-doctor. It runs in its own session (a
hang is killed with its whole process group at `timeout_s`), with RLIMIT_AS set in the child
before exec where the device allows it, and an RSS watchdog in the parent for the devices that
do not (CUDA and other GPU stacks reserve tens of GB of address space at init, so an address
space limit would only make them fail). Its stderr is kept (the last `STDERR_KEEP` characters)
as evidence. Its result is one JSON line on stdout; anything else is a failure with a reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_BYTES = 4 << 30
STDERR_KEEP = 2000


def app_interpreter(python: Optional[str] = None) -> str:
    """The interpreter whose runtimes are probed: `--python PATH` (the application's
    environment; a venv or conda directory means its bin/python) when given, else the one
    running npu-doctor. The one place that decides it."""
    if python and os.path.isdir(python):
        return os.path.join(python, "bin", "python")
    return python or sys.executable


@dataclass
class SubRun:
    """How one worker call ended. `result` is the worker's JSON object (None when it gave none);
    `failure` a one-line reason when it did not finish normally; `kind` timeout | memory |
    crashed | failed | None."""
    result: Optional[Dict[str, Any]]
    failure: Optional[str]
    kind: Optional[str]
    stderr: str
    wall_s: float
    peak_rss_bytes: Optional[int] = None


def _limit_address_space(limit: int):
    def preexec() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return preexec


def _rss_tree(pid: int) -> Optional[int]:
    try:
        import psutil

        p = psutil.Process(pid)
        return p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
    except Exception:   # gone already, or not permitted: the limit in the child still holds
        return None


def spawn(python: str, args: List[str], timeout_s: float = DEFAULT_TIMEOUT_S,
          memory_bytes: int = DEFAULT_MEMORY_BYTES, limit_address_space: bool = True) -> SubRun:
    """Run `python worker.py ARGS`; never raises for anything the child does."""
    start = time.monotonic()
    env = dict(os.environ)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    try:
        proc = subprocess.Popen([python, WORKER] + args, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=env,
                                preexec_fn=_limit_address_space(memory_bytes) if limit_address_space else None)
    except OSError as e:
        return SubRun(None, f"cannot start {python}: {e.strerror or e}", "failed", "", 0.0)
    state = {"peak": 0, "over": False}
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            rss = _rss_tree(proc.pid)
            if rss is None:
                continue
            state["peak"] = max(state["peak"], rss)
            if rss > memory_bytes:
                state["over"] = True
                _kill(proc)
                return
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        out, err = proc.communicate()
    finally:
        done.set()
        watcher.join(timeout=5)
    wall = time.monotonic() - start
    stderr = err.decode("utf-8", "replace")[-STDERR_KEEP:]
    result = None
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
            break
    peak = state["peak"] or None
    if result and result.get("peak_rss_bytes"):
        peak = max(peak or 0, int(result["peak_rss_bytes"]))
    if timed_out:
        return SubRun(result, f"timed out after {timeout_s:g} s (killed)", "timeout", stderr, wall, peak)
    if state["over"]:
        return SubRun(result, f"used more than {memory_bytes >> 20} MiB (killed)", "memory", stderr, wall, peak)
    if proc.returncode < 0:
        sig = -proc.returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return SubRun(result, f"crashed with signal {name}{_last_line(stderr)}", "crashed", stderr, wall, peak)
    if result is None:
        why = "ran out of memory (MemoryError)" if "MemoryError" in stderr else f"exited {proc.returncode} without a result"
        return SubRun(None, why + _last_line(stderr), "failed", stderr, wall, peak)
    return SubRun(result, None, None, stderr, wall, peak)


def _last_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
