"""The wheel carries probes/ and rules/, and the installed tool finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from conftest import REPO


def test_wheel_contains_probe_specs_and_rules(tmp_path):
    pytest.importorskip("build")
    out = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                          str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "hatchling" in (out.stderr + out.stdout):
        # --no-isolation needs hatchling in this venv; fall back to an isolated build
        out = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path),
                              str(REPO)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next(tmp_path.glob("npu_doctor-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped_probes = {p.name for p in (REPO / "probes").glob("*.toml")}
    shipped_rules = {p.name for p in (REPO / "rules").glob("*.toml")}
    assert shipped_probes and shipped_rules
    assert {f"npu_doctor/probes/{n}" for n in shipped_probes} <= names
    assert {f"npu_doctor/rules/{n}" for n in shipped_rules} <= names
    # `npu-doctor service install` and the schemas read these from the installed package
    for data in ("deploy/systemd/npu-doctor.service.in", "deploy/systemd/70-npu-doctor-runtime-pm.rules",
                 "deploy/systemd/npu-doctor.env", "schema/report-v1.json", "schema/event-v1.json"):
        assert f"npu_doctor/{data}" in names, data
    # and an install of that wheel finds them through importlib.resources
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=300)
    res = subprocess.run([str(py), "-c", "from npu_doctor.resources import shipped_dir; print(shipped_dir('rules'))"],
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "site-packages" in res.stdout and res.stdout.strip().endswith("npu_doctor/rules")
