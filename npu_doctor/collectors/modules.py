"""Loaded kernel modules: `drivers.<module>.loaded`, `drivers.<module>.version`.

/proc/modules lists the loaded (loadable) modules: each becomes drivers.<name>.loaded = true.
A snapshot without /proc/modules may still hold /sys/module/<name>/initstate ("live" = loaded).
/sys/module/*/version (MODULE_VERSION; only some modules have one, built-in ones included)
gives drivers.<name>.version and drivers.<name>.source (the file it came from). Only those
version files are read — one glob, no walk over every module's parameters.
"""

from __future__ import annotations

import posixpath

from ..parsers.proc import parse_modules
from ..probes import NoData, ProbeContext
from ..registry import collector


@collector("kernel_modules")
def collect_modules(ctx: ProbeContext) -> None:
    text = ctx.read("/proc/modules")
    loaded = []
    if text:
        try:
            loaded = parse_modules(text)
        except ValueError:
            loaded = []
        for name in loaded:
            ctx.facts.set(f"drivers.{name}.loaded", True, "/proc/modules")
    else:
        for path in ctx.host.glob("/sys/module/*/initstate"):
            if ctx.read(path) == "live":
                name = posixpath.basename(posixpath.dirname(path))
                ctx.facts.set(f"drivers.{name}.loaded", True, path)
    for path in ctx.host.glob("/sys/module/*/version"):
        ver = ctx.read(path)
        if not ver:
            continue
        name = posixpath.basename(posixpath.dirname(path))
        ctx.facts.set(f"drivers.{name}.version", ver, path)
        ctx.facts.set(f"drivers.{name}.source", path, path)
    if not ctx.facts.data:
        raise NoData("no /proc/modules or /sys/module")
