"""Kernel release and machine architecture: `kernel.release`, `kernel.version`, `arch`.

kernel.release: /proc/sys/kernel/osrelease (what `uname -r` prints); a snapshot may instead
list `uname -r`, or `uname -a` (what reports paste); on a live host platform.release() is the
last resort.
arch (`uname -m` spelling): live platform.machine(); in a snapshot the `uname -m` command
when listed, else /proc/sys/kernel/arch, else the machine field of `uname -a`, else the ELF
header of /bin/sh (or libc.so.6) in the snapshot; else absent.
"""

from __future__ import annotations

import platform

from ..errors import CommandNotFound, HostError
from ..parsers.proc import elf_arch, parse_uname_a
from ..probes import NoData, ProbeContext
from ..registry import collector

ELF_CANDIDATES = ("/bin/sh", "/usr/bin/sh", "/bin/busybox", "/lib/*/libc.so.6", "/lib64/libc.so.6",
                  "/usr/lib/*/libc.so.6", "/usr/lib64/libc.so.6", "/lib/libc.so.6",
                  "/usr/lib/libc.so.6", "/lib/ld-musl-*.so.1")


def _cmd_line(ctx: ProbeContext, argv) -> "tuple":
    """(first line of stdout, source) of a successful command, or (None, None)."""
    try:
        res = ctx.run(argv)
    except (CommandNotFound, HostError):
        return None, None
    if res.ok and res.stdout.strip():
        return res.stdout.strip().splitlines()[0].strip(), res.source
    return None, None


def _uname_a(ctx: ProbeContext) -> "tuple":
    line, src = _cmd_line(ctx, ["uname", "-a"])
    return (parse_uname_a(line), src) if line else ({}, None)


@collector("kernel")
def collect_kernel(ctx: ProbeContext) -> None:
    live = ctx.host.source == "live"
    rel = ctx.read("/proc/sys/kernel/osrelease")
    if rel:
        ctx.facts.set("kernel.release", rel, "/proc/sys/kernel/osrelease")
    else:
        rel, src = _cmd_line(ctx, ["uname", "-r"]) if not live else (None, None)
        if not rel and not live:
            ua, src = _uname_a(ctx)
            rel = ua.get("release")
        if rel:
            ctx.facts.set("kernel.release", rel, src)
        elif live and platform.release():
            ctx.facts.set("kernel.release", platform.release(), "platform.release()")
    ver = ctx.read("/proc/sys/kernel/version")
    if ver:
        ctx.facts.set("kernel.version", ver, "/proc/sys/kernel/version")
    if not ctx.facts.data:
        raise NoData("no /proc/sys/kernel/osrelease")


def arch_from_snapshot(ctx: ProbeContext):
    """(arch, source) from what a snapshot holds, or (None, None)."""
    m, src = _cmd_line(ctx, ["uname", "-m"])
    if m:
        return m, src
    a = ctx.read("/proc/sys/kernel/arch")
    if a:
        return a, "/proc/sys/kernel/arch"
    ua, src = _uname_a(ctx)
    if ua.get("machine"):
        return ua["machine"], src
    for pattern in ELF_CANDIDATES:
        paths = ctx.host.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]
        for p in paths:
            try:
                head = ctx.host.read_bytes(p, 64)
            except HostError:
                continue
            arch = elf_arch(head)
            if arch:
                return arch, f"{p} (ELF header)"
    return None, None


@collector("arch")
def collect_arch(ctx: ProbeContext) -> None:
    if ctx.host.source == "live":
        # read through the host too, so that a capture of this run replays the same arch
        kernel_arch = ctx.read("/proc/sys/kernel/arch")
        m = platform.machine() or kernel_arch
        if m:
            ctx.facts.set("arch", m, "platform.machine()")
            return
    arch, src = arch_from_snapshot(ctx)
    if not arch:
        raise NoData("architecture not recorded (no `uname -m`, /proc/sys/kernel/arch or ELF binary)")
    ctx.facts.set("arch", arch, src)
