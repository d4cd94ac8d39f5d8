"""`npu-doctor watch` as systemd runs it: a subprocess, a notify socket, a snapshot that changes."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conftest import REPO, case_path


class Daemon:
    def __init__(self, snap, *args, watchdog_usec=400000):
        self.name = f"npu-doctor-test-{uuid.uuid4().hex[:12]}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name)
        self.sock.settimeout(0.1)
        env = dict(os.environ, NOTIFY_SOCKET="@" + self.name, WATCHDOG_USEC=str(watchdog_usec),
                   NO_COLOR="1")
        env.pop("WATCHDOG_PID", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "npu_doctor", "watch", "--snapshot", str(snap), "--log-format", "json",
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
        self.events: "queue.Queue[dict]" = queue.Queue()
        self.notes: "queue.Queue[tuple]" = queue.Queue()
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_sock, daemon=True).start()

    def _read_out(self):
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def _read_sock(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                if self.proc.poll() is not None:
                    return
                continue
            except OSError:
                return
            for line in data.decode().splitlines():
                self.notes.put((time.monotonic(), line))

    def wait_note(self, text, timeout=15.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                t, line = self.notes.get(timeout=0.1)
            except queue.Empty:
                continue
            if line == text:
                return t
        raise AssertionError(f"no {text} within {timeout} s")

    def wait_event(self, name, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ev = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if ev["event"] == name:
                return ev
        raise AssertionError(f"no {name} event within {timeout} s")

    def drain_events(self, seconds):
        end, out = time.monotonic() + seconds, []
        while time.monotonic() < end:
            try:
                out.append(self.events.get(timeout=0.05))
            except queue.Empty:
                pass
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.sock.close()


@pytest.fixture
def board(tmp_path):
    snap = tmp_path / "board"
    shutil.copytree(case_path("k05-rk3588-healthy"), snap, symlinks=True)
    return snap


def zone_temp_file(snap, zone_type):
    for zone in sorted((snap / "fs/sys/class/thermal").glob("thermal_zone*")):
        if (zone / "type").read_text().strip() == zone_type:
            return zone / "temp"
    raise AssertionError(zone_type)


def write(path, text):
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_watch_lifecycle_under_systemd_notify(board, tmp_path):
    rules = tmp_path / "site-rules"
    rules.mkdir()
    (rules / "site.toml").write_text(
        '[[rule]]\nid = "site-note"\nseverity = "info"\ntitle = "t"\nexplain = "e"\n'
        'when = [{fact = "os.id", eq = "never-this"}]\nmessage = "m"\n')
    d = Daemon(board, "--interval", "0.2", "--check-interval", "3600", "--rules", str(rules))
    try:
        d.wait_note("READY=1")
        pings = [d.wait_note("WATCHDOG=1", 2.0) for _ in range(3)]
        assert pings[-1] - pings[0] < 1.5

        soc = zone_temp_file(board, "soc-thermal")
        write(soc, "90000\n")  # above the 75 °C and 85 °C passive trips
        start = d.wait_event("throttling-start")
        assert start["subject"] == "soc-thermal" and start["severity"] == "warning"
        assert start["message"] == "90.0 °C >= passive trip 85.0 °C"  # the highest trip crossed
        more = d.drain_events(1.0)
        assert not [e for e in more if e["event"] == "throttling-start"], more

        write(soc, "40000\n")
        end = d.wait_event("throttling-end")
        assert end["subject"] == "soc-thermal" and end["duration_s"] >= 0.8

        status = board / "fs/sys/devices/platform/fdab0000.npu/power/runtime_status"
        write(status, "suspended\n")
        susp = d.wait_event("runtime-suspend")
        assert "fdab0000.npu" in susp["subject"]

        (rules / "site.toml").write_text('[[rule]]\nid = "site-note"\nseverity = "loud"\n')
        d.proc.send_signal(signal.SIGHUP)
        rejected = d.wait_event("config-rejected")
        assert "site.toml" in rejected["message"] and "site-note" in rejected["message"]
        d.wait_note("WATCHDOG=1", 2.0)  # still alive and sampling
        write(status, "active\n")
        d.wait_event("runtime-resume")

        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        d.wait_note("STOPPING=1", 2.0)
        assert d.proc.wait(timeout=2.0) == 0
        assert time.monotonic() - t0 < 2.0
        assert "Traceback" not in d.proc.stderr.read()
    finally:
        d.close()


@pytest.mark.slow
def test_hung_probe_stops_the_watchdog_pings(board, tmp_path):
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "hang.toml").write_text(
        '[[probe]]\nid = "vendor-tool"\nrun = ["vendor-tool"]\nparser = "os_release"\n'
        'into = "vendor"\ntimeout_s = 3\nfast = true\n')
    with open(board / "commands.toml", "a") as f:
        f.write('\n[[command]]\nargv = ["vendor-tool"]\ntimed_out = true\n')
    d = Daemon(board, "--interval", "0.2", "--check-interval", "3600", "--probes", str(probes),
               watchdog_usec=400000)
    try:
        assert d.wait_note("READY=1", 20) is not None
        # each sample waits for the hung tool: pings come ~3 s apart, far past WATCHDOG_USEC,
        # so systemd would kill and restart the daemon
        nxt = d.wait_note("WATCHDOG=1", 10)
        nxt2 = d.wait_note("WATCHDOG=1", 10)
        assert nxt2 - nxt > 0.4 * 4
        ev = d.wait_event("probe-failed", 1)
        assert ev["subject"] == "vendor-tool"
    finally:
        d.close()


def test_no_notify_socket_is_fine_and_journal_lines_have_priority(board):
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    proc = subprocess.Popen([sys.executable, "-m", "npu_doctor", "watch", "--snapshot", str(board),
                             "--interval", "0.2"], stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        time.sleep(1.5)
        write(zone_temp_file(board, "soc-thermal"), "90000\n")
        # on a loaded machine the daemon's first samples can come late: wait for the event
        # (20 s at most) rather than a fixed time
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("throttling-start" in ln for ln in list(seen)):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
        reader.join(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    lines = [ln.rstrip("\n") for ln in seen if "throttling-start" in ln]
    assert lines == ["<4>throttling-start soc-thermal: 90.0 °C >= passive trip 85.0 °C"]


def test_textfile_metrics_are_written(board, tmp_path):
    pytest.importorskip("prometheus_client")
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    d = Daemon(board, "--interval", "0.2", "--check-interval", "3600", "--textfile-dir", str(out_dir))
    try:
        d.wait_note("READY=1")
        write(zone_temp_file(board, "soc-thermal"), "90000\n")
        d.wait_event("throttling-start")
        # the file is rewritten after every sample; the one after the event shows it
        end = time.monotonic() + 3.0
        text = ""
        want = 'npu_doctor_thermal_zone_throttling{type="soc-thermal",zone="thermal_zone0"} 1.0'
        while time.monotonic() < end and want not in text:
            text = (out_dir / "npu_doctor.prom").read_text()
            time.sleep(0.05)
        assert want in text
        assert 'npu_doctor_thermal_zone_temperature_celsius{type="soc-thermal",zone="thermal_zone0"} 90.0' in text
        assert not list(out_dir.glob("*.tmp*")) or all(p.name == "npu_doctor.prom" for p in out_dir.iterdir())
    finally:
        d.close()


def test_zones_sharing_a_type_are_tracked_and_exported_apart(tmp_path):
    pytest.importorskip("prometheus_client")
    from npu_doctor.facts import Facts
    from npu_doctor.watch import Tracker
    from npu_doctor.watch.metrics import write_textfile

    def sample(t0, t1):
        f = Facts()
        f.set("thermal.zones", [
            {"zone": "thermal_zone0", "type": "acpitz", "temp_c": t0, "passive_trip_c": 80.0,
             "trips": [{"type": "passive", "temp_c": 80.0, "hyst_c": 2.0}]},
            {"zone": "thermal_zone1", "type": "acpitz", "temp_c": t1, "passive_trip_c": 80.0,
             "trips": [{"type": "passive", "temp_c": 80.0, "hyst_c": 2.0}]}])
        return f

    tr = Tracker()
    assert tr.sample(sample(50, 50), [], 0.0) == []
    ev = tr.sample(sample(85, 50), [], 1.0)
    assert [(e.event, e.fields["zone"]) for e in ev] == [("throttling-start", "thermal_zone0")]
    ev = tr.sample(sample(85, 90), [], 2.0)   # the second acpitz zone is its own episode
    assert [(e.event, e.fields["zone"]) for e in ev] == [("throttling-start", "thermal_zone1")]
    path = write_textfile(str(tmp_path), tr)
    text = open(path).read()
    for zone, temp in (("thermal_zone0", "85.0"), ("thermal_zone1", "90.0")):
        line = [ln for ln in text.splitlines()
                if ln.startswith("npu_doctor_thermal_zone_temperature_celsius") and zone in ln]
        assert len(line) == 1 and line[0].endswith(temp)


def test_findings_raised_and_cleared_at_the_check_interval(board):
    d = Daemon(board, "--interval", "0.3", "--check-interval", "1")
    try:
        d.wait_note("READY=1")
        control = board / "fs/sys/devices/platform/fdab0000.npu/power/control"
        write(board / "fs/sys/devices/platform/fdab0000.npu/power/autosuspend_delay_ms", "2000\n")
        write(control, "auto\n")
        raised = d.wait_event("finding-raised", 10)
        assert raised["rule"] == "runtime-autosuspend" and raised["severity"] == "warning"
        write(control, "on\n")
        cleared = d.wait_event("finding-cleared", 10)
        assert cleared["rule"] == "runtime-autosuspend"
    finally:
        d.close()


def test_fix_shows_the_sysfs_write_and_refuses_to_apply_to_a_snapshot():
    from conftest import run_cli

    snap = case_path("k01-rk3588-npu-autosuspend")
    shown = run_cli("fix", "--snapshot", str(snap))
    assert shown.returncode == 0
    assert "/sys/devices/platform/fdab0000.npu/power/control: auto -> on" in shown.stdout
    refused = run_cli("fix", "--snapshot", str(snap), "--apply")
    assert refused.returncode == 2 and "snapshot" in refused.stderr
    healthy = run_cli("fix", "--snapshot", str(case_path("k05-rk3588-healthy")))
    assert healthy.returncode == 0 and "Nothing to write" in healthy.stdout


def test_device_removed_and_added_as_the_card_leaves_and_returns(tmp_path):
    snap = tmp_path / "laptop"
    shutil.copytree(case_path("k06-intel-npu-user-not-in-render"), snap, symlinks=True)
    fs = snap / "fs"
    parts = [fs / "sys/devices/pci0000:00", fs / "sys/class/accel/accel0",
             fs / "sys/bus/pci/devices/0000:00:0b.0"]
    away = tmp_path / "away"
    away.mkdir()
    d = Daemon(snap, "--interval", "0.2", "--check-interval", "3600")
    try:
        d.wait_note("READY=1")
        for i, p in enumerate(parts):  # what the kernel removes when the device goes
            shutil.move(str(p), str(away / str(i)))
        gone = d.wait_event("device-removed")
        assert "0000:00:0b.0" in gone["subject"] and gone["severity"] == "error"
        for i, p in enumerate(parts):
            shutil.move(str(away / str(i)), str(p))
        back = d.wait_event("device-added")
        assert "0000:00:0b.0" in back["subject"]
    finally:
        d.close()
