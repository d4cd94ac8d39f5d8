"""NVIDIA driver and toolkit versions: `/proc/driver/nvidia/version`, CUDA toolkit version
files, `nvcc --version`, and NVIDIA package upgrades in apt's history."""


from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..lazyregex import lazy
from ..registry import parser

_PROC_RE = lazy(r"NVRM version:\s*NVIDIA UNIX\s+(?P<flavor>.*?)\s*Kernel Module(?:\s+for\s+\S+)?\s+"
                r"(?P<version>\d+(?:\.\d+)+)\s+(?P<date>.*)$", re.M)


@parser("nvidia_proc_version")
def parse_proc_driver_version(text: str) -> Dict[str, str]:
    """`/proc/driver/nvidia/version` -> {version, open (bool), built}.

    `NVRM version: NVIDIA UNIX x86_64 Kernel Module  460.56  Tue Feb 23 23:25:18 UTC 2021`,
    `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build ...`.
    This is the module in memory (what NVML must match). Raises ValueError otherwise.
    """
    m = _PROC_RE.search(text)
    if not m:
        raise ValueError("no 'NVRM version: ... Kernel Module <version>' line")
    out: Dict[str, Any] = {"version": m.group("version"), "open": "open" in m.group("flavor").lower()}
    date = m.group("date").strip()
    if date:
        out["built"] = date
    return out


def parse_cuda_version_file(text: str) -> Optional[str]:
    """CUDA toolkit version from /usr/local/cuda/version.json (CUDA 11.1+:
    `{"cuda": {"name": "CUDA SDK", "version": "11.4.4"}, ...}`) or version.txt (up to 11.0:
    `CUDA Version 10.2.89`). None when neither form is there."""
    m = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"', text)
    if m:
        return m.group(1).strip()
    m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def parse_nvcc_version(text: str) -> Optional[str]:
    """`nvcc --version` last line `Cuda compilation tools, release 12.9, V12.9.86` -> 12.9.86."""
    m = re.search(r"release\s+\d+(?:\.\d+)*,\s*V(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    m = re.search(r"release\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


_APT_UPGRADE_RE = lazy(r"([^\s,()]+?)(?::\w+)?\s+\(([^,()]+?)(?:,\s*([^()]+?))?\)")


def nvidia_upgrades(history: str) -> List[Dict[str, Any]]:
    """NVIDIA package changes in /var/log/apt/history.log, oldest first:
    [{date, commandline, action, package, from_version, to_version}].

    Format (apt, one stanza per run): `Start-Date: 2021-04-24  06:50:54`,
    `Commandline: /usr/bin/unattended-upgrade`, `Upgrade: pkg:amd64 (old, new), ...`.
    """
    out: List[Dict[str, Any]] = []
    for stanza in re.split(r"\n\s*\n", history):
        # a stanza naming no NVIDIA or CUDA package at all (most of them; one `Install:` line
        # can list hundreds of packages) is not taken apart
        if "cuda" not in stanza and "nvidia" not in stanza.lower():
            continue
        date = re.search(r"^Start-Date:\s*(.+)$", stanza, re.M)
        cmd = re.search(r"^Commandline:\s*(.+)$", stanza, re.M)
        for action in ("Upgrade", "Install", "Remove", "Downgrade", "Purge"):
            m = re.search(rf"^{action}:\s*(.+)$", stanza, re.M)
            if not m:
                continue
            for pm in _APT_UPGRADE_RE.finditer(m.group(1)):
                name = pm.group(1)
                if "nvidia" not in name.lower() and not name.startswith("cuda"):
                    continue
                rec: Dict[str, Any] = {"action": action.lower(), "package": name}
                if date:
                    rec["date"] = re.sub(r"\s+", " ", date.group(1).strip())
                if cmd:
                    rec["commandline"] = cmd.group(1).strip()
                if pm.group(3) and action in ("Upgrade", "Downgrade"):
                    rec["from_version"], rec["to_version"] = pm.group(2).strip(), pm.group(3).strip()
                else:
                    rec["version"] = pm.group(2).strip()
                out.append(rec)
    return out
