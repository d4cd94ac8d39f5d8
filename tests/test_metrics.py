"""Prometheus metrics of `watch`, checked by the real tools: promtool accepts the textfile,
Debian's node_exporter serves our series from its textfile collector, `--listen` serves
/metrics; names, types and units per the Prometheus conventions."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import REPO
from test_watch import Daemon, board, write, zone_temp_file  # noqa: F401  (board: fixture)

pytest.importorskip("prometheus_client")

from npu_doctor.watch import metrics  # noqa: E402
from npu_doctor.facts import Facts  # noqa: E402
from npu_doctor.probes import ProbeResult  # noqa: E402
from npu_doctor.watch import Tracker  # noqa: E402

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


class _F:
    def __init__(self, id, severity, subject):
        self.id, self.severity, self.subject, self.message = id, severity, subject, "m"


def sample_tracker():
    """A throttling zone (episode in progress since t=100), a suspended NPU (since t=110),
    one finding, one failed probe."""
    tr = Tracker()

    def facts(temp, status):
        f = Facts()
        f.set("thermal.zones", [{"zone": "thermal_zone0", "type": "npu-thermal", "temp_c": temp,
                                 "passive_trip_c": 85.0,
                                 "trips": [{"type": "passive", "temp_c": 85.0, "hyst_c": 2.0}]}])
        f.set("accelerators", [{"vendor": "rknpu", "name": "RK3588 NPU", "sysfs": "/sys/devices/platform/fdab0000.npu",
                                "temperature_c": temp, "utilization_percent": 37.0, "power_w": 2.5,
                                "freq": {"cur_hz": 300000000, "max_hz": 1000000000},
                                "power": {"control": "auto", "runtime_status": status}}])
        f.set("devfreq.devices", [{"name": "fdab0000.npu", "governor": "powersave", "cur_hz": 300000000,
                                   "max_hz": 1000000000}])
        f.set("cpu.busy_percent", 62.0)
        return f

    tr.sample(facts(60.0, "active"), [ProbeResult(id="thermal", status="ok")], 90.0)
    tr.sample(facts(88.0, "active"), [ProbeResult(id="thermal", status="ok")], 100.0)
    tr.sample(facts(88.0, "suspended"), [ProbeResult(id="thermal", status="ok"),
                                         ProbeResult(id="vendor-tool", status="error", error="x")], 110.0)
    tr.check([_F("runtime-autosuspend", "warning", "RK3588 NPU fdab0000.npu")])
    tr.check_ok = True
    return tr


def parse(text):
    """{name: {frozenset(labels): value}}, and {name: type} from # TYPE."""
    from prometheus_client.parser import text_string_to_metric_families

    values, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            values.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return values, types


def test_names_types_units_and_the_episode_in_progress():
    text = metrics.render(metrics.families(sample_tracker(), now=130.0)).decode()
    values, types = parse(text)
    zone = frozenset({"zone": "thermal_zone0", "type": "npu-thermal"}.items())
    acc = frozenset({"vendor": "rknpu", "model": "RK3588 NPU", "device": "fdab0000.npu"}.items())
    # counters end in _total and count the episode still running (30 s throttling, 20 s suspended)
    assert types["npu_doctor_thermal_zone_throttling_seconds"] == "counter"
    assert values["npu_doctor_thermal_zone_throttling_seconds_total"][zone] == 30.0
    assert values["npu_doctor_thermal_zone_throttling_episodes_total"][zone] == 1
    assert values["npu_doctor_accelerator_runtime_suspended_seconds_total"][acc] == 20.0
    assert values["npu_doctor_accelerator_runtime_suspends_total"][acc] == 1
    assert values["npu_doctor_thermal_zone_temperature_celsius"][zone] == 88.0
    assert values["npu_doctor_accelerator_utilization_ratio"][acc] == pytest.approx(0.37)
    assert values["npu_doctor_accelerator_clock_hertz"][acc] == 3e8
    assert values["npu_doctor_accelerator_power_watts"][acc] == 2.5
    assert values["npu_doctor_cpu_busy_ratio"][frozenset()] == pytest.approx(0.62)
    assert values["npu_doctor_devfreq_clock_hertz"][frozenset({"device": "fdab0000.npu", "governor": "powersave"}.items())] == 3e8
    assert values["npu_doctor_finding"] == {frozenset({"id": "runtime-autosuspend", "severity": "warning",
                                                       "subject": "RK3588 NPU fdab0000.npu"}.items()): 1}
    assert values["npu_doctor_check_success"][frozenset()] == 1
    assert values["npu_doctor_probe_success"][frozenset({"probe": "vendor-tool"}.items())] == 0
    assert values["npu_doctor_probe_success"][frozenset({"probe": "thermal"}.items())] == 1
    for name, typ in types.items():
        assert name.startswith("npu_doctor_")
        assert "percent" not in name   # ratios 0-1, never percent
        if typ == "counter":
            assert name.endswith(("_episodes", "_seconds", "_suspends")), name


def test_textfile_is_world_readable_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        path = metrics.write_textfile(str(tmp_path), sample_tracker(), now=130.0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert os.listdir(tmp_path) == ["npu_doctor.prom"]   # no temporary file left behind


def test_promtool_accepts_the_textfile(tmp_path):
    if PROMTOOL is None:
        pytest.skip("promtool not installed (.ci/run: apt-get install prometheus)")
    path = metrics.write_textfile(str(tmp_path), sample_tracker(), now=130.0)
    with open(path, "rb") as f:
        res = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "" and res.stderr.strip() == "", res.stdout + res.stderr   # not even lint


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url, want, timeout=15.0):
    end, text = time.monotonic() + timeout, ""
    while time.monotonic() < end:
        try:
            text = urllib.request.urlopen(url, timeout=2).read().decode()
            if want in text:
                return text
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{want!r} not served at {url} within {timeout} s:\n{text[-1500:]}")


def test_real_node_exporter_serves_our_series(tmp_path, board):  # noqa: F811
    if NODE_EXPORTER is None:
        pytest.skip("prometheus-node-exporter not installed (.ci/run: apt-get install prometheus-node-exporter)")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    d = Daemon(board, "--interval", "0.2", "--check-interval", "3600", "--textfile-dir", str(textdir))
    port = free_port()
    ne = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                           "--collector.textfile", f"--collector.textfile.directory={textdir}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        d.wait_note("READY=1")
        text = scrape(f"http://127.0.0.1:{port}/metrics", "npu_doctor_thermal_zone_temperature_celsius{")
        values, _ = parse(text)
        assert values["node_textfile_scrape_error"][frozenset()] == 0
        assert any("npu_doctor.prom" in dict(k).get("file", "") for k in values["node_textfile_mtime_seconds"])
        assert "npu_doctor_info" in values and "npu_doctor_cpu_fallback_suspected" in values
    finally:
        ne.terminate()
        ne.wait(timeout=10)
        d.close()


def test_listen_serves_metrics(board):  # noqa: F811
    port = free_port()
    d = Daemon(board, "--interval", "0.2", "--check-interval", "3600", "--listen", f"127.0.0.1:{port}")
    try:
        d.wait_note("READY=1")
        write(zone_temp_file(board, "soc-thermal"), "90000\n")
        d.wait_event("throttling-start")
        scrape(f"http://127.0.0.1:{port}/metrics",
               'npu_doctor_thermal_zone_throttling{type="soc-thermal",zone="thermal_zone0"} 1.0')
    finally:
        d.close()


def watch_argv(board, *args):  # noqa: F811
    return [sys.executable, "-m", "npu_doctor", "watch", "--snapshot", str(board), *args]


def test_unwritable_textfile_dir_at_start_is_exit_2(board, tmp_path):  # noqa: F811
    if os.geteuid() == 0:
        target = "/sys/kernel"      # root may write anywhere a mode allows; sysfs refuses new files
    else:
        target = str(tmp_path / "ro")
        os.mkdir(target, 0o555)
    res = subprocess.run(watch_argv(board, "--textfile-dir", target), capture_output=True, text=True,
                         timeout=60, cwd=str(REPO))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "cannot write there" in res.stderr
    bad = subprocess.run(watch_argv(board, "--listen", "nonsense"), capture_output=True, text=True,
                         timeout=60, cwd=str(REPO))
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr


def test_textfile_failure_is_one_event_and_one_when_it_clears(board, tmp_path):  # noqa: F811
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    d = Daemon(board, "--interval", "0.1", "--check-interval", "3600", "--textfile-dir", str(textdir))
    try:
        d.wait_note("READY=1")
        textdir.rename(tmp_path / "gone")            # every write now fails (ENOENT)
        ev = d.wait_event("textfile-failed")
        assert ev["severity"] == "error" and ev["subject"].endswith("npu_doctor.prom")
        later = d.drain_events(1.0)                  # ~10 samples fail: no more events
        assert [e["event"] for e in later if e["event"].startswith("textfile")] == []
        (tmp_path / "gone").rename(textdir)
        d.wait_event("textfile-cleared")
        assert (textdir / "npu_doctor.prom").exists()
    finally:
        d.close()
