"""The shipped unit: Type=notify with a watchdog, and hardened to exposure <= 3.0."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import REPO

UNIT = REPO / "systemd" / "npu-doctor.service"


def directives(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def test_unit_is_notify_with_watchdog_and_reload():
    d = directives(UNIT.read_text())
    assert d["Type"] == ["notify"]
    assert d["NotifyAccess"] == ["main"]
    assert d["WatchdogSec"] and d["Restart"] == ["on-failure"]
    assert "npu-doctor watch" in d["ExecStart"][0]
    assert "-HUP" in d["ExecReload"][0]
    # what would break the doctor (research/ecosystem.md section 3) stays off
    for forbidden in ("PrivateDevices", "ProtectKernelModules", "ProtectKernelLogs", "ProtectProc"):
        assert forbidden not in d, forbidden


def test_exposure_is_at_most_3_0():
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed (.ci/run installs it)")
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=30", str(UNIT)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-800:] + out.stderr[-800:]
    level = [ln for ln in out.stdout.splitlines() if "Overall exposure level" in ln]
    assert level, out.stdout[-500:]
    assert float(level[0].split(":")[-1].split()[0]) <= 3.0
