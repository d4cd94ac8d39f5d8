"""NVIDIA Jetson (L4T / JetPack) files.

- `/etc/nv_tegra_release`: first line `# R35 (release), REVISION: 4.1, GCID: 33958178,
  BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023`; L4T 36.x adds lines
  (`# KERNEL_VARIANT: oot`, `TARGET_USERSPACE_LIB_DIR=nvidia`, ...). The L4T version is
  `<R>.<REVISION>`: `R32 ... REVISION: 1.0` -> 32.1.0 (jetson-stats jetson_variables.py reads
  it the same way; matrices.md §6.2 gives the regex). The BOARD field is not a reliable board
  name (L4T 35 prints t186ref on Xavier and Orin too; jetson-stats warns about it), so the
  board comes from the device tree's `model`.
- cuDNN version defines (`CUDNN_MAJOR`, `CUDNN_MINOR`, `CUDNN_PATCHLEVEL`) in
  `cudnn_version.h` (cuDNN 8+) or `cudnn.h` (up to 7).
- TensorRT's version from the library file name `libnvinfer.so.8.5.2`.
- GPU load: the nvgpu driver's `load` attribute, per mille (0..1000).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from ..lazyregex import lazy
from ..registry import parser
from .dpkg import upstream_version

_REL_RE = lazy(r"#?\s*R(?P<release>\d+)\s*\((?P<kind>\w+)\),\s*REVISION:\s*(?P<revision>\d+(?:\.\d+)*)"
               r"(?P<rest>.*)$", re.M)


@parser("nv_tegra_release")
def parse_nv_tegra_release(text: str) -> Dict[str, Any]:
    """/etc/nv_tegra_release -> {version ("35.4.1"), release ("35"), revision ("4.1"),
    kind ("release"), gcid, board, eabi, date, kernel_variant}.

    Raises ValueError when there is no `R<n> (...), REVISION: x.y` line.
    """
    # only lines that name a REVISION, each cut to 1 KiB: linear in the input (the regex's
    # leading `\s*` retried at every blank of a large file)
    m = None
    for line in text.splitlines():
        if "REVISION" in line:
            m = _REL_RE.search(line[:1024].strip())
            if m:
                break
    if not m:
        raise ValueError("no 'R<major> (release), REVISION: <x.y>' line")
    rev = m.group("revision")
    if "." not in rev:
        rev += ".0"
    out: Dict[str, Any] = {"version": f"{m.group('release')}.{rev}", "release": m.group("release"),
                           "revision": m.group("revision"), "kind": m.group("kind")}
    for key, field in (("GCID", "gcid"), ("BOARD", "board"), ("EABI", "eabi"), ("DATE", "date")):
        fm = re.search(rf"\b{key}:\s*([^,\n]+)", m.group("rest"))
        if fm:
            out[field] = re.sub(r"\s+", " ", fm.group(1).strip())
    kv = re.search(r"^#\s*KERNEL_VARIANT:\s*(\S+)", text, re.M)
    if kv:
        out["kernel_variant"] = kv.group(1)
    return out


def parse_cudnn_header(text: str) -> Optional[str]:
    """`#define CUDNN_MAJOR 8` / `CUDNN_MINOR 6` / `CUDNN_PATCHLEVEL 0` -> "8.6.0"; None if absent."""
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(rf"^\s*#\s*define\s+{name}\s+(\d+)\s*$", text, re.M)
        if not m:
            return None
        parts.append(m.group(1))
    return ".".join(parts)


def tensorrt_from_libname(name: str) -> Optional[str]:
    """`libnvinfer.so.8.5.2` -> "8.5.2"; `libnvinfer.so.10.3.0` -> "10.3.0"; `libnvinfer.so.8`
    (the soname link only) -> None (the full version is in the real file's name)."""
    m = re.search(r"libnvinfer\.so\.(\d+\.\d+(?:\.\d+)*)$", name)
    return m.group(1) if m else None


def jetpack_version(deb_version: str) -> str:
    """The JetPack release of the nvidia-jetpack package version: `4.6-b197` and `5.1.2-b104`
    (JetPack 4/5) and `6.2+b77`, `6.2.1+b38` (JetPack 6 puts the build after a `+`) -> "4.6",
    "5.1.2", "6.2", "6.2.1"."""
    v = deb_version.strip()
    m = re.match(r"^(?:\d+:)?(\d+(?:\.\d+)*)[-+~]b\d+", v)
    return m.group(1) if m else upstream_version(v)


def gpu_load_percent(text: str) -> Optional[float]:
    """nvgpu `load` (per mille, 0..1000) -> percent; None when unreadable or out of range."""
    try:
        v = int(text.strip())
    except ValueError:
        return None
    if v < 0 or v > 1000:
        return None
    return v / 10.0


__all__ = ["parse_nv_tegra_release", "parse_cudnn_header", "tensorrt_from_libname",
           "jetpack_version", "gpu_load_percent"]
