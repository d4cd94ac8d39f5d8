"""Installed distribution packages that matter for NPU stacks (`dpkg-query -W`).

Facts:
- `packages.manager` ("dpkg"), `packages.count` (installed packages), `packages.selected[]`
  {name, version}: the installed packages whose names match the probe's `keep` patterns
  (NPU runtimes, firmware, board kernel images such as `linux-image-rock-5b`).
- `sdks.<name>` {version, build?, package, package_version} for each `[probe.args.sdks]` entry
  (sdk name -> candidate package names, first installed wins), e.g. sdks.npu_umd from
  `intel-level-zero-npu 1.5.1.20240708-9842236399` -> version "1.5.1", build
  "20240708-9842236399". File-based probes that ran earlier keep their values.
"""

from __future__ import annotations

from typing import Dict

from ..errors import HostError
from ..parsers.dpkg import parse_dpkg_l, parse_dpkg_query, select
from ..parsers.intel_npu import split_package_version
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector

DPKG = ["dpkg-query", "-W"]
DPKG_LIST = ["dpkg", "-l"]


def installed_packages(ctx: ProbeContext) -> Dict[str, str]:
    """{package: version} from `dpkg-query -W` (canonical argv) for collectors that look one
    package up; else from a `dpkg -l` listing (what reports paste, often filtered by grep, so
    only a lookup of present packages may use it); {} when dpkg is absent, fails, or prints
    something else."""
    for argv, parse in ((DPKG, parse_dpkg_query), (DPKG_LIST, parse_dpkg_l)):
        try:
            res = ctx.run(argv)
        except HostError:   # CommandNotFound included
            continue
        if not res.ok:
            continue
        try:
            pkgs = parse(res.stdout)
        except ValueError:
            continue
        if pkgs:
            return pkgs
    return {}


@collector("packages")
def collect_packages(ctx: ProbeContext) -> None:
    res = ctx.run(DPKG)
    src = res.source or "$ dpkg-query -W"
    if res.timed_out:
        raise ProbeError("`dpkg-query -W` timed out")
    if res.returncode != 0 and not res.stdout.strip():
        raise NoData("dpkg-query found no package database")
    try:
        pkgs = parse_dpkg_query(res.stdout)
    except ValueError as e:
        raise ProbeError(f"unparsable `dpkg-query -W` output: {e}") from None
    if not pkgs:
        raise NoData("no installed packages listed by dpkg-query")
    ctx.facts.set("packages.manager", "dpkg", src)
    ctx.facts.set("packages.count", len(pkgs), src)
    sel = select(pkgs, ctx.args.get("keep", []))
    if sel:
        ctx.facts.set("packages.selected", sel, src)
    for sdk, names in (ctx.args.get("sdks") or {}).items():
        for name in names:
            if name in pkgs:
                parts = split_package_version(pkgs[name])
                ctx.facts.set(f"sdks.{sdk}.version", parts["version"], src)
                ctx.facts.set(f"sdks.{sdk}.build", parts.get("build"), src)
                ctx.facts.set(f"sdks.{sdk}.package", name, src)
                ctx.facts.set(f"sdks.{sdk}.package_version", pkgs[name], src)
                break
