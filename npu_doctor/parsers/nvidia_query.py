"""`nvidia-smi --query-gpu=FIELDS --format=csv,nounits`: the GPU attributes that change at run
time, one CSV line per GPU, for `watch`'s sampling path (npu_doctor.watch.nvidia_sampling).

Reading the full `nvidia-smi -q` report every second costs a parse of ~250 lines per GPU;
this query asks NVML for a dozen values instead. The records it gives are partial
accelerator records with the same keys, units and reason names as parsers.nvidia's, so a
sample refreshed from it equals what `-q` would have said.

Format (nvidia-smi(1), `--help-query-gpu`): a header line naming the fields in the order
asked, with the unit in brackets even under `nounits` (`utilization.gpu [%]`), then one line
per GPU, cells separated by ", " and never quoted. A value the GPU does not have is
`[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`, `[Insufficient Permissions]`,
`[GPU is lost]` or `[Requested functionality has been deprecated]`: all read as unknown.
A field name the driver does not know fails the whole query (exit 2) with
`Field "X" is not a valid field to query.`

Field names: `clocks_throttle_reasons.*` (every driver with --query-gpu) were renamed
`clocks_event_reasons.*` in R535; R535 ... R610 accept both. `temperature.memory` (HBM) and
`temperature.gpu.tlimit` (the T.Limit margin, R565+) exist only on newer drivers, so they are
asked only of GPUs whose `-q` report shows them (see `fields_for`).

Real outputs (tests/data/nvidia, sources in SOURCES.md): H100 80GB HBM3 and H100 in MIG mode
on 590.48.01, L40S on 595.80, RTX 2080 SUPER on 595.71.05, RTX 2080 Ti on 442.19.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..lazyregex import lazy
from ..registry import parser
from .nvidia import PCIE_GEN_GTS, _thermal_limit, pci_address
from .nvidia_clocks import THERMAL_REASONS, power_reasons

#: Asked of every GPU: valid on every driver that has --query-gpu (R3xx on).
BASE_FIELDS = ("index", "pci.bus_id", "temperature.gpu", "utilization.gpu", "utilization.memory",
               "power.draw", "clocks.current.graphics", "pstate", "clocks_throttle_reasons.active",
               "pcie.link.gen.current", "pcie.link.width.current")
#: Asked only when the `-q` report has the fact: field -> thermal key it refreshes.
OPTIONAL_FIELDS = {"temperature.memory": "memory_c", "temperature.gpu.tlimit": "margin_c"}
#: A field a driver refuses -> the name to ask instead (R535 renamed the reasons).
RENAMED = {"clocks_throttle_reasons.active": "clocks_event_reasons.active"}

#: nvmlClocksEventReasons bits -> the names `nvidia-smi -q` prints, in its order
#: (nvml.h; "Clocks Event Reasons" / "Clocks Throttle Reasons" section).
REASON_BITS = ((0x1, "Idle"), (0x2, "Applications Clocks Setting"), (0x4, "SW Power Cap"),
               (0x8, "HW Slowdown"), (0x40, "HW Thermal Slowdown"),
               (0x80, "HW Power Brake Slowdown"), (0x10, "Sync Boost"),
               (0x20, "SW Thermal Slowdown"), (0x100, "Display Clock Setting"),
               (0x8000000000000000, "Unknown"))

#: Keys of an accelerator record that a query row refreshes (the rest is the inventory's);
#: a key the row leaves out is unknown now and is dropped, as `-q` would drop it.
REFRESHED = ("temperature_c", "utilization_percent", "memory_utilization_percent", "power_w",
             "freq.cur_hz", "performance_state", "clocks_event_reasons",
             "thermal_throttle_reasons", "power_throttle_reasons", "pcie.cur_gen", "pcie.cur_speed_gts", "pcie.cur_width")

#: The per-reason fields ("Active"/"Not Active"; nvidia-smi --help-query-gpu,
#: `clocks_throttle_reasons.<name>`, `clocks_event_reasons.<name>` from R535) -> `-q` names: a
#: query that asks for them but not for `.active` (what reports paste) still gives the reasons.
REASON_FIELDS = {"gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting",
                 "sw_power_cap": "SW Power Cap", "hw_slowdown": "HW Slowdown",
                 "hw_thermal_slowdown": "HW Thermal Slowdown",
                 "hw_power_brake_slowdown": "HW Power Brake Slowdown", "sync_boost": "Sync Boost",
                 "sw_thermal_slowdown": "SW Thermal Slowdown",
                 "display_clock_setting": "Display Clock Setting"}

_INVALID_RE = lazy(r'Field "([^"]+)" is not a valid field to query')
_FIELD_RE = lazy(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_UNIT_RE = lazy(r"\s*\[[^\]]*\]$")
_NUM_RE = lazy(r"^(-?\d+(?:\.\d+)?)(?:\s*(?:%|W|MHz|C|MiB|us|ms))?$")
_UNKNOWN = ("N/A", "")


def query_argv(fields: Sequence[str]) -> List[str]:
    """The argv that asks for `fields`: `nvidia-smi --query-gpu=a,b --format=csv,nounits`."""
    return ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,nounits"]


def fields_for(records: Iterable[Dict[str, Any]]) -> List[str]:
    """The fields to ask of GPUs whose `-q` records are `records`: BASE_FIELDS, plus each
    optional field that some record has a value for."""
    fields = list(BASE_FIELDS)
    for field, key in OPTIONAL_FIELDS.items():
        if any(isinstance(r.get("thermal"), dict) and key in r["thermal"] for r in records):
            fields.append(field)
    return fields


def invalid_field(text: str) -> Optional[str]:
    """The field nvidia-smi refused (`Field "X" is not a valid field to query.`), else None."""
    m = _INVALID_RE.search(text)
    return m.group(1) if m else None


def _cell(s: str) -> Optional[str]:
    s = s.strip()
    if s in _UNKNOWN or (s.startswith("[") and s.endswith("]")):
        return None
    return s


def query_rows(text: str) -> List[Dict[str, Optional[str]]]:
    """The CSV (header first) -> one dict per GPU, field name (unit dropped) -> cell, None
    for an unknown value. Raises ValueError for text that is not such a CSV: no header, a
    line whose cell count differs from the header's, a refused field."""
    bad = invalid_field(text)
    if bad:
        raise ValueError(f'nvidia-smi refused the field "{bad}"')
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("empty output")
    names = [_UNIT_RE.sub("", h.strip()) for h in lines[0].split(", ")]
    if not all(_FIELD_RE.match(n) for n in names):
        raise ValueError("the first line is not a header of field names "
                         "(is this `--query-gpu ... --format=csv` output?)")
    rows = []
    for n, ln in enumerate(lines[1:], 2):
        cells = ln.split(", ")
        if len(cells) != len(names):
            raise ValueError(f"line {n}: {len(cells)} cells for {len(names)} fields")
        rows.append({k: _cell(v) for k, v in zip(names, cells)})
    return rows


def _num(v: Optional[str]) -> Optional[float]:
    m = _NUM_RE.match(v) if v else None
    if not m:
        return None
    n = float(m.group(1))
    return int(n) if "." not in m.group(1) else n


def _reasons(v: Optional[str]) -> Optional[List[str]]:
    if not v:
        return None
    try:
        mask = int(v, 16)
    except ValueError:
        return None
    return [name for bit, name in REASON_BITS if mask & bit]


def sample_record(row: Dict[str, Optional[str]]) -> Dict[str, Any]:
    """One query row -> a partial accelerator record in parsers.nvidia's shapes and units:
    pci_address, index, temperature_c (°C), utilization_percent, memory_utilization_percent,
    power_w (W), freq.cur_hz (Hz), performance_state ("P0"), clocks_event_reasons and
    thermal_throttle_reasons (names as `-q` prints them), pcie.{cur_gen, cur_speed_gts,
    cur_width}, thermal.{memory_c, margin_c}. Unknown values are left out."""
    rec: Dict[str, Any] = {"vendor": "nvidia"}
    addr = pci_address(row.get("pci.bus_id") or row.get("gpu_bus_id") or "")
    if addr:
        rec["pci_address"] = addr
    idx = _num(row.get("index"))
    if isinstance(idx, int):
        rec["index"] = idx
    for field, key in (("temperature.gpu", "temperature_c"), ("utilization.gpu", "utilization_percent"),
                       ("utilization.memory", "memory_utilization_percent"), ("power.draw", "power_w")):
        v = _num(row.get(field))
        if v is not None:
            rec[key] = v
    mhz = _num(row.get("clocks.current.graphics") or row.get("clocks.gr"))
    if mhz is not None:
        rec["freq"] = {"cur_hz": int(mhz * 1_000_000)}
    if row.get("pstate"):
        rec["performance_state"] = row["pstate"]
    active = _reasons(row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active"))
    if active is None:
        flags = {name: row.get(f"clocks_event_reasons.{f}") or row.get(f"clocks_throttle_reasons.{f}")
                 for f, name in REASON_FIELDS.items()}
        if any(v is not None for v in flags.values()):
            active = [n for n, v in flags.items() if v is not None and v.strip().lower() == "active"]
    if active is not None:
        rec["clocks_event_reasons"] = active
        rec["thermal_throttle_reasons"] = [r for r in active if r in THERMAL_REASONS]
        rec["power_throttle_reasons"] = power_reasons(active)
    pcie: Dict[str, Any] = {}
    gen, width = _num(row.get("pcie.link.gen.current")), _num(row.get("pcie.link.width.current"))
    if isinstance(gen, int):
        pcie["cur_gen"] = gen
        if gen in PCIE_GEN_GTS:
            pcie["cur_speed_gts"] = PCIE_GEN_GTS[gen]
    if isinstance(width, int):
        pcie["cur_width"] = width
    if pcie:
        rec["pcie"] = pcie
    thermal = {key: _num(row.get(field)) for field, key in OPTIONAL_FIELDS.items()}
    thermal = {k: v for k, v in thermal.items() if v is not None}
    if thermal:
        rec["thermal"] = thermal
    return rec


#: Derived thermal values parsers.nvidia computes from the readings (recomputed on refresh).
_DERIVED_THERMAL = ("limit_c", "limit", "headroom_c", "max_operating_below_slowdown_c", "memory_headroom_c")


def refresh_record(inv: Dict[str, Any], sample: Dict[str, Any], fields: Sequence[str]) -> Dict[str, Any]:
    """The `-q` record `inv` with the changing values of `sample` (sample_record) put in:
    every REFRESHED key and each asked optional thermal reading taken from the sample (absent
    there: dropped), the thermal limit and headroom computed again as parsers.nvidia does.
    `inv` is not changed; sub-dicts that change are copies."""
    rec = dict(inv)
    for key in REFRESHED:
        group, _, leaf = key.partition(".")
        if leaf:
            node = dict(rec.get(group) or {})
            if leaf in (sample.get(group) or {}):
                node[leaf] = sample[group][leaf]
            else:
                node.pop(leaf, None)
            if node:
                rec[group] = node
            else:
                rec.pop(group, None)
        elif key in sample:
            rec[key] = sample[key]
        else:
            rec.pop(key, None)
    thermal = {k: v for k, v in (inv.get("thermal") or {}).items() if k not in _DERIVED_THERMAL}
    for field, key in OPTIONAL_FIELDS.items():
        if field in fields:
            thermal.pop(key, None)
            if key in (sample.get("thermal") or {}):
                thermal[key] = sample["thermal"][key]
    _thermal_limit(rec, thermal)
    if "memory_c" in thermal and "memory_max_operating_c" in thermal:
        thermal["memory_headroom_c"] = thermal["memory_max_operating_c"] - thermal["memory_c"]
    if thermal:
        rec["thermal"] = thermal
    else:
        rec.pop("thermal", None)
    return rec


@parser("nvidia_query_gpu")
def parse_nvidia_query_gpu(text: str) -> Dict[str, Any]:
    """`nvidia-smi --query-gpu=... --format=csv[,nounits]` -> {gpus: [sample_record, ...]}.
    Raises ValueError for text that is not such a CSV (see query_rows)."""
    return {"gpus": [sample_record(r) for r in query_rows(text)]}


__all__ = ["BASE_FIELDS", "REASON_FIELDS", "OPTIONAL_FIELDS", "REFRESHED", "query_argv", "fields_for", "invalid_field",
           "query_rows", "sample_record", "refresh_record", "parse_nvidia_query_gpu"]
