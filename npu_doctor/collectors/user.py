"""The invoking user: `user.uid`, `user.gid`, `user.name`, `user.groups` (names),
`user.group_ids` (ints); for root, `user.cap_dac_override` (whether its effective
capabilities let it ignore file modes) when /proc/self/status can be read.

Through host.identity(): getuid/getgroups on a live host, the `id` command in a snapshot.
When `id` prints bare numbers (`groups=1000,992`, as it does for groups missing from the
group database it was run against), names are resolved from the snapshot's /etc/group;
a gid with no name anywhere keeps its number as its name, so `groups` and `group_ids` stay
aligned. The user name falls back to /etc/passwd.
"""

from __future__ import annotations

from typing import Dict, List

from ..errors import HostError, NotFound
from ..host import parse_cap_eff
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector


def parse_group_file(text: str) -> Dict[int, str]:
    """/etc/group (`name:x:gid:members`) -> {gid: name}; malformed lines are skipped."""
    out: Dict[int, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) >= 3 and parts[2].isdigit() and parts[0] and not parts[0].startswith("#"):
            out.setdefault(int(parts[2]), parts[0])
    return out


def parse_passwd_file(text: str) -> Dict[int, str]:
    """/etc/passwd (`name:x:uid:gid:...`) -> {uid: name}."""
    out: Dict[int, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) >= 4 and parts[2].isdigit() and parts[0] and not parts[0].startswith("#"):
            out.setdefault(int(parts[2]), parts[0])
    return out


@collector("user")
def collect_user(ctx: ProbeContext) -> None:
    try:
        ident = ctx.host.identity()
    except NotFound as e:
        raise NoData(str(e)) from None
    except HostError as e:
        raise ProbeError(f"cannot tell the invoking user: {e}") from None
    src = ident.source or "identity"
    ids: List[int] = list(ident.groups)
    if ident.gid is not None and ident.gid not in ids:
        ids.insert(0, ident.gid)
    names: List[str] = []
    if len(ident.group_names) == len(ident.groups) and ident.gid in ident.groups:
        names = list(ident.group_names)
    else:
        by_gid = dict(zip(ident.groups, ident.group_names)) if len(ident.group_names) == len(ident.groups) else {}
        if len(by_gid) < len(ids):
            text = ctx.read("/etc/group") or ""
            for gid, name in parse_group_file(text).items():
                by_gid.setdefault(gid, name)
        names = [by_gid.get(g, str(g)) for g in ids]
    ctx.facts.set("user.uid", ident.uid, src)
    ctx.facts.set("user.gid", ident.gid, src)
    name = ident.user
    if not name and ident.uid is not None:
        name = parse_passwd_file(ctx.read("/etc/passwd") or "").get(ident.uid)
    ctx.facts.set("user.name", name, src)
    ctx.facts.set("user.group_ids", ids, src)
    ctx.facts.set("user.groups", names, src)
    if ident.uid == 0:
        # root opens any node only through CAP_DAC_OVERRIDE; a container started with all
        # capabilities dropped has uid 0 without it (fs/proc/array.c: CapEff)
        cap = parse_cap_eff(ctx.read("/proc/self/status") or "")
        if cap is not None:
            ctx.facts.set("user.cap_dac_override", bool(cap >> 1 & 1), "/proc/self/status")
