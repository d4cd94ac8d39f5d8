"""CPU count, model and load: `cpu.count`, `cpu.model`, `cpu.loadavg`, `cpu.load_percent`,
`cpu.busy_percent`.

- count: /sys/devices/system/cpu/online (a CPU list, "0-7"), else the `processor` entries
  of /proc/cpuinfo, else (live) psutil.cpu_count() / os.cpu_count().
- model: /proc/cpuinfo (x86 `model name`; ARM cores named from implementer/part, or
  `Hardware`), else the device-tree model (/proc/device-tree/model). `cpu.hardware` and
  `cpu.board` keep cpuinfo's Hardware/Model lines when present.
- loadavg: /proc/loadavg [1 min, 5 min, 15 min]; load_percent = loadavg[0] / count * 100
  (100 = every CPU busy; above 100 means runnable tasks are waiting).
- busy_percent: the share of CPU time not idle between two /proc/stat readings. The default
  run never sleeps: a live host takes the two readings only with `--sample SECONDS`
  (ctx.options["sample_s"] > 0). A snapshot gives them as fs/proc/stat (first) and
  fs/proc/stat.1 (second, taken later; the capture tool writes it after its sample window).
  When busy_percent is known, load_percent is set from it (load_source says which).
"""

from __future__ import annotations

import os
import time

from ..errors import HostError
from ..parsers.proc import cpu_busy_percent, parse_cpu_list, parse_cpuinfo, parse_loadavg
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector

#: Snapshot convention: the second /proc/stat reading of a sampled window.
SECOND_STAT = "/proc/stat.1"


def _count(ctx: ProbeContext, cpuinfo: dict) -> None:
    online = ctx.read("/sys/devices/system/cpu/online")
    if online:
        try:
            cpus = parse_cpu_list(online)
        except ValueError:
            cpus = []
        if cpus:
            ctx.facts.set("cpu.count", len(cpus), "/sys/devices/system/cpu/online")
            return
    if cpuinfo.get("count"):
        ctx.facts.set("cpu.count", cpuinfo["count"], "/proc/cpuinfo")
        return
    if ctx.host.source == "live":
        try:
            import psutil

            n = psutil.cpu_count(logical=True)
        except Exception:  # psutil missing or unable on this platform
            n = None
        n = n or os.cpu_count()
        if n:
            ctx.facts.set("cpu.count", n, "os.cpu_count()")


def _sample(ctx: ProbeContext):
    """cpu.busy_percent from two /proc/stat readings (see module docstring); returns it, or
    None when no window was measured."""
    sample_s = float(ctx.options.get("sample_s") or 0)
    if ctx.host.source == "live":
        if sample_s <= 0:
            return None
        try:
            first = ctx.read_raw("/proc/stat")
            time.sleep(sample_s)
            second = ctx.read_raw("/proc/stat")
        except HostError:
            return None
        source = f"/proc/stat (sampled over {sample_s:g} s)"
    else:
        try:
            first = ctx.read_raw("/proc/stat")
            second = ctx.read_raw(SECOND_STAT)
        except HostError:
            return None
        source = f"/proc/stat, {SECOND_STAT}"
    try:
        busy = cpu_busy_percent(first, second)
    except ValueError as e:
        raise ProbeError(f"CPU sample: {e}") from None
    ctx.facts.set("cpu.busy_percent", busy, source)
    ctx.facts.set("cpu.load_percent", busy, source)
    ctx.facts.set("cpu.load_source", "proc-stat", source)
    return busy


@collector("cpu")
def collect_cpu(ctx: ProbeContext) -> None:
    cpuinfo: dict = {}
    text = ctx.read("/proc/cpuinfo")
    if text:
        try:
            cpuinfo = parse_cpuinfo(text)
        except ValueError:
            cpuinfo = {}
    _count(ctx, cpuinfo)
    model = cpuinfo.get("model")
    if model:
        ctx.facts.set("cpu.model", model, "/proc/cpuinfo")
    else:
        dt = ctx.read("/proc/device-tree/model")
        if dt:
            ctx.facts.set("cpu.model", dt.replace("\x00", " ").strip(), "/proc/device-tree/model")
    for key in ("hardware", "board"):
        if cpuinfo.get(key):
            ctx.facts.set(f"cpu.{key}", cpuinfo[key], "/proc/cpuinfo")
    load_text = ctx.read("/proc/loadavg")
    error = None
    from_loadavg = None
    if load_text:
        try:
            load = parse_loadavg(load_text)
        except ValueError as e:
            error = f"/proc/loadavg: {e}"
        else:
            ctx.facts.set("cpu.loadavg", load["loadavg"], "/proc/loadavg")
            count = ctx.facts.get("cpu.count")
            if count:
                from_loadavg = round(load["loadavg"][0] / count * 100.0, 1)
    busy = _sample(ctx)
    if busy is None and from_loadavg is not None:
        # without a measured window the 1-minute load average is the best measure
        ctx.facts.set("cpu.load_percent", from_loadavg, "/proc/loadavg")
        ctx.facts.set("cpu.load_source", "loadavg", "/proc/loadavg")
    if error and not ctx.facts.data:
        raise ProbeError(error)
    if not ctx.facts.data:
        raise NoData("no /proc/cpuinfo, /proc/loadavg or CPU list")
