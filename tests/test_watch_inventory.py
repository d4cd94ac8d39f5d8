"""The daemon finds what appears after it started (issue 11): thermal zones registered late
and an accelerator whose driver binds late are picked up by the slow re-inventory (and on udev
events on a live host), without a SIGHUP. A snapshot directory is read afresh at every access,
so the test changes it while `watch --snapshot DIR` runs."""

from __future__ import annotations

import shutil

import pytest

from conftest import case_path
from test_watch import Daemon

pytestmark = pytest.mark.cases


def test_thermal_zones_that_register_after_start_raise_throttling_start(tmp_path):
    snap = tmp_path / "board"
    shutil.copytree(case_path("k02-rk3588-soc-thermal-throttling"), snap, symlinks=True)
    zones = snap / "fs/sys/class/thermal"
    away = tmp_path / "thermal"
    shutil.move(str(zones), str(away))            # booted before the thermal driver
    d = Daemon(snap, "--interval", "0.2", "--check-interval", "3600", "--inventory-interval", "1")
    try:
        d.wait_note("READY=1")
        early = d.drain_events(1.5)               # a few samples, then a re-inventory, of nothing
        assert not [e for e in early if e["event"] == "throttling-start"], early
        shutil.move(str(away), str(zones))        # the zones register
        ev = d.wait_event("throttling-start", timeout=10)
        assert ev["severity"] in ("warning", "error")
    finally:
        d.close()


def test_accelerator_bound_after_start_is_device_added(tmp_path):
    snap = tmp_path / "laptop"
    shutil.copytree(case_path("k06-intel-npu-user-not-in-render"), snap, symlinks=True)
    fs = snap / "fs"
    parts = [fs / "sys/devices/pci0000:00", fs / "sys/class/accel/accel0",
             fs / "sys/bus/pci/devices/0000:00:0b.0"]
    away = tmp_path / "away"
    away.mkdir()
    for i, p in enumerate(parts):                 # not there yet when the daemon starts
        shutil.move(str(p), str(away / str(i)))
    d = Daemon(snap, "--interval", "0.2", "--check-interval", "3600", "--inventory-interval", "1")
    try:
        d.wait_note("READY=1")
        d.drain_events(1.5)
        for i, p in enumerate(parts):
            shutil.move(str(away / str(i)), str(p))
        ev = d.wait_event("device-added", timeout=10)
        assert "0000:00:0b.0" in ev["subject"]
    finally:
        d.close()
