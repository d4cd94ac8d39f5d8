"""journald natively (structured fields over the native protocol), no `<N>` prefixes on a
terminal, RELOADING=1 / READY=1 around a SIGHUP reload."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from conftest import REPO
from test_watch import Daemon, board, write, zone_temp_file  # noqa: F401  (board: fixture)

from npu_doctor.watch.journal import MESSAGE_IDS, JournalSender, encode, event_fields, stream_is_journal
from npu_doctor.watch import Event


def decode(data: bytes):
    """Parse a native-protocol datagram (both field forms) into {name: value}."""
    out, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, _, v = line.partition(b"=")
            out[k.decode()] = v.decode()
            i = nl + 1
        else:
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            out[line.decode()] = data[nl + 9:nl + 9 + n].decode()
            assert data[nl + 9 + n:nl + 10 + n] == b"\n"
            i = nl + 10 + n
    return out


def test_event_goes_to_the_journal_socket_with_structured_fields():
    d = tempfile.mkdtemp(dir="/tmp")          # sun_path is 108 bytes: keep it short
    path = os.path.join(d, "j.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(5)
    try:
        ev = Event("throttling-start", "npu-thermal", "warning", "86.0 °C >= passive trip 85.0 °C",
                   fields={"zone": "thermal_zone1", "temp_c": 86.0, "trip_c": 85.0})
        assert JournalSender(path).send(event_fields(ev))
        got = decode(srv.recv(65536))
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)
    assert got["MESSAGE"] == "throttling-start npu-thermal: 86.0 °C >= passive trip 85.0 °C"
    assert got["PRIORITY"] == "4" and got["SYSLOG_IDENTIFIER"] == "npu-doctor"
    assert got["NPU_DOCTOR_EVENT"] == "throttling-start" and got["NPU_DOCTOR_SUBJECT"] == "npu-thermal"
    assert got["MESSAGE_ID"] == MESSAGE_IDS["throttling-start"]
    assert got["NPU_DOCTOR_TEMP_C"] == "86.0" and got["NPU_DOCTOR_ZONE"] == "thermal_zone1"


def test_multiline_values_use_the_length_prefixed_form_and_ids_are_unique():
    data = encode({"MESSAGE": "two\nlines", "PRIORITY": "3"})
    assert data.startswith(b"MESSAGE\n" + struct.pack("<Q", 9) + b"two\nlines\n")
    assert decode(data) == {"MESSAGE": "two\nlines", "PRIORITY": "3"}
    ids = list(MESSAGE_IDS.values())
    assert len(set(ids)) == len(ids) and all(len(i) == 32 and int(i, 16) for i in ids)


def test_no_socket_means_not_sent():
    assert JournalSender("/nonexistent/journal.sock").send({"MESSAGE": "x"}) is False


def test_journal_stream_must_name_stdout(tmp_path):
    f = open(tmp_path / "out", "w")
    try:
        st = os.fstat(f.fileno())
        assert stream_is_journal(f.fileno(), {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not stream_is_journal(f.fileno(), {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"})
        assert not stream_is_journal(f.fileno(), {})
        assert not stream_is_journal(f.fileno(), {"JOURNAL_STREAM": "junk"})
    finally:
        f.close()


def test_on_a_terminal_the_lines_have_no_priority_prefix(board):  # noqa: F811
    master, slave = pty.openpty()
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "JOURNAL_STREAM"):
        env.pop(k, None)
    proc = subprocess.Popen([sys.executable, "-m", "npu_doctor", "watch", "--snapshot", str(board),
                             "--interval", "0.2"], stdout=slave, stderr=subprocess.DEVNULL, env=env, cwd=str(REPO))
    os.close(slave)
    out = b""
    try:
        time.sleep(1.5)
        write(zone_temp_file(board, "soc-thermal"), "90000\n")
        end = time.monotonic() + 10
        while b"throttling-start" not in out and time.monotonic() < end:
            if select.select([master], [], [], 0.2)[0]:
                out += os.read(master, 4096)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        os.close(master)
    line = [l for l in out.decode().splitlines() if "throttling-start" in l]
    assert line == ["throttling-start soc-thermal: 90.0 °C >= passive trip 85.0 °C"], out


def test_reload_is_reloading_then_ready(board):  # noqa: F811
    d = Daemon(board, "--interval", "0.3", "--check-interval", "3600")
    try:
        d.wait_note("READY=1")
        d.proc.send_signal(signal.SIGHUP)
        t_reloading = d.wait_note("RELOADING=1")
        t_ready = d.wait_note("READY=1")
        assert t_ready >= t_reloading
        d.wait_event("config-reloaded")
    finally:
        d.close()


def test_watcher_sends_to_the_journal_and_prints_nothing(board):  # noqa: F811
    import io

    from npu_doctor.check import Config
    from npu_doctor.host import open_host
    from npu_doctor.watch import Watcher

    d = tempfile.mkdtemp(dir="/tmp")
    path = os.path.join(d, "j.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(5)
    out = io.StringIO()
    try:
        w = Watcher(open_host(str(board), []), Config.load(), 1.0, 3600.0, out=out,
                    journal=JournalSender(path), use_udev=False)
        w.emit(Event("finding-raised", "RK3588 NPU", "error", "driver-probe-failed: x", fields={"rule": "driver-probe-failed"}))
        got = decode(srv.recv(65536))
        os.unlink(path)                    # journald gone: the line goes to stdout instead
        w.emit(Event("finding-cleared", "RK3588 NPU", "info", "driver-probe-failed: no longer reported"))
    finally:
        srv.close()
        os.rmdir(d)
    assert got["NPU_DOCTOR_RULE"] == "driver-probe-failed" and got["PRIORITY"] == "3"
    assert out.getvalue() == "<6>finding-cleared RK3588 NPU: driver-probe-failed: no longer reported\n"
