"""Debian package database: `dpkg-query -W` default output, and the `dpkg -l` listing.

Format: one package per line, `name<TAB>version` (`${binary:Package}\\t${Version}`); the name
may carry an architecture (`libze1:amd64`); packages dpkg only remembers (removed, config files
left) print an empty version. Source: dpkg-query(1), "--show" and "--showformat".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Iterable, List, Tuple

from ..namematch import name_patterns
from ..registry import parser


@parser("dpkg_query_w")
def parse_dpkg_query(text: str) -> Dict[str, str]:
    """{package name (architecture suffix removed): version} of installed packages.

    Lines with an empty version (not installed) are left out. Raises ValueError when the text
    holds no `name<TAB>version` line at all but is not empty.
    """
    return dict(_parse_dpkg_query(text))


@lru_cache(maxsize=2)
def _parse_dpkg_query(text: str) -> Tuple[Tuple[str, str], ...]:
    # one check's probes ask for the same output (packages, SDK versions, nvidia, coral):
    # parsed once (a desktop's ~3 000 lines), each caller gets its own dict
    out: Dict[str, str] = {}
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if "\t" not in line:
            bad += 1
            continue
        name, _, version = line.partition("\t")
        name, version = name.strip(), version.strip()
        if ":" in name:
            name = name.split(":", 1)[0]
        if name and version:
            out[name] = version
    if bad and not out:
        raise ValueError("no name<TAB>version lines (is this `dpkg-query -W` output?)")
    return tuple(out.items())


# `dpkg -l` (dpkg-query --list): three flag columns - desired action (u i h r p), package status
# (n c H U F W t i), error flag (' ' or R) - then name, version, architecture, description.
# Source: dpkg-query(1), "--list". Reports paste it filtered (`dpkg -l | grep edgetpu`).
_DPKG_L = re.compile(r"^[uihrp][ncHUFWti][ R]?\s+(?P<name>[^\s:]+)(?::\S+)?\s+(?P<version>\S+)\s+\S+")


@parser("dpkg_l")
def parse_dpkg_l(text: str) -> Dict[str, str]:
    """{package name (architecture suffix removed): version} from `dpkg -l` rows whose package
    is on disk (status installed, unpacked, half-configured, half-installed, awaiting triggers);
    rows of removed packages (status n, c) and the header lines are left out. Raises ValueError
    when no row is found in a non-empty text."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        m = _DPKG_L.match(line)
        if m and line[1] not in "nc" and m.group("version") != "<none>":
            out[m.group("name")] = m.group("version")
    if not out and text.strip():
        raise ValueError("no package rows (is this `dpkg -l` output?)")
    return out


def select(packages: Dict[str, str], patterns: Iterable[str]) -> List[Dict[str, str]]:
    """[{name, version}] of the packages whose name matches any shell pattern, sorted by name."""
    pats = name_patterns(patterns)
    return [{"name": n, "version": v} for n, v in sorted(packages.items()) if pats.match(n)]


def upstream_version(deb_version: str) -> str:
    """The upstream part of a Debian version: no epoch (`1:`), no revision (`-0ubuntu1`)."""
    v = deb_version.strip()
    if ":" in v.split("-", 1)[0]:
        v = v.split(":", 1)[1]
    if "-" in v:
        v = v.rsplit("-", 1)[0]
    return v


__all__ = ["parse_dpkg_l", "parse_dpkg_query", "select", "upstream_version"]
