"""watch's NVIDIA sampling path: between full `nvidia-smi -q` runs, one `--query-gpu` per
sample refreshes the GPUs it knows, the facts equal the full probe's, and every way the query
can fail (absent from the snapshot, refused field, a GPU gone) falls back to the full probe.

Snapshots: benchmarks/gpu_snapshot.py (the real V100 418.67 `-q`, and a `--query-gpu` answer
with the same values)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
from pathlib import Path

from npu_doctor.check import Config
from npu_doctor.host import open_host
from npu_doctor.tomlcompat import tomllib
from npu_doctor.watch import metrics
from npu_doctor.watch.daemon import Watcher

REPO = Path(__file__).resolve().parent.parent
Q = ["nvidia-smi", "-q"]


def _snapshot(tmp_path, n, query=True):
    spec = importlib.util.spec_from_file_location("gpu_snapshot", REPO / "benchmarks" / "gpu_snapshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.build(tmp_path / "snap", n, query=query)


def _watcher(snap):
    w = Watcher(open_host(snapshot=str(snap)), Config.load(), 1.0, 3600, out=io.StringIO(),
                use_udev=False, log_format="json")
    calls = []
    real = w.host.run

    def run(argv, timeout=10.0):
        calls.append(list(argv))
        return real(argv, timeout)

    w.host.run = run  # type: ignore[method-assign]
    return w, calls


def _commands(snap):
    return tomllib.loads((snap / "commands.toml").read_text())["command"]


def _write_commands(snap, cmds):
    def lit(s):
        return "'''\n" + s + "'''"
    parts = []
    for c in cmds:
        parts.append(f"[[command]]\nargv = {json.dumps(c['argv'])}\nreturncode = {c.get('returncode', 0)}\n"
                     f"stdout = {lit(c.get('stdout', ''))}\nstderr = {lit(c.get('stderr', ''))}\n")
    p = snap / "commands.toml"
    p.write_text("\n".join(parts))
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the snapshot re-reads on mtime


def _gpus(w):
    return [a for a in w.tracker.last_facts.get("accelerators") if a.get("vendor") == "nvidia"]


def test_query_between_full_runs_gives_the_full_probes_facts(tmp_path):
    snap = _snapshot(tmp_path, 2)
    w, calls = _watcher(snap)
    w.run_once()
    assert Q in calls and w.nvidia.result is not None
    full = w.tracker.last_facts
    calls.clear()
    w.run_once()
    assert Q not in calls and [c[1].split("=")[0] for c in calls] == ["--query-gpu"]
    assert w.tracker.last_facts.data == full.data
    src = w.tracker.last_facts.sources
    assert src["accelerators[0].temperature_c"].startswith("$ nvidia-smi --query-gpu=index,pci.bus_id,")
    assert src["accelerators[0].uuid"] == "$ nvidia-smi -q"
    # a udev event (or the inventory interval) brings the full report back for one sample
    w._hotplug = True
    calls.clear()
    w.run_once()
    assert Q in calls


def test_query_values_reach_facts_and_metrics(tmp_path):
    snap = _snapshot(tmp_path, 2)
    w, _calls = _watcher(snap)
    w.run_once()
    cmds = _commands(snap)
    query = next(c for c in cmds if c["argv"] != Q)
    head, gpu0, gpu1 = query["stdout"].strip().splitlines()
    # GPU 1 hot and held down: 88 C, HW Slowdown + HW Thermal Slowdown (0x48), 1380 MHz, 250.5 W
    cells = gpu1.split(", ")
    names = head.split(", ")
    for field, value in (("temperature.gpu", "88"), ("clocks_throttle_reasons.active", "0x0000000000000048"),
                         ("clocks.current.graphics [MHz]", "1380"), ("power.draw [W]", "250.50"),
                         ("utilization.gpu [%]", "[Not Supported]")):
        cells[names.index(field)] = value
    query["stdout"] = "\n".join([head, gpu0, ", ".join(cells)]) + "\n"
    _write_commands(snap, cmds)
    w.run_once()
    g = {a["pci_address"]: a for a in _gpus(w)}["0000:28:00.0"]
    assert g["temperature_c"] == 88 and g["power_w"] == 250.5 and g["freq"]["cur_hz"] == 1_380_000_000
    assert g["clocks_event_reasons"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert g["thermal_throttle_reasons"] == ["HW Thermal Slowdown"]
    assert "utilization_percent" not in g
    assert g["thermal"]["headroom_c"] == 83 - 88  # the V100's Max Operating Temp, from -q
    text = metrics.render(metrics.families(w.tracker, 0.0)).decode()
    assert any(ln.startswith("npu_doctor_accelerator_temperature_celsius{") and "28:00.0" in ln
               and ln.endswith(" 88.0") for ln in text.splitlines())


def test_no_query_in_snapshot_falls_back_to_the_full_probe(tmp_path):
    snap = _snapshot(tmp_path, 2, query=False)
    w, calls = _watcher(snap)
    w.run_once()
    first = w.tracker.last_facts.data
    for _ in range(2):
        calls.clear()
        w.run_once()
        assert Q in calls  # every sample: the argv is not in commands.toml
    assert w.tracker.last_facts.data == first


def test_refused_field_is_dropped_and_the_query_asked_again(tmp_path):
    snap = _snapshot(tmp_path, 2)
    w, calls = _watcher(snap)
    cmds = _commands(snap)
    query = next(c for c in cmds if c["argv"] != Q)
    assert query["argv"][1].endswith(",temperature.memory")
    # an old driver without temperature.memory: that argv fails, the shorter one answers
    old = dict(query, returncode=2, stdout="", stderr='Field "temperature.memory" is not a valid field to query.\n\n')
    head, *rows = query["stdout"].strip().splitlines()
    short = dict(argv=[query["argv"][0], query["argv"][1][:-len(",temperature.memory")], query["argv"][2]],
                 stdout="\n".join([head.rsplit(", ", 1)[0]] + [r.rsplit(", ", 1)[0] for r in rows]) + "\n")
    _write_commands(snap, [c for c in cmds if c["argv"] == Q] + [old, short])
    w.run_once()
    full = w.tracker.last_facts.data
    calls.clear()
    w.run_once()
    assert calls == [old["argv"], short["argv"]]
    assert "temperature.memory" not in w.nvidia.fields
    assert w.tracker.last_facts.data == full  # memory_c kept from -q
    calls.clear()
    w.run_once()
    assert calls == [short["argv"]]  # refused once, not asked again


def test_gpu_gone_from_query_runs_the_full_probe(tmp_path):
    snap = _snapshot(tmp_path, 2)
    w, calls = _watcher(snap)
    w.run_once()
    cmds = _commands(snap)
    query = next(c for c in cmds if c["argv"] != Q)
    query["stdout"] = "\n".join(query["stdout"].strip().splitlines()[:2]) + "\n"  # GPU 1 missing
    _write_commands(snap, cmds)
    calls.clear()
    w.run_once()
    assert Q in calls  # the full report decides what is there
    assert len(_gpus(w)) == 2
