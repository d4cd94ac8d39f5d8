"""watch's sampling path: between re-inventories only the changing sysfs attributes of known
devices are read again, and their transitions still become events."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

from npu_doctor.check import Config
from npu_doctor.collectors import accelerators as accel_mod
from npu_doctor.host import open_host
from npu_doctor.watch.daemon import Watcher

REPO = Path(__file__).resolve().parent.parent


def _gpu_snapshot(tmp_path, n):
    spec = importlib.util.spec_from_file_location("gpu_snapshot", REPO / "benchmarks" / "gpu_snapshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.build(tmp_path / "snap", n)


def test_inventory_reused_and_runtime_pm_still_sampled(tmp_path, monkeypatch):
    snap = _gpu_snapshot(tmp_path, 2)
    out = io.StringIO()
    w = Watcher(open_host(snapshot=str(snap)), Config.load(), 1.0, 3600, out=out, use_udev=False,
                log_format="json")
    w.run_once()
    assert w.inventory.refreshable
    scans = []
    real = accel_mod.scan_pci
    monkeypatch.setattr(accel_mod, "scan_pci", lambda inv: scans.append(1) or real(inv))
    status = snap / "fs/sys/bus/pci/devices/0000:18:00.0/power/runtime_status"
    status.write_text("suspended\n")
    w.run_once()
    assert scans == []  # no sysfs walk between re-inventories
    assert '"runtime-suspend"' in out.getvalue()
    w.inventory.invalidate()  # what a udev event does
    w.run_once()
    assert scans == [1]
