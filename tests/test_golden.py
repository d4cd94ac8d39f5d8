"""Golden reports: each real board case in ../shared/cases replays to the findings (id,
severity, subject) and contract facts kept in tests/golden/<case>.json.

A change in what a case reports shows up as a diff of its golden file, to be reviewed like
code. Rewrite them after an intended change with `pytest tests/test_golden.py --update-golden`
(or NPU_DOCTOR_UPDATE_GOLDEN=1). Volatile fields (durations, the snapshot's path, probe
timings) are not kept.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest

from conftest import CASES, GOLDEN, case_path, check_json, update_golden

#: Contract facts (docs/architecture.md, "Contract: check --format json") kept per case.
SCALARS = ["os.id", "os.version_id", "os.pretty_name", "kernel.release", "arch", "libc.name",
           "libc.version", "cpu.count", "cpu.model", "cpu.load_percent", "user.uid", "user.groups",
           "limits.memlock_bytes", "fallback.ops", "fallback.count"]
VERSIONED = {"drivers": ("version", "cuda_version"), "sdks": ("version",), "frameworks": ("version",)}
ACCELERATOR_KEYS = ["vendor", "name", "index", "pci_address", "driver.name", "driver.version",
                    "firmware.version", "temperature_c", "utilization_percent", "power_w",
                    "power.control", "power.runtime_status", "freq.cur_hz", "freq.max_hz",
                    "freq.governor", "health", "sysfs", "dev"]
LIBRARY_KEYS = ["path", "soname", "missing", "unsatisfied"]

NAMES = sorted(p.name for p in CASES.iterdir() if (p / "case.toml").is_file()) if CASES.is_dir() else []


def _get(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def summary(report: Dict[str, Any]) -> Dict[str, Any]:
    """What a golden file keeps of a report: findings (id, severity, subject) in report order
    and the contract facts present, flattened to `path: value` (absent ones left out)."""
    facts = report["facts"]
    kept: Dict[str, Any] = {}
    for path in SCALARS:
        v = _get(facts, path)
        if v is not None:
            kept[path] = v
    for top, keys in VERSIONED.items():
        for name, node in sorted((facts.get(top) or {}).items()):
            for key in keys:
                v = node.get(key) if isinstance(node, dict) else None
                if v is not None:
                    kept[f"{top}.{name}.{key}"] = v
    for listname, keys in (("accelerators", ACCELERATOR_KEYS), ("libraries", LIBRARY_KEYS)):
        for i, item in enumerate(facts.get(listname) or []):
            for key in keys:
                v = _get(item, key)
                if v not in (None, [], {}):
                    kept[f"{listname}[{i}].{key}"] = v
    findings: List[Dict[str, Any]] = [
        {"id": f["id"], "severity": f["severity"], "subject": f.get("subject")}
        for f in report["findings"]]
    return {"findings": findings, "facts": kept}


def _write_atomically(path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(str(tmp), str(path))


@pytest.mark.parametrize("name", NAMES or ["(no cases)"])
def test_case_matches_its_golden_report(name, request):
    case = case_path(name if NAMES else "(no cases)")  # skips, or fails under CI=true
    got = summary(check_json(case))
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if update_golden(request.config):
        GOLDEN.mkdir(exist_ok=True)
        _write_atomically(path, text)
        return
    assert path.is_file(), f"no golden report {path.name}: run pytest with --update-golden and review it"
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got["findings"] == want["findings"], f"findings of {name} changed (see {path})"
    changed = {k: (want["facts"].get(k), got["facts"].get(k))
               for k in set(want["facts"]) | set(got["facts"])
               if want["facts"].get(k) != got["facts"].get(k)}
    assert not changed, f"contract facts of {name} changed (golden, now): {changed}"


def test_golden_files_belong_to_cases():
    """A golden report whose case is gone is stale (renamed or removed case)."""
    if not NAMES:
        case_path("(no cases)")
    stale = sorted(p.stem for p in GOLDEN.glob("*.json")) if GOLDEN.is_dir() else []
    assert [s for s in stale if s not in NAMES] == []
