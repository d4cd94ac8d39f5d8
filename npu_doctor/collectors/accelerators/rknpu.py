"""Collector `rknpu_debugfs`: version and load of the Rockchip RKNPU driver."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from ...errors import AccessDenied, HostError
from ...parsers.rknpu import parse_rknpu_load, parse_rknpu_version
from ...probes import NoData, ProbeContext, ProbeError
from ...registry import collector
from .devicetree import _compatibles


def _rknpu_hint(ctx: ProbeContext) -> bool:
    """Whether this host looks like a Rockchip board (so unreadable debugfs matters)."""
    prefix = (ctx.args or {}).get("hint_compatible_prefix", "rockchip,")
    for c in _compatibles(ctx.host, "/proc/device-tree/compatible"):
        if c.startswith(prefix):
            return True
    return bool(ctx.host.glob("/sys/class/devfreq/*.npu"))


def _read_load(ctx: ProbeContext, path: str, errors: Optional[List[str]] = None
               ) -> Optional[Dict[str, Any]]:
    text = ctx.read(path)
    if text is None:
        return None
    try:
        return parse_rknpu_load(text)
    except ValueError as e:
        if errors is not None:
            errors.append(f"{path}: {e}")
        return None


@collector("rknpu_debugfs")
def collect_rknpu_debugfs(ctx: ProbeContext) -> None:
    host = ctx.host
    args = ctx.args or {}
    base = None
    for d in args.get("dirs", ["/sys/kernel/debug/rknpu", "/proc/rknpu"]):
        if host.exists(f"{d}/version") or host.exists(f"{d}/load"):
            base = d
            break
    if base is None:
        root = args.get("debugfs_root", "/sys/kernel/debug")
        try:
            host.listdir(root)
        except AccessDenied:
            if _rknpu_hint(ctx):
                ctx.denied(f"{root}/rknpu", "RKNPU driver version and NPU load (debugfs)")
                return
        except HostError:
            pass
        raise NoData("no RKNPU debugfs/procfs files")
    rec: Dict[str, Any] = {"vendor": "rknpu", "driver": {"name": "rknpu"},
                           "name": args.get("name", "Rockchip NPU")}
    srcs: Dict[str, str] = {}
    errors: List[str] = []
    vpath = f"{base}/version"
    vtext = ctx.read(vpath)
    if vtext is not None:
        try:
            ver = parse_rknpu_version(vtext)["version"]
        except ValueError as e:
            ver = None
            errors.append(f"{vpath}: {e}")
        if ver:
            rec["driver"]["version"] = ver
            srcs["driver.version"] = vpath
            ctx.facts.set("drivers.rknpu.version", ver, vpath)
            ctx.facts.set("drivers.rknpu.loaded", True, vpath)
            ctx.facts.set("drivers.rknpu.source", vpath)
    lpath = f"{base}/load"
    load = _read_load(ctx, lpath, errors)
    if load is not None:
        rec["load"] = dict(load, source=lpath)
        srcs["load"] = lpath
        samples = [load]
        sample_s = float(ctx.options.get("sample_s", 0) or 0)
        if sample_s > 0:
            step = min(0.5, sample_s / 4.0)
            end = time.monotonic() + sample_s
            while time.monotonic() < end:
                time.sleep(step)
                nxt = _read_load(ctx, lpath)
                if nxt is not None:
                    samples.append(nxt)
            rec["load"]["samples"] = len(samples)
        if all(0 <= c <= 100 for s in samples for c in s["cores_percent"]):
            util = sum(s["max_percent"] for s in samples) / len(samples)
            rec["utilization_percent"] = int(util) if util == int(util) else round(util, 1)
            srcs["utilization_percent"] = lpath
        else:
            bad = [s for s in samples if any(not 0 <= c <= 100 for c in s["cores_percent"])][0]
            rec["load"].update(bad)
            rec["load"]["invalid"] = True
    if "load" not in rec and "version" not in rec["driver"]:
        if errors:
            raise ProbeError("unparsable " + "; ".join(errors))
        raise NoData(f"{base}: no readable version or load")
    # debugfs exists only while the rknpu driver is bound
    rec["driver"]["bound"] = True
    srcs["driver.bound"] = base
    ctx.facts.add_accelerator(rec, sources=srcs, source=base)
    if errors:
        # what could be read is kept; the rest is a probe error (probe-failed says which)
        raise ProbeError("unparsable " + "; ".join(errors))
