"""The C library: `libc.name` ("glibc" | "musl"), `libc.version`, `libc.build`.

Live: os.confstr("CS_GNU_LIBC_VERSION") (`glibc 2.36`). Otherwise (musl, or a snapshot): the
`ldd --version` output (stdout and stderr: musl prints its banner on stderr and exits 1), then
the version banner inside libc.so.6 (`GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable
release version 2.36.`), then a musl loader /lib/ld-musl-ARCH.so.1 (run with --version on a
live host; in a snapshot only its presence: name musl, version unknown). Formats:
npu_doctor/parsers/proc.py.

A live check (not under `capture`, which must record the bytes it read) keeps the banner of
each libc.so.6 in the user cache with the file's identity (device, inode, size, mtime): reading
~2 MB to find one string was ~5 ms of every check.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

from .. import usercache
from ..errors import CommandNotFound, HostError
from ..parsers.proc import parse_confstr_libc, parse_ldd_version, parse_libc_banner
from ..probes import NoData, ProbeContext
from ..registry import collector

LIBC_GLOBS = ("/lib/*/libc.so.6", "/lib64/libc.so.6", "/lib/libc.so.6", "/usr/lib/*/libc.so.6",
              "/usr/lib64/libc.so.6", "/usr/lib/libc.so.6")
LIBC_MAX_BYTES = 16 * 1024 * 1024


def _set(ctx: ProbeContext, info: Dict[str, str], source: str) -> None:
    for k in ("name", "version", "build"):
        if info.get(k):
            ctx.facts.set(f"libc.{k}", info[k], source)


def _from_command(ctx: ProbeContext, argv) -> Optional[Dict[str, str]]:
    try:
        res = ctx.run(argv)
    except (CommandNotFound, HostError):
        return None
    if res.timed_out:
        return None
    try:
        return parse_ldd_version(res.stdout + "\n" + res.stderr)
    except ValueError:
        return None


_BANNER_CACHE = "libc-banners.json"


def _identity(path: str) -> Optional[list]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _banner(ctx: ProbeContext):
    """(glibc banner dict, path) of the first libc.so.6 that has one, or (None, None)."""
    kept = None
    if ctx.host.source == "live" and getattr(ctx.host, "inner", None) is None:
        kept = usercache.load_json(_BANNER_CACHE)
        kept = kept if isinstance(kept, dict) else {}
    for pattern in LIBC_GLOBS:
        for path in ctx.host.glob(pattern):
            ident = _identity(path) if kept is not None else None
            got = kept.get(path) if kept is not None and ident is not None else None
            if isinstance(got, dict) and got.get("identity") == ident:
                banner = got.get("banner")
            else:
                try:
                    data = ctx.host.read_bytes(path, LIBC_MAX_BYTES)
                except HostError:
                    continue
                banner = parse_libc_banner(data)
                if kept is not None and ident is not None:
                    kept[path] = {"identity": ident, "banner": banner}
                    usercache.save_json(_BANNER_CACHE, kept)
            if banner:
                return banner, path
    return None, None


@collector("libc")
def collect_libc(ctx: ProbeContext) -> None:
    if ctx.host.source == "live":
        try:
            info = parse_confstr_libc(os.confstr("CS_GNU_LIBC_VERSION"))
        except (ValueError, OSError, AttributeError):
            info = None
        if info:
            _set(ctx, info, 'os.confstr("CS_GNU_LIBC_VERSION")')
            # the distribution build is only in the library's banner; read it through the
            # host (page cache, ~2 MB) so a capture of this run replays the same facts
            banner, path = _banner(ctx)
            if banner and banner.get("version") == info["version"] and banner.get("build"):
                ctx.facts.set("libc.build", banner["build"], path)
            return
    info = _from_command(ctx, ["ldd", "--version"])
    if info and info.get("version"):
        _set(ctx, info, "$ ldd --version")
        return
    banner, path = _banner(ctx)
    if banner:
        _set(ctx, banner, path)
        return
    for loader in ctx.host.glob("/lib/ld-musl-*.so.1"):
        got = _from_command(ctx, [loader, "--version"]) if ctx.host.source == "live" else None
        _set(ctx, got or {"name": "musl"}, loader)
        return
    if info:  # musl ldd without a version line
        _set(ctx, info, "$ ldd --version")
        return
    raise NoData("no libc found (no ldd --version output, libc.so.6 or musl loader)")
