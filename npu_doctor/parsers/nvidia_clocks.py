"""Why an NVIDIA GPU's clocks are held down: the clock event (throttle) reasons, their
time counters and the power limits of an `nvidia-smi -q` GPU section.

Sources: nvml.h `nvmlClocksEventReasons` / `nvmlClocksThrottleReasons` (R510 NVML reference,
https://docs.nvidia.com/deploy/archive/R510/nvml-api/group__nvmlClocksThrottleReasons.html) and
nvidia-smi(1). What differs between driver generations:

- the section is "Clocks Throttle Reasons" up to R530 and "Clocks Event Reasons" from R535;
  R3xx drivers print only Idle, Applications Clocks Setting, SW Power Cap, HW Slowdown (and
  "Unknown", nvmlClocksThrottleReasonUnknown 0x8000000000000000); R375+ add Sync Boost,
  SW Thermal Slowdown and, under HW Slowdown, HW Thermal Slowdown and HW Power Brake Slowdown;
  R418+ add Display Clock Setting;
- R550+ add "Clocks Event Reasons Counters": the time (us) since the driver loaded that the
  clocks spent held down by SW Power Capping, Sync Boost, SW Thermal Slowdown, HW Thermal
  Slowdown and HW Power Braking (nvmlDeviceGetFieldValues NVML_FI_DEV_CLOCKS_EVENT_REASON_*);
- the power limits are "Power Limit" / "Enforced Power Limit" (old "Power Readings") or
  "Current Power Limit" / "Requested Power Limit" (R530+ "GPU Power Readings"), with
  "Default Power Limit", "Min Power Limit", "Max Power Limit" in both.

HW Slowdown means "temperature being too high, External Power Brake Assertion ... or power draw
too high and Fast Trigger protection" (nvml.h): with neither of its sub-reasons active (or on a
driver that has none) it is counted as a power reason, the thermal causes having their own
flags since R375.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional

#: The section's name in every driver generation; pasted alone (`nvidia-smi -q | grep -A8
#: 'Clocks Throttle'`), it is still one GPU's record (parsers.nvidia.parse_nvidia_smi_q).
REASON_SECTIONS = ("Clocks Throttle Reasons", "Clocks Event Reasons")
#: The reasons that mean "held down for temperature".
THERMAL_REASONS = ("HW Thermal Slowdown", "SW Thermal Slowdown")
#: The reasons that mean "held down by a power limit or the supply" (HW Slowdown: see above).
POWER_REASONS = ("SW Power Cap", "HW Power Brake Slowdown", "HW Slowdown")

#: "Clocks Event Reasons Counters" entry -> key of the counters dict (seconds).
COUNTERS = {"SW Power Capping": "sw_power_cap_s", "Sync Boost": "sync_boost_s",
            "SW Thermal Slowdown": "sw_thermal_s", "HW Thermal Slowdown": "hw_thermal_s",
            "HW Power Braking": "hw_power_brake_s"}

_US_RE = re.compile(r"^(\d+)\s*us$")


def power_reasons(active: List[str]) -> List[str]:
    """The active reasons that are power limits; HW Slowdown only when no HW Thermal Slowdown
    explains it (a HW Power Brake Slowdown is listed itself)."""
    out = [r for r in active if r in ("SW Power Cap", "HW Power Brake Slowdown")]
    if "HW Slowdown" in active and not {"HW Thermal Slowdown", "HW Power Brake Slowdown"} & set(active):
        out.append("HW Slowdown")
    return out


def reasons(section: Any) -> Optional[Dict[str, List[str]]]:
    """{active, thermal, power} reason names of a "Clocks Event/Throttle Reasons" section
    (a dict of name -> "Active"/"Not Active"); None when the section is absent or N/A."""
    if not isinstance(section, dict):
        return None
    active = [k for k, v in section.items() if isinstance(v, str) and v.strip().lower() == "active"]
    return {"active": active, "thermal": [r for r in active if r in THERMAL_REASONS],
            "power": power_reasons(active)}


def counters(section: Any) -> Optional[Dict[str, float]]:
    """The "Clocks Event Reasons Counters" section in seconds, plus thermal_s (SW + HW thermal
    slowdown) and power_s (SW power capping + HW power braking); None when absent or all N/A."""
    if not isinstance(section, dict):
        return None
    out: Dict[str, float] = {}
    for name, key in COUNTERS.items():
        m = _US_RE.match(str(section.get(name, "")).strip())
        if m:
            out[key] = round(int(m.group(1)) / 1e6, 3)
    if not out:
        return None
    out["thermal_s"] = round(out.get("sw_thermal_s", 0) + out.get("hw_thermal_s", 0), 3)
    out["power_s"] = round(out.get("sw_power_cap_s", 0) + out.get("hw_power_brake_s", 0), 3)
    return out


def power_limits(g: Dict[str, Any], num: Callable[[Any], Optional[float]]) -> Dict[str, float]:
    """power_limit_w (enforced), power_limit_default_w, power_limit_max_w, power_limit_min_w,
    power_limit_requested_w of a GPU section, from whichever readings section it has; plus
    power_limit_below_default_w when the enforced limit is lower than the default."""
    out: Dict[str, float] = {}
    for sec in ("GPU Power Readings", "Power Readings"):
        s = g.get(sec)
        if not isinstance(s, dict):
            continue
        for keys, field in ((("Current Power Limit", "Enforced Power Limit", "Power Limit"), "power_limit_w"),
                            (("Default Power Limit",), "power_limit_default_w"),
                            (("Requested Power Limit",), "power_limit_requested_w"),
                            (("Min Power Limit",), "power_limit_min_w"),
                            (("Max Power Limit",), "power_limit_max_w")):
            if field in out:
                continue
            for k in keys:
                v = num(s.get(k))
                if v is not None:
                    out[field] = v
                    break
    if "power_limit_w" in out and "power_limit_default_w" in out \
            and out["power_limit_w"] < out["power_limit_default_w"]:
        out["power_limit_below_default_w"] = round(out["power_limit_default_w"] - out["power_limit_w"], 2)
    return out


__all__ = ["REASON_SECTIONS", "THERMAL_REASONS", "POWER_REASONS", "COUNTERS", "power_reasons", "reasons", "counters",
           "power_limits"]
