"""Rockchip RKNN user space: runtime library version strings and runtime log banners.

Formats (verbatim, with sources):

- The runtime library carries its version as a plain string inside the binary, the one
  `strings /usr/lib/librknnrt.so | grep "librknnrt version"` prints:
  `librknnrt version: 1.6.0 (9a7b5d24c@2023-12-13T17:31:11)`; the RV1103/RV1106 "mini"
  runtime says `librknnmrt version: 2.3.2 (429f97ae6b@2025-04-09T09:11:49)`; rknn_server says
  `rknn_server version: 2.3.2 (1842325 build@2025-03-30T09:54:34)`.
  (https://github.com/airockchip/rknn-toolkit2/issues/269, rknpu2 runtime packages)
- At init the runtime logs a banner. 1.x uses a colon, 1.6+ a comma:
  `I RKNN: [14:34:00.921] RKNN Runtime Information: librknnrt version: 1.4.0 (a10f100eb@2022-09-09T09:07:14)`
  `I RKNN: [14:34:00.922] RKNN Driver Information: version: 0.9.8`
  `I RKNN: RKNN Runtime Information, librknnmrt version: 2.3.2 (429f97ae6b@2025-04-09T09:11:49)`
  `I RKNN: RKNN Driver Information, version: 0.9.2`
  `I RKNN: [..] RKNN Model Information, version: 6, toolkit version: 2.3.2(compiler version: 2.3.2 (e045de294f@...))`
  rknn-toolkit-lite2 prints `W rknn-toolkit-lite2 version: 2.3.0`; RKLLM prints
  `I rkllm: rkllm-runtime version: 1.1.2, rknpu driver version: 0.8.2, platform: RK3588`
  and `W rkllm: Warning: Your rknpu driver version is too low, please upgrade to 0.9.7.`
  (airockchip/rknn-toolkit2 issues #254, #281, #316, #557; rockchip-linux/rknn-toolkit2 #212;
  Pelochus/ezrknn-llm #19)
- Errors the runtime prints: `E RKNN: [..] Invalid RKNN model version 6`;
  `Mismatch driver version, %s requires driver version >= %d.%d.%d, but you have driver version:
  %d.%d.%d which is incompatible!`; `Current driver version: %d.%d.%d, recommend to upgrade the
  driver to the new version: >= %d.%d.%d` (format strings inside librknnrt 2.3.2).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..lazyregex import lazy
from ..registry import parser
from .fallback.common import lines_holding

#: `librknnrt version: 1.6.0 (9a7b5d24c@2023-12-13T17:31:11)` inside a binary (bytes).
LIB_VERSION_RE = lazy(
    rb"(librknnrt|librknnmrt|rknn_server|librknn_runtime) version: "
    rb"([0-9][0-9A-Za-z.+\-]*)(?: \(([^)\x00\n]{1,80})\))?")

_RUNTIME_RE = lazy(
    r"(?:RKNN Runtime Information[,:]\s*)?\b(librknnrt|librknnmrt) version:\s*"
    r"([0-9][0-9A-Za-z.+\-]*)(?:\s*\(([^)]*)\))?")
_DRIVER_RE = lazy(r"RKNN Driver Information[,:]\s*version:\s*v?([0-9][0-9.]*[0-9])")
_MODEL_RE = lazy(
    r"RKNN Model Information[,:]\s*version:\s*(\d+),\s*toolkit version:\s*([0-9][0-9A-Za-z.+\-]*?)"
    r"(?:\(|\s|,|$)")
_LITE2_RE = lazy(r"rknn-toolkit-lite2 version:\s*([0-9][0-9A-Za-z.+\-]*)")
_TOOLKIT2_RE = lazy(r"rknn-toolkit2 version:\s*([0-9][0-9A-Za-z.+\-]*)")
_RKLLM_RE = lazy(
    r"rkllm-runtime version:\s*([0-9][0-9A-Za-z.+\-]*?),\s*rknpu driver version:\s*v?([0-9.]+[0-9])"
    r"(?:,\s*platform:\s*(\S+))?")
_INVALID_MODEL_RE = lazy(r"Invalid RKNN model version\s+(\d+)")
_MISMATCH_RE = lazy(
    r"Mismatch driver version,\s*(\S+) requires driver version >=\s*([0-9.]+[0-9]),\s*but you have "
    r"driver version:\s*([0-9.]+[0-9])")
_RECOMMEND_RE = lazy(
    r"Current driver version:\s*([0-9.]+[0-9]),\s*recommend to upgrade the driver to the new "
    r"version:\s*>=\s*([0-9.]+[0-9])")
_RKLLM_LOW_RE = lazy(r"Your rknpu driver version is too low, please upgrade to ([0-9.]+[0-9])")


def parse_lib_version(data: bytes) -> Optional[Dict[str, str]]:
    """The version string inside a runtime binary (scanned as bytes; the library is not loaded).

    Returns {library: "librknnrt" | "librknnmrt" | "rknn_server", version: "1.6.0",
    build: "9a7b5d24c@2023-12-13T17:31:11"} (build absent when the string has none), or None
    when the bytes carry no version string.
    """
    for m in LIB_VERSION_RE.finditer(data):
        out = {"library": m.group(1).decode("ascii"), "version": m.group(2).decode("ascii")}
        if m.group(3):
            out["build"] = m.group(3).decode("ascii", "replace")
        return out
    return None


#: what str.splitlines() splits on besides "\n"
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _version_lines(text: str) -> Iterator[Tuple[int, str]]:
    """(1-based number, line) of the lines of text.splitlines() that hold "version" (every
    pattern of parse_runtime_log names a version): found by str.find over the text, not by a
    test of every line."""
    if any(b in text for b in _OTHER_BREAKS):
        for n, line in enumerate(text.splitlines(), 1):
            if "version" in line:
                yield n, line
        return
    for i, start, end in lines_holding(text, ("version",)):
        yield i + 1, text[start:end]


@parser("rknn_runtime_log")
def parse_runtime_log(text: str) -> Dict[str, Any]:
    """What an RKNN/RKLLM runtime log states about versions and version errors.

    Keys (each only when the log states it): runtime {library, version, build, line_no},
    driver_version, model_version (int), model_toolkit_version, toolkit_lite2_version,
    toolkit2_version, rkllm {version, driver_version, platform}, invalid_model_version (int),
    driver_required {by, min, have}, driver_recommended {have, min}, rkllm_driver_min.
    Empty dict when the text has none of these lines.
    """
    out: Dict[str, Any] = {}
    for n, line in _version_lines(text):
        m = _RUNTIME_RE.search(line)
        if m and "runtime" not in out and ("Runtime Information" in line or "RKNN" in line):
            rt: Dict[str, Any] = {"library": m.group(1), "version": m.group(2), "line_no": n}
            if m.group(3):
                rt["build"] = m.group(3).strip()
            out["runtime"] = rt
        m = _DRIVER_RE.search(line)
        if m and "driver_version" not in out:
            out["driver_version"] = m.group(1)
        m = _MODEL_RE.search(line)
        if m and "model_version" not in out:
            out["model_version"] = int(m.group(1))
            out["model_toolkit_version"] = m.group(2)
        m = _LITE2_RE.search(line)
        if m and "toolkit_lite2_version" not in out:
            out["toolkit_lite2_version"] = m.group(1)
        m = _TOOLKIT2_RE.search(line)
        if m and "toolkit2_version" not in out:
            out["toolkit2_version"] = m.group(1)
        m = _RKLLM_RE.search(line)
        if m and "rkllm" not in out:
            rk = {"version": m.group(1), "driver_version": m.group(2)}
            if m.group(3):
                rk["platform"] = m.group(3)
            out["rkllm"] = rk
            out.setdefault("driver_version", m.group(2))
        m = _INVALID_MODEL_RE.search(line)
        if m and "invalid_model_version" not in out:
            out["invalid_model_version"] = int(m.group(1))
        m = _MISMATCH_RE.search(line)
        if m and "driver_required" not in out:
            out["driver_required"] = {"by": m.group(1), "min": m.group(2), "have": m.group(3)}
            out.setdefault("driver_version", m.group(3))
        m = _RECOMMEND_RE.search(line)
        if m and "driver_recommended" not in out:
            out["driver_recommended"] = {"have": m.group(1), "min": m.group(2)}
            out.setdefault("driver_version", m.group(1))
        m = _RKLLM_LOW_RE.search(line)
        if m and "rkllm_driver_min" not in out:
            out["rkllm_driver_min"] = m.group(1)
    return out


def parse_dist_version(dirname: str, metadata: Optional[str] = None) -> Optional[str]:
    """Version of an installed Python distribution.

    From the `Version:` header of its METADATA/PKG-INFO when given, else from the directory name
    (`rknn_toolkit_lite2-2.3.0.dist-info` -> `2.3.0`, `rkllm-1.1.4.egg-info` -> `1.1.4`).
    None when neither states one.
    """
    if metadata:
        for line in metadata.splitlines():
            if line.lower().startswith("version:"):
                v = line.split(":", 1)[1].strip()
                if v:
                    return v
            if not line.strip():
                break
    m = re.match(r"^[A-Za-z0-9_.]+?-([0-9][^-]*?)(?:-py[0-9.]+)?\.(?:dist|egg)-info$", dirname)
    return m.group(1) if m else None


def rknn_model_header(data: bytes) -> Optional[int]:
    """Model format version of a `.rknn` file: bytes 0-3 `RKNN`, uint32 LE at offset 8.

    None when the bytes are not an RKNN model.
    """
    if len(data) < 12 or data[:4] != b"RKNN":
        return None
    return int.from_bytes(data[8:12], "little")


__all__: List[str] = ["parse_lib_version", "parse_runtime_log", "parse_dist_version",
                      "rknn_model_header", "LIB_VERSION_RE"]
