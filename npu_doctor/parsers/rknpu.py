"""Rockchip RKNPU driver debugfs / procfs files: `version` and `load`.

The vendor driver (rknpu_debugger.c in Rockchip's BSP kernels, mirrored at
https://github.com/airockchip/rknn-toolkit2 and in every rk35xx vendor kernel) creates
`/sys/kernel/debug/rknpu/{version,load,freq,power,delayms,...}` (CONFIG_ROCKCHIP_RKNPU_DEBUG_FS)
or the same names under `/proc/rknpu/` (CONFIG_ROCKCHIP_RKNPU_PROC_FS).

- version: `seq_printf(m, "%s: v%d.%d.%d\\n", DRIVER_DESC, MAJOR, MINOR, PATCHLEVEL)`, i.e.
  `RKNPU driver: v0.9.8`.
- load: `seq_puts(m, "NPU load: ")`, then per core: on multi-core SoCs (RK3588: 3 cores, RK3576:
  2) `" Core%d: "` + `"%2.d%%,"`, on single-core SoCs (RK3566/RK3568/RK3562/RV1106) just
  `"%2.d%%"`; a newline at the end. Examples seen in the field:
  `NPU load:  Core0:  0%, Core1:  0%, Core2:  0%,` (itsfoss.com/monitor-npu-linux),
  `NPU load:  Core0: 99%, Core1: 99%, Core2: 429496%` (rockchip-linux/rknpu2 issue 102, an
  older driver without the clamp to 100, after a failed submit), `NPU load:  12%`.
  `%2.d` prints *nothing* for 0 (precision 0), so `Core0:   %,` also means 0 %.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..lazyregex import lazy
from ..registry import parser

_VERSION_TOKEN_RE = lazy(r"\s*v?(\d+(?:\.\d+)+)\b")
#: Longest line looked at (the driver prints one short line; debugfs could hold anything).
_MAX_LINE = 512
_CORE_RE = lazy(r"Core\s*(\d+)\s*:\s*(\d*)\s*%")
_SINGLE_RE = lazy(r"NPU load:\s*(\d*)\s*%")


@parser("rknpu_version")
def parse_rknpu_version(text: str) -> Dict[str, str]:
    """`RKNPU driver: v0.9.8` -> {"version": "0.9.8", "description": "RKNPU driver"}.

    The version token is kept as printed, without the leading `v`. Raises ValueError when no
    `NAME: vX.Y.Z` line is found.
    """
    # line by line, split at the first colon: linear in the input (a regex over the whole
    # text with `^\s*...\s*:` backtracked cubically on a large file of blanks)
    for line in (text or "").splitlines():
        desc, colon, rest = line[:_MAX_LINE].partition(":")
        if not colon:
            continue
        m = _VERSION_TOKEN_RE.match(rest)
        if m:
            out = {"version": m.group(1)}
            if desc.strip():
                out["description"] = desc.strip()
            return out
    raise ValueError(f"no 'RKNPU driver: vX.Y.Z' line in {(text or '').strip()[:80]!r}")


@parser("rknpu_load")
def parse_rknpu_load(text: str) -> Dict[str, Any]:
    """Per-core NPU load in percent, as the driver printed it (no clamping, no repair).

    Returns {"cores_percent": [35, 30, 28], "max_percent": 35, "mean_percent": 31.0}. A value
    over 100 is kept: it is an invalid reading (counter wrap-around after a hung job) that the
    caller must not report as utilisation. Raises ValueError when the text is not a load line.
    """
    text = (text or "").strip()
    if "load" not in text.lower():
        raise ValueError(f"not an RKNPU load line: {text[:80]!r}")
    cores: List[int] = []
    found = _CORE_RE.findall(text)
    if found:
        by_index = sorted((int(i), int(v) if v else 0) for i, v in found)
        cores = [v for _i, v in by_index]
    else:
        m = _SINGLE_RE.search(text)
        if not m:
            raise ValueError(f"no per-core percentage in {text[:80]!r}")
        cores = [int(m.group(1)) if m.group(1) else 0]
    return {"cores_percent": cores, "max_percent": max(cores),
            "mean_percent": round(sum(cores) / len(cores), 2)}
