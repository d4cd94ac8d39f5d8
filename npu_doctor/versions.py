"""One place that turns vendor version strings into comparable `packaging` versions.

Vendor formats handled (sources: docs/matrices.md, each vendor's tools):

- Ascend CANN / driver: `23.0.rc3`, `24.1.rc2.2` (second hotfix of rc2), `8.0.RC2.alpha003`,
  `8.0.RC1.beta1`, `8.0.T6` (internal test drop, before RC1), `7.0.RC1`, `23.0.rc2.b020`
  (build number, ignored for ordering). Order:
  `8.0.T6 < 8.0.T63 < 8.0.RC1.alpha001 < 8.0.RC1.beta1 < 8.0.RC1 < 8.0.RC2 < 8.0.0`,
  `24.1.rc1 < 24.1.rc1.1 < 24.1.rc2 < 24.1.0 < 24.1.0.1 < 25.0.rc1`.
- Ascend inner versions (Huawei VRC code) `V100R001C21SPC002B220` -> 100.1.21.2.220
  (`V<ver>R<rel>C<cycle>[SPC<sp>][B<build>]`; no SPC sorts before SPC001).
- Ascend compatibility lists `[7.0.0,7.5.99]`, `[6.4.0,6.4.99],[7.0.0,8.9.9]`, `[24.1,24.1.]`
  (a trailing dot is a prefix bound), `[V100R001C30]`: see `in_range_list`.
- semver with tags: `9.2.0-beta.2`, `v1.32.1-rc1`; PEP 440-ish `2.0.0b0`; OpenVINO
  `2024.2.0.dev20240513` (a pre-release of 2024.2.0).
- a version followed by a build hash and date: `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)`.
- Jetson L4T: `# R35 (release), REVISION: 4.1, GCID: ...` -> 35.4.1.
- JetPack: `5.0.2 GA`, `5.0.1 DP`, `6.0 EA`, `6.1 (rev1)`: `PRE-DP < DP < EA < GA (= none)`,
  `(revN)` is a re-spin after the release.
- CUDA: `12.4 Update 1` -> 12.4.1, `V12.9.86` -> 12.9.86, `11.0.1 RC` (before 11.0.1).
- driver versions with a build suffix: `2.19.0_20250330` (the date orders builds of one
  release), `v0.9.8`, dpkg `36.4.3-20250107174145`.
- plain dotted versions of any length, compared numerically per component: NVIDIA
  `570.124.06` > `570.26` (124 > 26: the minor is not a decimal fraction).
- Edge TPU: the compiler moved from `2.x.<CL number>` (`2.0.267685300`, `2.1.302470888`) to
  `14.1.317412892`, `15.0.340273435`, `16.0.384591198`. Numeric order is also release order
  (`2.1.302470888 < 14.1.317412892`), and the third field, Google's changelist number, grows
  monotonically across both schemes. The *runtime* compatibility is a separate small integer
  (`RuntimeVersion(14)`, "Package requires runtime version (14)"); a compiler release targets
  one runtime version by default (16.0 -> 14, 14.1/15.0 -> 13, 2.1 -> 13, 2.0.267685300 -> 12;
  matrices.md §7.1), so compare compiler with compiler and runtime with runtime, never across.

`normalize()` never raises: an unreadable string gives None (unknown, never a guess).
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from .lazyregex import lazy

_L4T_RE = lazy(r"R(\d+)\s*\(\w+\),\s*REVISION:\s*(\d+(?:\.\d+)*)", re.I)
_LEAD_RE = lazy(r"^[vV]?(\d+(?:\.\d+)*)(.*)$")
_VRC_RE = lazy(r"^V(\d+)R(\d+)(?:C(\d+))?(?:SPC(\d+))?(?:B(\d+))?$", re.I)
_CUDA_UPDATE_RE = lazy(r"^(\d+\.\d+)(?:\.\d+)?\s+Update\s+(\d+)\b", re.I)
# JetPack / NVIDIA release words after a space: order PRE-DP < DP < EA < RC < GA (= release)
_RELEASE_WORDS = (("pre-dp", "a0"), ("dp", "a1"), ("ea", "b0"), ("rc", "rc0"), ("ga", ""))
_REV_RE = lazy(r"\(\s*rev\s*(\d+)\s*\)", re.I)


def display(raw: str) -> str:
    """The version token as the vendor prints it, without build hashes or dates.

    `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)` -> `1.6.0`; `R35 (release), REVISION: 4.1` ->
    `35.4.1`; `v0.9.8` -> `0.9.8`; `12.4 Update 1` -> `12.4.1`.
    """
    raw = str(raw).strip()
    m = _L4T_RE.search(raw)
    if m:
        rev = m.group(2)
        # "REVISION: 1.0" -> 32.1.0; "REVISION: 4" -> 35.4 (rare, kept as printed)
        return f"{m.group(1)}.{rev}"
    m = _CUDA_UPDATE_RE.match(raw)
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    tok = raw.split()[0] if raw.split() else raw
    if tok[:1] in "vV" and tok[1:2].isdigit():
        tok = tok[1:]
    return tok


def split_build(raw: str) -> Tuple[str, Optional[str]]:
    """(version token, build) from `1.6.0 (9a7b5d24c@2023-12-13T17:31:11)` style strings.

    `2.19.0_20250330` -> ("2.19.0_20250330", None): an underscore date is part of the token
    the vendor prints. Returns (display(raw), None) when there is no parenthesised build.
    """
    raw = str(raw).strip()
    m = re.match(r"^(\S+)\s*\((.*)\)\s*$", raw)
    if m and not _L4T_RE.search(raw) and not _REV_RE.search(raw):
        return display(m.group(1)), m.group(2)
    return display(raw), None


def _vrc(s: str) -> Optional[Version]:
    m = _VRC_RE.match(s)
    if not m:
        return None
    parts = [int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0),
             int(m.group(5) or 0)]
    return Version(".".join(str(p) for p in parts))


def _release_word_suffix(raw: str) -> Tuple[str, str]:
    """Split JetPack/CUDA style `5.0.1 DP`, `6.1 (rev1)`, `11.0.1 RC` into (token, pep440 tail)."""
    s = raw.strip()
    tail = ""
    rev = _REV_RE.search(s)
    if rev:
        tail = f".post{int(rev.group(1))}"
        s = _REV_RE.sub("", s).strip()
    parts = s.split()
    if len(parts) == 2 and re.match(r"^[vV]?\d+(\.\d+)*$", parts[0]):
        word = parts[1].lower()
        for w, pep in _RELEASE_WORDS:
            if word == w:
                return parts[0], pep + tail
    return s, tail


def normalize(raw: Optional[str]) -> Optional[Version]:
    """A comparable Version for a vendor string, or None if it cannot be read."""
    if raw is None:
        return None
    text0 = str(raw).strip()
    if not text0:
        return None
    vrc = _vrc(text0)
    if vrc is not None:
        return vrc
    extra = ""
    if not _L4T_RE.search(text0) and not _CUDA_UPDATE_RE.match(text0):
        text0, extra = _release_word_suffix(text0)
    s = display(text0)
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
            word, num = pm.group(1), int(pm.group(2))
            if word == "t":
                # Ascend "8.0.T6": an internal test drop, before RC1 of that release
                pre = f"a{num}"
            elif word == "rc" and pm.group(3):
                # 8.0.RC2.alpha003 / 8.0.RC2.beta1: drops before RC2 proper, alpha < beta
                sub = int(pm.group(4)) + (100000 if pm.group(3) == "beta" else 0)
                pre = f"rc{num}.dev{sub}"
            else:
                pre = {"alpha": "a", "beta": "b", "rc": "rc"}[word] + str(num)
            tail = pm.group(5).strip(".")
            if tail and re.match(r"^\d+(\.\d+)*$", tail):
                # 24.1.rc2.2: the second hotfix of rc2 -> rc2.post2
                pre += f".post{tail.replace('.', '')}"
        elif re.match(r"^(alpha|beta|a|b|rc)\.?\d*$", low):
            word = re.match(r"^[a-z]+", low).group(0)  # type: ignore[union-attr]
            pre = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc"}[word] + (
                re.sub(r"\D", "", low) or "0")
        elif re.match(r"^dev\.?\d+$", low):
            pre = ".dev" + re.sub(r"\D", "", low)
        else:
            local = re.sub(r"[^a-z0-9]+", ".", low).strip(".") or None
    if extra and not pre:
        pre = extra
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
    """Whether a version starts with a dotted prefix (`24.1.rc2.2` matches `24.1`).

    Component-wise and case-insensitive: `24.10` does not match `24.1`.
    """
    if version is None:
        return False
    v = re.split(r"[.\-_+]", display(str(version)).lower())
    p = [x for x in re.split(r"[.\-_+]", str(prefix).lower()) if x]
    return bool(p) and v[: len(p)] == p


def major_minor(raw: Optional[str]) -> Optional[str]:
    """`12.4.1` -> `12.4`; `570.124.06` -> `570.124`; None when unreadable."""
    v = normalize(raw)
    if v is None:
        return None
    rel = list(v.release) + [0]
    return f"{rel[0]}.{rel[1]}"


def _groups(text: str) -> Optional[List[List[str]]]:
    text = str(text).strip()
    if not text:
        return None
    groups = re.findall(r"\[([^\[\]]*)\]", text)
    leftover = re.sub(r"\[[^\[\]]*\]", "", text).replace(",", "").strip()
    if not groups or leftover:
        return None
    out = []
    for g in groups:
        items = [x.strip() for x in g.split(",")]
        if not 1 <= len(items) <= 2 or not all(items):
            return None
        out.append(items)
    return out


def in_range_list(version: Optional[str], text: str) -> Optional[bool]:
    """Whether a version lies in an Ascend-style compatibility list.

    `text` is comma-joined bracket groups (`[7.0.0,7.5.99]`, `[6.4.0,6.4.99],[7.0.0,8.9.9]`,
    `[V100R001C13,V100R001C19],[V100R001C30]`, `[24.1,24.1.]`), each an inclusive `[lo,hi]`
    range or a singleton `[v]`. An upper bound ending in a dot (`24.1.`) is a prefix: every
    `24.1.*` version (`24.1.rc2.2`, `24.1.0`) is inside. An upper bound covers versions that
    extend it (`7.5.99` covers `7.5.99.1`; `V100R001C19` covers `V100R001C19SPC002`); a
    singleton matches equal versions and versions it is a prefix of.
    Source: Ascend `version.info` `compatible_version*` fields (matrices.md §1.3, §9).
    Returns None when the version or the list cannot be read (unknown, never a guess).
    """
    if version is None:
        return None
    groups = _groups(text)
    if groups is None or normalize(version) is None:
        return None
    for items in groups:
        lo = items[0]
        hi = items[-1]
        if len(items) == 1:
            if compare(version, lo) == 0 or _covers(version, lo):
                return True
            continue
        lo_ok = compare(version, lo)
        if hi.endswith("."):
            pref = hi.rstrip(".")
            if prefix_match(version, pref) or _vrc_prefix(version, pref):
                return True
            hi = pref
        if lo_ok is None:
            continue
        if lo_ok < 0 and not _covers(version, lo):
            continue
        upper = compare(version, hi)
        if upper is not None and (upper <= 0 or _covers(version, hi)):
            return True
    return False


def _vrc_prefix(version: str, pref: str) -> bool:
    return str(version).upper().startswith(pref.upper()) and _VRC_RE.match(pref.upper()) is not None


def _covers(version: str, bound: str) -> bool:
    """`bound` is a truncation of `version` (same leading release fields, or a VRC prefix)."""
    if _vrc_prefix(version, bound):
        return True
    vv, vb = normalize(version), normalize(bound)
    if vv is None or vb is None or vb.pre or vb.local:
        return False
    n = len(vb.release)
    return len(vv.release) > n and vv.release[:n] == vb.release


__all__ = ["normalize", "compare", "prefix_match", "display", "split_build", "in_range_list",
           "major_minor"]
