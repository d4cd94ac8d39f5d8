"""Vendor device nodes that the sysfs inventory does not list: `device_nodes[]`.

The inventory (collectors.accelerators) finds the nodes of devices that register a class
device (/sys/class/accel, DRM, apex, hailo_chardev) and checks them. Some stacks open nodes
their drivers create by hand or under a class the inventory does not follow: the Ascend driver's
/dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc (owned by HwHiAiUser), the
NVIDIA driver's /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm (made by nvidia-modprobe with
NVreg_DeviceFile{UID,GID,Mode}). ROCm's /dev/kfd waits for a contract vendor name for AMD GPUs.
Which nodes is data (probes/accelerators.toml, `[[probe.args.groups]]`): exact paths, globs,
and numbered paths checked one by one (a snapshot's stat.toml names nodes that are not files
under its fs/, so a glob cannot find them).

Each node found as a character device becomes {vendor, path, mode, uid, gid, group, can_open}
in `device_nodes[]`; `device_access[]` has one entry per vendor: the first node this user cannot
open (or the first node, with can_open true) and `denied`, the paths of all it cannot open
(`can_open`: whether the invoking user can open it read-write, from host.can_open: os.access on
a live host; on a snapshot the mode, owner and `id`, with root held to the mode when
/proc/self/status shows no CAP_DAC_OVERRIDE). No node at all: no data.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..errors import HostError
from ..probes import NoData, ProbeContext
from ..registry import collector
from .user import parse_group_file


def _candidates(host, group: Dict[str, Any]) -> List[str]:
    seen: List[str] = []
    for p in group.get("paths", []) or []:
        if p not in seen:
            seen.append(p)
    for pattern in group.get("globs", []) or []:
        try:
            found = host.glob(pattern)
        except HostError:
            found = []
        for p in sorted(found):
            if p not in seen:
                seen.append(p)
    numbered = group.get("numbered") or {}
    prefix, count = numbered.get("prefix"), int(numbered.get("count", 0) or 0)
    if prefix:
        for i in range(count):
            p = f"{prefix}{i}"
            if p not in seen:
                seen.append(p)
    return seen


@collector("vendor_device_nodes")
def collect_vendor_device_nodes(ctx: ProbeContext) -> None:
    host = ctx.host
    groups = ctx.args.get("groups", []) or []
    names: Dict[int, str] = {}
    names_read = False
    nodes: List[Dict[str, Any]] = []
    for group in groups:
        vendor = group.get("vendor")
        for path in _candidates(host, group):
            try:
                st = host.stat(path)
            except HostError:
                st = None
            if st is None or st.type != "char":
                continue
            node: Dict[str, Any] = {"vendor": vendor, "path": path}
            if st.mode is not None:
                node["mode"] = format(st.mode & 0o7777, "04o")
            if st.uid is not None:
                node["uid"] = st.uid
            if st.gid is not None:
                node["gid"] = st.gid
                if not names_read:
                    names = parse_group_file(ctx.read("/etc/group") or "")
                    names_read = True
                node["group"] = names.get(st.gid, str(st.gid))
            try:
                can = host.can_open(path)
            except (HostError, NotImplementedError):
                can = None
            if can is not None:
                node["can_open"] = can
            nodes.append(node)
    if not nodes:
        raise NoData("none of the vendor device nodes exists here")
    ctx.facts.set("device_nodes", nodes, "/dev")
    # one verdict per vendor (the rule's subject): the first node this user cannot open, with
    # the others listed, so four denied Ascend nodes are one finding, not four
    access: List[Dict[str, Any]] = []
    for vendor in dict.fromkeys(n["vendor"] for n in nodes):
        mine = [n for n in nodes if n["vendor"] == vendor and "can_open" in n]
        if not mine:
            continue
        denied = [n for n in mine if n["can_open"] is False]
        first = dict(denied[0] if denied else mine[0])
        first["can_open"] = not denied
        first["denied"] = [n["path"] for n in denied]
        access.append(first)
    if access:
        ctx.facts.set("device_access", access, "/dev")
