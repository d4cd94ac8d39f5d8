"""The [[command]] tables a capture writes (commands.toml, docs/architecture.md "Contract:
snapshot format"): every command the probes ran, as it answered, and `id` rebuilt from the
identity the probes used when no probe ran it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..host.recording import RecordingHost


def identity_command(rec: RecordingHost) -> Optional[Dict[str, Any]]:
    """An `id` table in id(1)'s format from the identity the probes read, or None when `id`
    was run (then it is recorded as it answered) or no identity was read."""
    ident = rec.identity_used
    if ident is None or ("id",) in rec.commands or ident.uid is None:
        return None
    names = dict(zip(ident.groups, ident.group_names))
    try:
        import grp

        for g in ident.groups + ([ident.gid] if ident.gid is not None else []):
            if g not in names:
                names[g] = grp.getgrgid(g).gr_name
    except (ImportError, KeyError):
        pass

    def item(n: Optional[int], name: Optional[str]) -> str:
        return f"{n}({name})" if name else f"{n}"

    text = f"uid={item(ident.uid, ident.user)}"
    if ident.gid is not None:
        text += f" gid={item(ident.gid, names.get(ident.gid))}"
    if ident.groups:
        text += " groups=" + ",".join(item(g, names.get(g)) for g in ident.groups)
    return {"argv": ["id"], "returncode": 0, "stdout": text + "\n", "stderr": ""}


def command_tables(rec: RecordingHost) -> List[Dict[str, Any]]:
    """{argv, returncode | timed_out, stdout, stderr[, cut]} per recorded command, by argv."""
    out = []
    for argv, res in sorted(rec.commands.items()):
        d: Dict[str, Any] = {"argv": list(argv)}
        if res.timed_out:
            d["timed_out"] = True
        else:
            d["returncode"] = int(res.returncode if res.returncode is not None else -1)
        d["stdout"] = res.stdout
        d["stderr"] = res.stderr
        if res.cut:  # the replay reports the cut as the live run did
            d["cut"] = dict(sorted(res.cut.items()))
        out.append(d)
    ident = identity_command(rec)
    if ident:
        out.append(ident)
    return out
