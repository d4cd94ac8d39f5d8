"""`nvidia-smi --query-gpu ... --format=csv,nounits` (parsers.nvidia_query): real outputs of
four GPUs on R590/R595 read into the same record `nvidia-smi -q` gives, unknown values
([N/A], N/A, [Unknown Error]), refused fields, and bad input.

Real outputs: tests/data/nvidia (sources in SOURCES.md); each `--query-gpu` was captured the
same minute as the `-q` next to it, so the readings that move (power, clocks) may differ.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.parsers.nvidia import parse_nvidia_smi_q
from npu_doctor.parsers.nvidia_query import (
    BASE_FIELDS,
    fields_for,
    invalid_field,
    parse_nvidia_query_gpu,
    query_argv,
    query_rows,
    refresh_record,
    sample_record,
)

DATA = Path(__file__).parent / "data" / "nvidia"


def _pair(name):
    q = parse_nvidia_smi_q((DATA / f"smi-q-{name}.txt").read_text())["gpus"]
    rows = query_rows((DATA / f"query-gpu-{name}.csv").read_text())
    return q, rows


def _diff(a, b):
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def test_h100_idle_query_refreshes_to_the_same_record_as_q():
    q, rows = _pair("590.48.01-h100-idle")
    assert len(rows) == 1 and len(rows[0]) == 212  # every field of the capture, units dropped
    fields = fields_for(q)
    assert fields == list(BASE_FIELDS) + ["temperature.memory", "temperature.gpu.tlimit"]
    s = sample_record(rows[0])
    assert s["pci_address"] == q[0]["pci_address"] == "0000:00:09.0"
    assert s["temperature_c"] == 41 and s["power_w"] == 69.85 and s["freq"] == {"cur_hz": 345_000_000}
    assert s["clocks_event_reasons"] == ["Idle"] and s["thermal_throttle_reasons"] == []
    assert s["thermal"] == {"memory_c": 48, "margin_c": 46}
    assert s["pcie"] == {"cur_gen": 5, "cur_speed_gts": 32.0, "cur_width": 16}
    # idle: nothing moved between the two commands, so the refreshed record is -q's, whole
    assert refresh_record(q[0], s, fields) == q[0]


@pytest.mark.parametrize("name, moved", [
    ("590.48.01-h100-mig-load", {"power_w", "thermal"}),          # memory 58 -> 59 C
    ("595.80-l40s-load", {"power_w"}),
    # Idle -> SW Power Cap between the two commands: the power reason list moves with it
    ("595.71.05-rtx2080super-idle", {"power_w", "freq", "clocks_event_reasons", "power_throttle_reasons"}),
])
def test_query_differs_from_q_only_in_readings_that_moved(name, moved):
    q, rows = _pair(name)
    fields = fields_for(q)
    r = refresh_record(q[0], sample_record(rows[0]), fields)
    assert _diff(q[0], r) == moved


def test_unknown_values_are_left_out():
    q, rows = _pair("590.48.01-h100-mig-load")
    s = sample_record(rows[0])
    assert rows[0]["utilization.gpu"] is None  # `[N/A]` in MIG mode
    assert "utilization_percent" not in s and "utilization_percent" not in q[0]
    q, rows = _pair("595.71.05-rtx2080super-idle")
    s = sample_record(rows[0])
    assert rows[0]["temperature.gpu.tlimit"] is None and rows[0]["temperature.memory"] is None  # [N/A], N/A
    assert "thermal" not in s
    assert fields_for(q) == list(BASE_FIELDS)  # -q shows neither: they are not asked
    assert s["clocks_event_reasons"] == ["SW Power Cap"] and s["power_w"] == 39.32


def test_nounits_header_keeps_units_and_unknown_error():
    rows = query_rows((DATA / "query-gpu-nounits-442.19-rtx2080ti.csv").read_text())
    assert rows == [{"name": "GeForce RTX 2080 Ti", "utilization.gpu": "100", "utilization.memory": "37",
                     "temperature.gpu": "56", "power.draw": "228.82", "power.limit": "210.00",
                     "fan.speed": "56", "clocks.current.graphics": "1560", "clocks.current.memory": "6800",
                     "power.default_limit": None}]
    s = parse_nvidia_query_gpu((DATA / "query-gpu-nounits-442.19-rtx2080ti.csv").read_text())["gpus"][0]
    assert s == {"vendor": "nvidia", "temperature_c": 56, "utilization_percent": 100,
                 "memory_utilization_percent": 37, "power_w": 228.82, "freq": {"cur_hz": 1_560_000_000}}


def test_reason_bitmask_names_and_thermal_reasons():
    row = {"pci.bus_id": "00000000:3B:00.0", "clocks_event_reasons.active": "0x0000000000000044"}
    s = sample_record(row)
    assert s["pci_address"] == "0000:3b:00.0"
    assert s["clocks_event_reasons"] == ["SW Power Cap", "HW Thermal Slowdown"]
    assert s["thermal_throttle_reasons"] == ["HW Thermal Slowdown"]
    assert sample_record({"clocks_throttle_reasons.active": "0x0000000000000000"})["clocks_event_reasons"] == []


def test_refused_field_is_named():
    # zabbix-nvidia-smi-multi-gpu#17
    msg = 'Field "clocks_throttle_reasons.unknown" is not a valid field to query.\n'
    assert invalid_field(msg) == "clocks_throttle_reasons.unknown"
    with pytest.raises(ValueError, match="refused the field"):
        query_rows(msg)


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    (DATA / "smi-q-590.48.01-h100-idle.txt").read_text(),      # a -q report
    "index, pci.bus_id\n0, 00000000:18:00.0, 38\n",              # a cell too many
    "0, 00000000:18:00.0\n",                                     # noheader
])
def test_not_a_query_csv_is_a_value_error(text):
    with pytest.raises(ValueError):
        query_rows(text)


def test_argv_and_q_parser_fixes_for_r580_plus():
    assert query_argv(["index", "pci.bus_id"]) == ["nvidia-smi", "--query-gpu=index,pci.bus_id",
                                                   "--format=csv,nounits"]
    # R580+ print "Utilization / GPU" (was "Gpu"), and "Average Power Draw : N/A" on GeForce
    assert parse_nvidia_smi_q((DATA / "smi-q-590.48.01-h100-idle.txt").read_text())["gpus"][0]["utilization_percent"] == 0
    assert parse_nvidia_smi_q((DATA / "smi-q-595.71.05-rtx2080super-idle.txt").read_text())["gpus"][0]["power_w"] == 37.62


# -- a --query-gpu CSV pasted into a log; the per-reason fields -------------------------------------
def test_per_reason_fields_give_the_reasons_without_active():
    # the real L40S query under load, narrowed to the columns a report would ask for
    text = (DATA / "query-gpu-595.80-l40s-load.csv").read_text()
    head, row = [ln.split(", ") for ln in text.splitlines()[:2]]
    keep = [i for i, h in enumerate(head) if h.startswith("clocks_event_reasons.") and h != "clocks_event_reasons.active"
            or h in ("pci.bus_id", "temperature.gpu")]
    narrow = "\n".join(", ".join(cells[i] for i in keep) for cells in (head, row))
    g = parse_nvidia_query_gpu(narrow)["gpus"][0]
    assert g["clocks_event_reasons"] == [] and g["power_throttle_reasons"] == [] and g["temperature_c"] == 54
    assert parse_nvidia_query_gpu(text)["gpus"][0]["clocks_event_reasons"] == []


def test_query_pasted_in_a_log_gives_the_gpu(tmp_path):
    from conftest import check_json, make_snapshot

    text = (DATA / "query-gpu-595.80-l40s-load.csv").read_text()
    rep = check_json(make_snapshot(tmp_path, logs={"q.log": "$ nvidia-smi --query-gpu=... --format=csv\n" + text}))
    nv = [a for a in rep["facts"]["accelerators"] if a["vendor"] == "nvidia"]
    assert len(nv) == 1 and nv[0]["pci_address"] == "0000:01:00.0" and nv[0]["temperature_c"] == 54
    assert nv[0]["clocks_event_reasons"] == []
    ids = {f["id"] for f in rep["findings"]}
    assert not {"thermal-throttling", "power-throttling"} & ids
