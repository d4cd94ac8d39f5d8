"""One place that turns vendor version strings into comparable `packaging` versions.

Vendor formats handled (see ../shared/research/matrices.md for where each comes from):
- Ascend CANN / driver: `23.0.rc3`, `24.1.rc2.2`, `8.0.RC2.alpha003`, `8.0.T6`, `7.0.RC1`
- semver with tags: `9.2.0-beta.2`
- a version followed by a build hash and date: `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)`
- Jetson L4T: `R35 (release), REVISION: 4.1` -> 35.4.1
- driver versions with a build suffix: `2.19.0_20250330`, `v0.9.8`
- plain dotted versions of any length: NVIDIA `570.124.06`, Edge TPU `2.1.302470888`

`normalize()` never raises: an unreadable string gives None (unknown, never a guess).
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from packaging.version import InvalidVersion, Version

_L4T_RE = re.compile(r"R(\d+)\s*\(\w+\),\s*REVISION:\s*(\d+(?:\.\d+)*)", re.I)
_LEAD_RE = re.compile(r"^[vV]?(\d+(?:\.\d+)*)(.*)$")
# pre-release words as vendors spell them -> PEP 440 spelling
_PRE_WORDS = (("alpha", "a"), ("beta", "b"), ("rc", "rc"), ("t", "a"))


def display(raw: str) -> str:
    """The version token as the vendor prints it, without build hashes or dates.

    `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)` -> `1.6.0`; `R35 (release), REVISION: 4.1` ->
    `35.4.1`; `v0.9.8` -> `0.9.8`.
    """
    raw = raw.strip()
    m = _L4T_RE.search(raw)
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    tok = raw.split()[0] if raw.split() else raw
    if tok[:1] in "vV" and tok[1:2].isdigit():
        tok = tok[1:]
    return tok


def split_build(raw: str) -> Tuple[str, Optional[str]]:
    """(version token, build) from `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)` style strings."""
    raw = raw.strip()
    m = re.match(r"^(\S+)\s*\((.*)\)\s*$", raw)
    if m and not _L4T_RE.search(raw):
        return display(m.group(1)), m.group(2)
    return display(raw), None


def normalize(raw: Optional[str]) -> Optional[Version]:
    """A comparable Version for a vendor string, or None if it cannot be read."""
    if raw is None:
        return None
    s = display(str(raw))
    m = _LEAD_RE.match(s)
    if not m:
        return None
    release, rest = m.group(1), m.group(2)
    rest = rest.strip(".-_+ ")
    local = None
    pre = ""
    if rest:
        low = rest.lower()
        pm = re.match(r"^(alpha|beta|rc|t)\.?(\d+)(?:[.\-_]?(alpha|beta)\.?(\d+))?(.*)$", low)
        if pm:
            word = dict(_PRE_WORDS)[pm.group(1)]
            num = int(pm.group(2))
            if pm.group(1) == "t":
                # Ascend "8.0.T6": a test build, before RC1 of that release
                pre = f"a{num}"
            elif pm.group(3):
                # 8.0.RC2.alpha003: an alpha of RC2 -> still before RC2 proper
                pre = f"rc{num}.dev{int(pm.group(4))}"
            else:
                pre = f"{word}{num}"
            tail = pm.group(5).strip(".")
            if tail and re.match(r"^\d+(\.\d+)*$", tail):
                # 24.1.rc2.2: the second patch of rc2 -> rc2.post2
                pre += f".post{tail.replace('.', '')}"
        elif re.match(r"^(alpha|beta|a|b)\.?\d*$", low):
            word = "a" if low.startswith("a") else "b"
            pre = word + (re.sub(r"\D", "", low) or "0")
        else:
            local = re.sub(r"[^a-z0-9]+", ".", low).strip(".") or None
    text = release + pre + (f"+{local}" if local else "")
    try:
        return Version(text)
    except InvalidVersion:
        try:
            return Version(release)
        except InvalidVersion:
            return None


def compare(a: Optional[str], b: Optional[str]) -> Optional[int]:
    """-1, 0, 1 comparing two vendor strings, or None if either is unreadable."""
    va, vb = normalize(a), normalize(b)
    if va is None or vb is None:
        return None
    return (va > vb) - (va < vb)


def prefix_match(version: Optional[str], prefix: str) -> bool:
    """Whether a version starts with a dotted prefix (`24.1.rc2.2` matches `24.1`)."""
    if version is None:
        return False
    v = display(str(version)).lower().split(".")
    p = [x for x in prefix.lower().split(".") if x]
    return v[: len(p)] == p
