"""Accelerator busy counters read around a deep run, through the Host (live or snapshot).

Two kinds:
- cumulative: a counter that only grows while the device works; the delta (after - before) is
  the busy time of the run. Intel NPU `npu_busy_time_us` (drivers/accel/ivpu/ivpu_sysfs.c:
  "npu_busy_time_us", microseconds the NPU was busy since boot).
- gauge: a utilisation percentage the driver or tool averages over a short window; sampled
  before the run and every `interval` seconds during it; the delta is the highest reading
  during the run minus the reading before. Rockchip `/sys/kernel/debug/rknpu/load` (max of the
  cores, parsers/rknpu.py), NVIDIA `nvidia-smi --query-gpu=utilization.gpu`
  (docs.nvidia.com/deploy/nvidia-smi), Ascend `npu-smi info -t usages -i N` (`Aicore Usage
  Rate(%)`, Ascend mind-cluster docs).

A counter that cannot be read gives None: unknown, never 0.
"""

from __future__ import annotations

import posixpath
import threading
from typing import Any, Callable, Dict, List, Optional

from ..host import Host


class Counter:
    """One busy counter of one accelerator. `read()` -> float or None."""

    def __init__(self, name: str, source: str, kind: str, read: Callable[[], Optional[float]],
                 unit: str) -> None:
        self.name, self.source, self.kind, self._read, self.unit = name, source, kind, read, unit

    def read(self) -> Optional[float]:
        try:
            return self._read()
        except (ValueError, OSError):
            return None


def _float(text: Optional[str]) -> Optional[float]:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def _intel_npu(host: Host, accel: Dict[str, Any]) -> Optional[Counter]:
    sysfs = accel.get("sysfs")
    if not sysfs:
        return None
    path = posixpath.join(sysfs, "npu_busy_time_us")
    return Counter("npu_busy_time_us", path, "cumulative", lambda: _float(host.read_attr(path)), "us")


def _rknpu(host: Host, accel: Dict[str, Any]) -> Optional[Counter]:
    from ..parsers.rknpu import parse_rknpu_load

    path = "/sys/kernel/debug/rknpu/load"
    return Counter("rknpu load (max core)", path, "gauge",
                   lambda: float(parse_rknpu_load(host.read_text(path))["max_percent"]), "%")


def _nvidia(host: Host, accel: Dict[str, Any]) -> Optional[Counter]:
    argv = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    if accel.get("index") is not None:
        argv += ["-i", str(accel["index"])]

    def read() -> Optional[float]:
        r = host.run(argv, timeout=5.0)
        if r.returncode != 0:
            return None
        vals = [_float(x) for x in r.stdout.split()]
        vals = [v for v in vals if v is not None]
        return max(vals) if vals else None
    return Counter("utilization.gpu", "$ " + " ".join(argv), "gauge", read, "%")


def _ascend(host: Host, accel: Dict[str, Any]) -> Optional[Counter]:
    from ..parsers.ascend import parse_key_value_colon

    argv = ["npu-smi", "info", "-t", "usages", "-i", str(accel.get("index", 0))]

    def read() -> Optional[float]:
        r = host.run(argv, timeout=5.0)
        if r.returncode != 0:
            return None
        return _float(parse_key_value_colon(r.stdout).get("Aicore Usage Rate(%)"))
    return Counter("Aicore Usage Rate(%)", "$ " + " ".join(argv), "gauge", read, "%")


COUNTERS = {"intel-npu": _intel_npu, "rknpu": _rknpu, "nvidia": _nvidia, "jetson": None,
            "ascend": _ascend}


def counter_for(host: Host, accelerators: List[Dict[str, Any]], vendor: Optional[str]) -> Optional[Counter]:
    """The busy counter of the first accelerator of `vendor`, or None when none is exposed."""
    make = COUNTERS.get(vendor or "")
    if make is None:
        return None
    for accel in accelerators:
        if accel.get("vendor") == vendor:
            return make(host, accel)
    return None


class Sampler:
    """Reads a counter before, during (every `interval` s, in a thread) and after a run."""

    def __init__(self, counter: Optional[Counter], interval: float = 0.2) -> None:
        self.counter, self.interval = counter, interval
        self.before: Optional[float] = None
        self.after: Optional[float] = None
        self.peak: Optional[float] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "Sampler":
        if self.counter is None:
            return self
        self.before = self.counter.read()
        if self.counter.kind == "gauge":
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            v = self.counter.read()
            if v is not None and (self.peak is None or v > self.peak):
                self.peak = v

    def __exit__(self, *exc) -> None:
        if self.counter is None:
            return
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.after = self.counter.read()

    def record(self) -> Optional[Dict[str, Any]]:
        """{name, source, kind, unit, before, after, peak?, delta} or None without a counter."""
        c = self.counter
        if c is None:
            return None
        if c.kind == "cumulative":
            delta = self.after - self.before if None not in (self.after, self.before) else None
        else:
            during = [v for v in (self.peak, self.after) if v is not None]
            delta = max(during) - self.before if during and self.before is not None else None
        rec = {"name": c.name, "source": c.source, "kind": c.kind, "unit": c.unit,
               "before": self.before, "after": self.after, "delta": delta}
        if c.kind == "gauge":
            rec["peak"] = self.peak
        return rec

