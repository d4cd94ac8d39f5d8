"""Pure functions for the Linux thermal and devfreq sysfs classes.

Sources (kernel ABI):
- https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-class-thermal — `temp` and
  `trip_point_N_temp`/`_hyst` in millidegrees Celsius, `trip_point_N_type` one of
  active/passive/hot/critical, cooling_device `cur_state`/`max_state` integers.
- https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-class-devfreq — `cur_freq`,
  `min_freq`, `max_freq` and `available_frequencies` in Hz, `available_governors`
  space-separated.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

#: A reading outside this range (°C) cannot be a real silicon temperature: a sensor that is
#: not ready (-273.15 °C, THERMAL_TEMP_INVALID -274 °C) or a wrapped unsigned value (429496 °C).
PLAUSIBLE_MIN_C = -40.0
PLAUSIBLE_MAX_C = 200.0
#: A trip point outside this range (°C) is not a real one: a truncated `trip_point_N_temp`
#: (`120` for `120000`, read as 0.12 °C) must not turn every reading into throttling.
PLAUSIBLE_TRIP_MIN_C = 20.0
PLAUSIBLE_TRIP_MAX_C = 200.0
#: Digits a sysfs integer may have (64-bit values have at most 20): longer text is garbage,
#: and int() of 4300+ digits raises, float() of a huge int overflows.
MAX_INT_DIGITS = 20


def millideg_to_c(text: str) -> float:
    """`86250` -> 86.25. Raises ValueError for anything but an integer (sign allowed)."""
    s = text.strip().strip("\x00")
    if len(s) > MAX_INT_DIGITS + 1 or not re.fullmatch(r"[-+]?\d+", s):
        raise ValueError(f"not a millidegree integer: {s[:40]!r}")
    return round(int(s) / 1000.0, 3)


def plausible_c(temp_c: Optional[float]) -> bool:
    return temp_c is not None and PLAUSIBLE_MIN_C <= temp_c <= PLAUSIBLE_MAX_C


def plausible_trip_c(temp_c: Optional[float]) -> bool:
    return temp_c is not None and PLAUSIBLE_TRIP_MIN_C <= temp_c <= PLAUSIBLE_TRIP_MAX_C


def build_zone(name: str, attrs: Dict[str, Optional[str]]) -> Dict[str, Any]:
    """One thermal zone record from its raw attribute texts (None = missing/unreadable).

    `attrs` keys are sysfs names: type, temp, mode, policy, trip_point_N_{type,temp,hyst}.
    Returns {zone, type, temp_c?, mode?, policy?, trips: [{index, type, temp_c, hyst_c?}],
    passive_trip_c? (lowest plausible passive trip), throttle_trip_c? (highest passive trip
    at or below the temperature), critical_trip_c?, headroom_c? (passive_trip_c - temp_c,
    only for a plausible temperature), read_error? (why temp is not known)}. A trip whose
    temperature is missing or unparsable is left out; one out of the plausible range is kept
    in `trips` but not used for passive/critical.
    """
    zone: Dict[str, Any] = {"zone": name}
    for key in ("type", "mode", "policy"):
        if attrs.get(key):
            zone[key] = attrs[key]
    raw = attrs.get("temp")
    if raw is not None:
        try:
            zone["temp_c"] = millideg_to_c(raw)
        except ValueError as e:
            zone["read_error"] = str(e)
    trips: List[Dict[str, Any]] = []
    indices = sorted({int(m.group(1)) for k in attrs
                      for m in [re.fullmatch(r"trip_point_(\d+)_temp", k)] if m})
    for i in indices:
        t_raw = attrs.get(f"trip_point_{i}_temp")
        if t_raw is None:
            continue
        try:
            t_c = millideg_to_c(t_raw)
        except ValueError:
            continue
        trip: Dict[str, Any] = {"index": i, "type": (attrs.get(f"trip_point_{i}_type") or "").strip() or None,
                                "temp_c": t_c}
        h_raw = attrs.get(f"trip_point_{i}_hyst")
        if h_raw is not None:
            try:
                trip["hyst_c"] = millideg_to_c(h_raw)
            except ValueError:
                pass
        trips.append({k: v for k, v in trip.items() if v is not None})
    zone["trips"] = trips
    passive = sorted(t["temp_c"] for t in trips
                     if t.get("type") == "passive" and plausible_trip_c(t["temp_c"]))
    critical = sorted(t["temp_c"] for t in trips
                      if t.get("type") == "critical" and plausible_trip_c(t["temp_c"]))
    if passive:
        zone["passive_trip_c"] = passive[0]
    if critical:
        zone["critical_trip_c"] = critical[0]
    temp = zone.get("temp_c")
    if plausible_c(temp):
        if passive:
            zone["headroom_c"] = round(passive[0] - temp, 3)
            crossed = [p for p in passive if p <= temp]
            if crossed:
                zone["throttle_trip_c"] = crossed[-1]
    elif temp is not None:
        zone["reading_invalid"] = True
    return zone


def parse_int(text: Optional[str]) -> Optional[int]:
    """An integer attribute, or None when missing or not an integer."""
    if text is None:
        return None
    s = text.strip().strip("\x00")
    return int(s) if len(s) <= MAX_INT_DIGITS + 1 and re.fullmatch(r"[-+]?\d+", s) else None


def parse_hz_list(text: Optional[str]) -> Optional[List[int]]:
    """`300000000 400000000 ...` -> ints (Hz), sorted; None when missing or not numbers."""
    if text is None:
        return None
    parts = text.split()
    if not parts or not all(len(p) <= MAX_INT_DIGITS and re.fullmatch(r"\d+", p) for p in parts):
        return None
    return sorted(int(p) for p in parts)


def build_devfreq(name: str, attrs: Dict[str, Optional[str]]) -> Dict[str, Any]:
    """One devfreq record from raw attribute texts: {name, cur_hz?, min_hz?, max_hz?,
    governor?, available_governors?: [...], available_hz?: [...]}. Unparsable numbers are
    left out (unknown), never guessed."""
    rec: Dict[str, Any] = {"name": name}
    for attr, key in (("cur_freq", "cur_hz"), ("min_freq", "min_hz"), ("max_freq", "max_hz"),
                      ("target_freq", "target_hz")):
        v = parse_int(attrs.get(attr))
        if v is not None and v >= 0:
            rec[key] = v
    gov = (attrs.get("governor") or "").strip()
    if gov:
        rec["governor"] = gov
    govs = (attrs.get("available_governors") or "").split()
    if govs:
        rec["available_governors"] = govs
    freqs = parse_hz_list(attrs.get("available_frequencies"))
    if freqs:
        rec["available_hz"] = freqs
    return rec
