"""Shared test helpers: where the real board cases are, and how to run the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CASES = Path(os.environ.get("NPU_DOCTOR_CASES", REPO.parent / "shared" / "cases"))


def case_path(name: str) -> Path:
    """Folder of a real board case under ../shared/cases (skips if the cases are absent)."""
    matches = sorted(CASES.glob(name + "*")) if CASES.is_dir() else []
    if not matches:
        pytest.skip(f"case {name} not available under {CASES}")
    return matches[0]


def copy_case(name: str, dest: Path) -> Path:
    """A writable copy of a real case at `dest` (the shared cases are read-only), symlinks kept."""
    shutil.copytree(str(case_path(name)), str(dest), symlinks=True)
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    os.chmod(dest, 0o755)
    return dest


def run_cli(*args: str, env: dict = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run `python -m npu_doctor ARGS` and capture its output (text)."""
    e = dict(os.environ)
    e.pop("NPU_DOCTOR_PROGRESS", None)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "npu_doctor", *args], capture_output=True,
                          text=True, timeout=timeout, env=e, cwd=str(REPO))


def check_json(snapshot, *extra: str) -> dict:
    """The JSON report of `check --snapshot SNAPSHOT` (exit status must be 0 or 1)."""
    proc = run_cli("check", "--snapshot", str(snapshot), "--format", "json", "--fail-on", "never", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def finding_ids(report: dict) -> set:
    return {f["id"] for f in report["findings"]}


def fact_values(tree, path: str) -> list:
    """Every value at a dotted path; '*' fans out over list elements (as case-check does)."""
    nodes = [tree]
    for part in path.split("."):
        nxt = []
        for node in nodes:
            if part == "*" and isinstance(node, list):
                nxt.extend(node)
            elif isinstance(node, dict) and part in node:
                nxt.append(node[part])
        nodes = nxt
    return nodes
