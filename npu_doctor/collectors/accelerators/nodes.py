"""Device nodes of an accelerator and whether the invoking user can open them."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ...errors import HostError
from .inventory import _INDEX_RE, _Inventory, _set


# -- device nodes and access -------------------------------------------------------------
def _mode_str(mode: Optional[int]) -> Optional[str]:
    return None if mode is None else format(mode, "04o")


def finish_nodes(inv: _Inventory, rec: Dict[str, Any], srcs: Dict[str, str]) -> None:
    host = inv.host
    nodes = rec.get("dev_nodes") or []
    if not nodes:
        return
    prio = {"accel": 0, "apex": 1, "hailo_chardev": 1, "hailo1x": 1, "drm": 2}
    nodes.sort(key=lambda n: (prio.get(n.get("subsystem", ""), 5), n["path"]))
    for n in nodes:
        st = host.stat(n["path"])
        if st is None:
            n["exists"] = False
            continue
        n["exists"] = True
        n["type"] = st.type
        if st.mode is not None:
            n["mode"] = _mode_str(st.mode)
        if st.uid is not None:
            n["uid"] = st.uid
        if st.gid is not None:
            n["gid"] = st.gid
            grp = inv.group_name(st.gid)
            if grp:
                n["group"] = grp
        can = host.can_open(n["path"])
        if can is not None:
            n["can_open"] = can
    _set(rec, srcs, "dev", nodes[0]["path"], rec.get("class_device"))
    checked = [n for n in nodes if "can_open" in n]
    if not checked:
        return
    denied = [n for n in checked if n["can_open"] is False]
    user = None
    try:
        user = host.identity().user
    except HostError:
        pass
    if not denied:
        rec["access"] = {"can_open": True, "path": checked[0]["path"]}
        return
    n = denied[0]
    group = n.get("group") or (str(n["gid"]) if "gid" in n else None)
    access: Dict[str, Any] = {"can_open": False, "path": n["path"],
                              "denied": [d["path"] for d in denied]}
    for k in ("mode", "uid", "gid"):
        if k in n:
            access[k] = n[k]
    if group is not None:
        access["group"] = group
    if user:
        access["user"] = user
    # A group-accessible node owned by a real group: joining the group is the fix. Otherwise
    # (root:root 0600 ...) a udev rule has to hand the node to a group first.
    mode = int(n["mode"], 8) if "mode" in n else 0
    access["group_can_open"] = bool(mode & 0o060 == 0o060 and n.get("gid") not in (None, 0))
    sub, kern = n.get("subsystem"), n.get("kernel")
    if sub and kern:
        kern_glob = _INDEX_RE.sub("*", kern) if _INDEX_RE.search(kern) else kern
        grp = group if access["group_can_open"] else "render"
        access["udev_rule"] = (f'SUBSYSTEM=="{sub}", KERNEL=="{kern_glob}", '
                               f'GROUP="{grp}", MODE="0660"')
        access["fix_group"] = grp
    rec["access"] = access
    srcs["access"] = n["path"]
