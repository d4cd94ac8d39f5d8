"""`npu-doctor capture`: round trip on this machine, redaction of real vendor outputs,
permissions, links that stay inside the tree, the size cap."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from npu_doctor.capture import RecordingHost, run_capture
from npu_doctor.capture.tree import _safe_target
from npu_doctor.check import Config
from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.redact import Redactor
from npu_doctor.tomlcompat import tomllib

from conftest import case_path, run_cli, run_cli_subprocess

# -- real outputs with personal and machine-identifying values ---------------------------------
# nvidia-smi -q, from https://github.com/anderskm/gputil/issues/38 (driver 442.92, 4 GPUs)
NVIDIA_SMI_Q = """
==============NVSMI LOG==============

Timestamp                           : Wed Aug 12 20:36:37 2020
Driver Version                      : 442.92
CUDA Version                        : 10.2

Attached GPUs                       : 1
GPU 00000000:18:00.0
    Product Name                    : GeForce GTX 1080 Ti
    Product Brand                   : GeForce
    Display Mode                    : Enabled
    Display Active                  : Enabled
    Persistence Mode                : N/A
    Accounting Mode                 : Disabled
    Accounting Mode Buffer Size     : 4000
    Driver Model
        Current                     : WDDM
        Pending                     : WDDM
    Serial Number                   : N/A
    GPU UUID                        : GPU-95ef7c5d-fc11-835b-cd38-2020193cf8e0
    Minor Number                    : N/A
    VBIOS Version                   : 86.02.39.00.22
    MultiGPU Board                  : No
    Board ID                        : 0x1800
    GPU Part Number                 : N/A
"""
# kernel log lines: r8169 MAC and root-fs UUID from https://github.com/HeyMeco/Rockchip-pcie-devices/issues/4,
# the kernel command line (ethaddr, serial, uuid) of an Orange Pi 5 Max from
# https://github.com/retro-center/rcade_releases/issues/69, random MACs from
# https://github.com/openwrt/openwrt/pull/12974; the systemd hostname line is systemd's format
# with this snapshot's hostname.
DMESG = """\
[    0.000000] Kernel command line: uuid=1939-079A initrd=/initrd.gz console=ttyS2,1500000n8 ethaddr=0a:fe:6f:e7:95:0e eth1addr=0a:fe:6f:e7:95:0f wlanaddr= ubootver="" serial=9edc63d23d25b853 cgroup_enable=cpuset cgroup_memory=1 cgroup_enable=memory swapaccount=1 kpti=0 coherent_pool=1m usbcore.autosuspend=-1 net.ifnames=0 consoleblank=0 mem=4G
[    3.201876] r8169 0004:41:00.0: enabling device (0000 -> 0003)
[    3.221706] r8169 0004:41:00.0 eth0: RTL8125B, 00:e0:4c:68:00:7b, XID 641, IRQ 125
[    3.244535] r8169 0004:41:00.0 enP4p65s0: renamed from eth0
[    3.347807] EXT4-fs (mmcblk1p2): mounted filesystem ef4839d8-c96f-44cf-9181-7b7b3a374056 ro with writeback data mode. Quota mode: none.
[    3.750054] systemd[1]: Hostname set to <rock5b-lab7>.
[   16.407872] r8169 0000:01:00.0 eth1: RTL8125B, ce:f5:94:bd:a2:2d, XID 641, IRQ 79
[   16.446885] r8169 0001:01:00.0 eth2: RTL8125B, 6a:b4:79:e8:cf:bb, XID 641, IRQ 80
[   20.100000] r8169 0000:01:00.0 eth1: Link is Up - 1Gbps/Full - flow control off
"""
# smartctl -i, from https://github.com/FrameworkComputer/framework-system/issues/224
SMARTCTL = """\
=== START OF INFORMATION SECTION ===
Model Number:                       USB DISK 3.2
Serial Number:                      07001A60B3A20F79
Firmware Version:                   UHFM10.0
"""
# xbutil dump (board info), from https://github.com/Xilinx/XRT/pull/1802
XBUTIL = """\
"board": {
        "info": {
            "dsa_name": "xilinx_u250_xdma_201830_2",
            "vendor": "4334",
            "serial_number": "21320186800Y",
            "sc_version": "4.2.0",
"""
# an application log naming the user's home directory and an address it talked to
APP_LOG = """\
I RKNN: [10:02:11.101] RKNN Runtime Information, librknnrt version: 2.3.0 (c949ad889d@2024-11-07T11:35:33)
loading model /home/alice/models/yolov5s-640-640.rknn
TensorRT version: 8.6.1.6, cuDNN 8.9.7.29
connected to server 192.168.10.23:8554 (inet 10.20.30.40/24)
"""

SECRETS = ["SN0000000000", "95ef7c5d-fc11-835b-cd38-2020193cf8e0", "1939-079A",
           "0a:fe:6f:e7:95:0e", "0a:fe:6f:e7:95:0f", "9edc63d23d25b853", "00:e0:4c:68:00:7b",
           "ef4839d8-c96f-44cf-9181-7b7b3a374056", "rock5b-lab7", "ce:f5:94:bd:a2:2d",
           "6a:b4:79:e8:cf:bb", "07001A60B3A20F79", "21320186800Y", "alice",
           "192.168.10.23", "10.20.30.40"]
# values a redaction must not touch: bus ids, versions (8.6.1.6 looks like an IPv4 address)
KEEP = ["0000:5A:00.0", "0000:01:00.0", "4.20.0", "25.0.rc1.1", "442.92", "8.6.1.6",
        "8.9.7.29", "2.3.0", "00000000:18:00.0", "HAILO8L"]


def toml_str(s: str) -> str:
    return json.dumps(s)


def build_board(tmp_path: Path) -> Path:
    """A snapshot assembled from the real outputs above and of two real cases."""
    snap = tmp_path / "board"
    fs = snap / "fs"
    (fs / "etc").mkdir(parents=True)
    (fs / "etc/hostname").write_text("rock5b-lab7\n")
    (fs / "proc/sys/kernel").mkdir(parents=True)
    (fs / "proc/sys/kernel/hostname").write_text("rock5b-lab7\n")
    shutil.copy(case_path("k05-rk3588-healthy") / "fs/etc/os-release", fs / "etc/os-release")
    hailo = tomllib.loads((case_path("c1-11") / "commands.toml").read_text())["command"]
    npu = tomllib.loads((case_path("c1-03") / "commands.toml").read_text())["command"]
    cmds = hailo + npu + [
        {"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": NVIDIA_SMI_Q, "stderr": ""},
        {"argv": ["dmesg"], "returncode": 0, "stdout": DMESG, "stderr": ""},
        {"argv": ["id"], "returncode": 0, "stderr": "",
         "stdout": "uid=1000(alice) gid=1000(alice) groups=1000(alice),44(video),992(render)\n"},
    ]
    import tomli_w

    (snap / "commands.toml").write_text(tomli_w.dumps({"command": cmds}, multiline_strings=True))
    (snap / "environ.toml").write_text('[environ]\nHOME = "/home/alice"\nUSER = "alice"\n')
    (snap / "logs").mkdir()
    (snap / "logs/smartctl.txt").write_text(SMARTCTL)
    (snap / "logs/xbutil-dump.json").write_text(XBUTIL)
    (snap / "logs/app.log").write_text(APP_LOG)
    return snap


def extract(archive: Path, dest: Path) -> Path:
    with tarfile.open(archive) as tf:
        tf.extractall(dest, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    return dest


def all_text(root: Path) -> str:
    chunks = []
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            chunks.append(os.path.relpath(p, root))
            if os.path.islink(p):
                chunks.append(os.readlink(p))
            elif os.path.isfile(p):
                chunks.append(Path(p).read_bytes().decode("utf-8", "replace"))
    return "\n".join(chunks)


def test_redaction_of_real_outputs(tmp_path):
    snap = build_board(tmp_path)
    out = tmp_path / "board.tar.gz"
    proc = run_cli("capture", "--snapshot", str(snap), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    root = extract(out, tmp_path / "x")
    text = all_text(root)
    # not vacuous: the outputs holding the secrets were captured
    cmds = tomllib.loads((root / "commands.toml").read_text())["command"]
    argvs = {tuple(c["argv"]) for c in cmds}
    assert {("hailortcli", "fw-control", "identify"), ("nvidia-smi", "-q"), ("dmesg",),
            ("npu-smi", "info"), ("id",)} <= argvs
    assert sorted(p.name for p in (root / "logs").iterdir()) == ["app.log", "smartctl.txt",
                                                                 "xbutil-dump.json"]
    for secret in SECRETS:
        assert secret.lower() not in text.lower(), f"{secret} leaked into the capture"
    for value in KEEP:
        assert value in text, f"{value} was redacted but is not personal"
    # consistent mapping: the MAC of eth1 is one placeholder in every place it appears
    dmesg = next(c for c in cmds if c["argv"] == ["dmesg"])["stdout"]
    macs = re.findall(r"02:00:00:00:[0-9a-f]{2}:[0-9a-f]{2}", dmesg)
    assert len(set(macs)) == 5 and len(macs) == 5
    assert "Hostname set to <host-1>" in dmesg
    assert "Serial Number: SERIAL-" in next(c for c in cmds if c["argv"][0] == "hailortcli")["stdout"]
    assert "uid=1000(user1) gid=1000(user1)" in next(c for c in cmds if c["argv"] == ["id"])["stdout"]
    assert "/home/user1/models/yolov5s-640-640.rknn" in (root / "logs/app.log").read_text()
    meta = tomllib.loads((root / "snapshot.toml").read_text())["snapshot"]
    assert meta["redacted"] is True and meta["hostname"] == "host-1"
    assert "replay check: the capture gives the same facts" in proc.stderr, proc.stderr


def test_no_redact_keeps_values(tmp_path):
    snap = build_board(tmp_path)
    out = tmp_path / "raw"
    proc = run_cli("capture", "--snapshot", str(snap), "-o", str(out) + "/", "--no-redact")
    assert proc.returncode == 0, proc.stderr
    text = all_text(out)
    assert "rock5b-lab7" in text and "00:e0:4c:68:00:7b" in text and "SN0000000000" in text


def test_redactor_is_consistent_and_idempotent():
    r = Redactor()
    r.add_hostname("rock5b-lab7.example.org")
    a = r.apply("eth0: 00:E0:4C:68:00:7B up on rock5b-lab7; peer rock5b-lab7.example.org")
    b = r.apply("mac 00:e0:4c:68:00:7b")
    assert a == "eth0: 02:00:00:00:00:01 up on host-2; peer host-1"
    assert b == "mac 02:00:00:00:00:01"
    assert r.apply(a) == a                                    # placeholders stay put
    # names are whole tokens only: package names and device-tree strings are left alone
    r.add_hostname("raspberrypi")
    assert r.apply("linux-image-raspberrypi\t6.1") == "linux-image-raspberrypi\t6.1"
    assert r.apply("raspberrypi,5-model-b", "/proc/device-tree/compatible") == "raspberrypi,5-model-b"
    # versions that look like addresses survive, addresses in context do not
    assert r.apply("libnvinfer8\t8.6.1.6-1+cuda12.0") == "libnvinfer8\t8.6.1.6-1+cuda12.0"
    assert "192.168.1.5" not in r.apply("inet 192.168.1.5/24 brd 192.168.1.255")
    # a host called `vm`, a user called `sys`: too generic to replace without rewriting paths
    r2 = Redactor()
    r2.add_hostname("vm")
    r2.add_user("sys")
    assert r2.apply("/proc/sys/vm/overcommit_memory on vm") == "/proc/sys/vm/overcommit_memory on vm"
    # the kernel's serial-port banner is not a serial number; a value ending the line is
    line = "[    0.394013] Serial: 8250/16550 driver, 4 ports, IRQ sharing enabled"
    assert r.apply(line) == line
    assert r.apply("Serial\t\t: 10000000abcdef01") == "Serial\t\t: SERIAL-0001"


def test_safe_link_targets():
    assert _safe_target("/sys/class/devfreq/x", "../../devices/platform/x") == "../../devices/platform/x"
    assert _safe_target("/usr/lib/libfoo.so", "/usr/lib/libfoo.so.1") == "libfoo.so.1"
    assert _safe_target("/etc/alt", "/../../../etc/passwd") == "passwd"
    assert _safe_target("/a/b", "../../../../x") == "../x"


def _members_ok(archive: Path) -> None:
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    with tarfile.open(archive) as tf:
        for m in tf.getmembers():
            assert not m.name.startswith("/") and ".." not in m.name.split("/")
            assert m.uname == "" and m.gname == ""
            if m.isfile():
                assert m.mode == 0o600, m.name
            elif m.isdir():
                assert m.mode == 0o700, m.name
            elif m.issym():
                assert not m.linkname.startswith("/"), (m.name, m.linkname)
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(m.name), m.linkname))
                assert resolved.startswith("fs/"), (m.name, m.linkname)


@pytest.mark.slow
def test_round_trip_on_this_machine(tmp_path):
    """check through the recorder == check --snapshot of what it wrote (redacted the same way)."""
    out = tmp_path / "cap.tar.gz"
    config = Config.load()
    run = run_capture(LiveHost(), config, str(out), redact=True)
    _members_ok(out)
    # every live fact is reproduced; the replay may only know *more* (a live probe that used
    # an OS call such as os.confstr where the snapshot offers a file with more detail)
    assert [d for d in run.fact_diffs if not d.startswith("replay only:")] == []
    assert run.finding_diffs == []
    assert run.live.facts.data, "the live run found no facts at all"
    # the same through the CLI, as a user would do it: capture, then check --snapshot
    snap = SnapshotHost(str(out))
    try:
        assert snap.read_attr("/proc/sys/kernel/osrelease") == run.live.facts.get("kernel.release")
    finally:
        snap.close()


@pytest.mark.slow
def test_sparse_library_keeps_only_what_was_read(tmp_path):
    """A 4 MiB ELF the library probe parses through open_binary: the capture keeps the parts
    it read (zeros elsewhere, real size), records the real sha256, and replays the same facts;
    `lock` of the capture equals `lock` of the original."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not available")
    snap = tmp_path / "snap"
    shutil.copytree(case_path("k05-rk3588-healthy"), snap)
    for root, dirs, _files in os.walk(snap):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    os.chmod(snap, 0o755)
    src = tmp_path / "rt.c"
    src.write_text("const char pad[4 << 20] = {[0 ... (4 << 20) - 1] = 7};\n"
                   "int xrtDeviceOpen(void) { return pad[1]; }\n")
    # an XRT library: parsed for its dynamic section only (no probe reads it for a version)
    lib = snap / "fs/opt/xilinx/xrt/lib/libxrt_coreutil.so.2"
    lib.parent.mkdir(parents=True, exist_ok=True)
    import subprocess

    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    out = tmp_path / "cap.tar.gz"
    run = run_capture(SnapshotHost(str(snap)), Config.load(), str(out), redact=False)
    assert [d for d in run.fact_diffs if not d.startswith("replay only:")] == []
    assert run.finding_diffs == []
    libpath = "/opt/xilinx/xrt/lib/libxrt_coreutil.so.2"
    assert any(ln.get("path") == libpath for ln in run.live.facts.get("libraries", []))
    with tarfile.open(out) as tf:
        member = tf.getmember("fs" + libpath)
        kept = tf.extractfile(member).read()
    original = lib.read_bytes()
    assert member.size == len(original) and kept != original
    assert kept[:64] == original[:64]                        # the ELF header was read and kept
    assert out.stat().st_size < len(original) // 4
    meta = tomllib.loads(tarfile.open(out).extractfile("snapshot.toml").read().decode())["snapshot"]
    import hashlib

    entry = next(e for e in meta["sparse"] if e["path"] == libpath)
    assert entry["sha256"] == hashlib.sha256(original).hexdigest() and entry["size"] == len(original)
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    assert run_cli("lock", "--snapshot", str(snap), "-o", str(a)).returncode == 0
    assert run_cli("lock", "--snapshot", str(out), "-o", str(b)).returncode == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.slow
def test_cli_capture_then_check_matches_live_check(tmp_path):
    out = tmp_path / "board.tar.gz"
    proc = run_cli("capture", "-o", str(out), "--no-redact", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "captured" in proc.stderr
    live = run_cli("check", "--format", "json", "--fail-on", "never")
    replay = run_cli("check", "--snapshot", str(out), "--format", "json", "--fail-on", "never")
    assert live.returncode == 0 and replay.returncode == 0, replay.stderr
    lf, rf = json.loads(live.stdout), json.loads(replay.stdout)
    key = lambda r: sorted((f["id"], f["subject"], f["message"]) for f in r["findings"])  # noqa: E731
    assert key(lf) == key(rf)
    # and the capture locks to the same bytes as the machine itself
    a, b = tmp_path / "live.lock", tmp_path / "capture.lock"
    assert run_cli("lock", "-o", str(a)).returncode == 0
    assert run_cli("lock", "--snapshot", str(out), "-o", str(b)).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    for path in ("kernel.release", "os.id", "os.version_id", "arch", "libc.name", "libc.version",
                 "cpu.count", "user.uid"):
        node_l, node_r = lf["facts"], rf["facts"]
        for part in path.split("."):
            node_l = node_l.get(part) if isinstance(node_l, dict) else None
            node_r = node_r.get(part) if isinstance(node_r, dict) else None
        assert node_l == node_r, path


def test_size_cap_leaves_out_and_says_why(tmp_path):
    snap = tmp_path / "s"
    (snap / "fs/etc").mkdir(parents=True)
    (snap / "fs/etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n' + "# pad\n" * 400)
    out = tmp_path / "c.tar.gz"
    proc = run_cli("capture", "--snapshot", str(snap), "-o", str(out), "--max-file-size", "0.001")
    assert proc.returncode == 0, proc.stderr
    assert "/etc/os-release: too large" in proc.stderr
    root = extract(out, tmp_path / "x")
    assert not (root / "fs/etc/os-release").exists()
    meta = tomllib.loads((root / "snapshot.toml").read_text())["snapshot"]
    assert any(x.startswith("/etc/os-release: too large") for x in meta["left_out"])
    assert "replay check: the capture differs" in proc.stderr


def test_recording_host_records_listing_and_links(tmp_path):
    """Listed names replay as entries; links replay as links (the k05 devfreq class link)."""
    case = case_path("k05-rk3588-healthy")
    rec = RecordingHost(SnapshotHost(str(case)))
    names = rec.listdir("/sys/class/devfreq")
    gov = rec.read_attr("/sys/class/devfreq/fdab0000.npu/governor")
    from npu_doctor.capture import CaptureWriter

    out = tmp_path / "cap"
    CaptureWriter(rec, Redactor()).write(str(out) + "/")
    link = out / "fs/sys/class/devfreq/fdab0000.npu"
    assert link.is_symlink() and os.readlink(link) == "../../devices/platform/fdab0000.npu/devfreq/fdab0000.npu"
    replay = SnapshotHost(str(out))
    assert replay.listdir("/sys/class/devfreq") == names
    assert replay.read_attr("/sys/class/devfreq/fdab0000.npu/governor") == gov
    assert stat.S_IMODE(os.stat(out / "fs/sys/devices/platform/fdab0000.npu/devfreq/fdab0000.npu/governor").st_mode) == 0o600


def _case_dirs():
    from conftest import CASES

    return sorted(p.name for p in CASES.iterdir() if (p / "case.toml").is_file()) if CASES.is_dir() else []


@pytest.mark.parametrize("case", _case_dirs())
def test_recapture_of_every_case_replays_the_same(case, tmp_path):
    """Capturing a real case through the recorder (redacted, as by default) gives a snapshot
    whose check has the same facts and findings, modulo the redacted values."""
    out = tmp_path / "cap.tar.gz"
    host = SnapshotHost(str(case_path(case)))
    try:
        run = run_capture(host, Config.load(), str(out), redact=True)
    finally:
        host.close()
    assert run.fact_diffs == [] and run.finding_diffs == [], run.fact_diffs + run.finding_diffs
    _members_ok(out)


class _NonRootView(SnapshotHost):
    """k05 as a user without root sees it: debugfs (where the RKNPU driver keeps its version
    and load) is mode 0700 root, so every read under /sys/kernel/debug is EACCES."""

    def _deny(self, path):
        from npu_doctor.errors import AccessDenied

        if path.startswith("/sys/kernel/debug"):
            raise AccessDenied(path, "permission denied")

    def read_bytes(self, path, max_bytes=8 << 20):
        self._deny(path)
        return super().read_bytes(path, max_bytes)

    def listdir(self, path):
        self._deny(path)
        return super().listdir(path)

    def open_binary(self, path):
        self._deny(path)
        return super().open_binary(path)


def test_capture_without_root_replays_the_denials(tmp_path):
    host = _NonRootView(str(case_path("k05-rk3588-healthy")))
    out = tmp_path / "cap.tar.gz"
    try:
        run = run_capture(host, Config.load(), str(out))
    finally:
        host.close()
    denied = run.live.facts.get("access.denied", [])
    assert any(d["path"].startswith("/sys/kernel/debug") for d in denied), denied
    assert "insufficient-privileges" in {f.id for f in run.live.findings}
    assert run.fact_diffs == [] and run.finding_diffs == [], run.fact_diffs + run.finding_diffs
    meta = tomllib.loads(tarfile.open(out).extractfile("snapshot.toml").read().decode())["snapshot"]
    assert any(p.startswith("/sys/kernel/debug") for p in meta["denied"])


def test_capture_with_logs_keeps_their_order_and_findings(tmp_path):
    """--log files go to logs/ (named so a snapshot lists them in the order given) and the
    replay finds the same log events and findings (toolkit-runtime-mismatch, CPU fallback)."""
    a = case_path("c1-06") / "logs/test.log"
    b = case_path("c3-04") / "logs/rknn-toolkit2.log"
    out = tmp_path / "cap.tar.gz"
    run = run_capture(LiveHost(extra_logs=[str(a), str(b)]), Config.load(), str(out))
    assert run.fact_diffs == [] and run.finding_diffs == [], run.fact_diffs + run.finding_diffs
    assert run.live.facts.get("log_events"), "the case logs produced no log events"
    with tarfile.open(out) as tf:
        names = sorted(m.name for m in tf.getmembers() if m.name.startswith("logs/") and m.isfile())
    assert names == ["logs/01-test.log", "logs/02-rknn-toolkit2.log"]


# -- the output: its kind decided explicitly, symlinks followed, special files refused --------
K05 = "k05-rk3588-healthy"
C101 = "c1-01-ascend-dcmi-8020-device-in-use"   # replays with exactly one finding


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-doctor: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["out.zip", "board", "board.tar", "out.tar.bz2"])
def test_capture_refuses_an_output_of_unknown_kind(tmp_path, name):
    """`-o out.zip` used to create a directory named out.zip."""
    out = tmp_path / name
    line = _one_error_line(run_cli("capture", "--snapshot", str(case_path(K05)), "-o", str(out)))
    assert ".tar.gz" in line and ".tgz" in line and "directory" in line and "`/`" in line
    assert not os.path.lexists(out) and list(tmp_path.iterdir()) == []


def test_capture_directory_forms(tmp_path):
    """A path ending in `/` (created) and an existing empty directory are directory
    snapshots; a non-empty directory is refused."""
    for out, arg in ((tmp_path / "new", str(tmp_path / "new") + "/"),
                     (tmp_path / "empty", str(tmp_path / "empty"))):
        if out.name == "empty":
            out.mkdir()
        proc = run_cli("capture", "--snapshot", str(case_path(K05)), "-o", arg)
        assert proc.returncode == 0, proc.stderr
        assert out.is_dir() and (out / "snapshot.toml").is_file() and (out / "fs").is_dir()
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine\n")
    line = _one_error_line(run_cli("capture", "--snapshot", str(case_path(K05)), "-o", str(full)))
    assert "not empty" in line and (full / "keep.txt").read_text() == "mine\n"


def test_capture_archive_through_a_symlink_replaces_the_target(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    target = store / "board.tar.gz"
    target.write_bytes(b"stale")
    link = tmp_path / "latest.tgz"
    link.symlink_to(target)
    proc = run_cli("capture", "--snapshot", str(case_path(K05)), "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert tarfile.is_tarfile(str(target)) and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in store.iterdir()) == ["board.tar.gz"]      # no temp left
    assert run_cli("check", "--snapshot", str(link), "--fail-on", "never").returncode == 0


def test_capture_refuses_an_archive_path_that_is_not_a_regular_file(tmp_path):
    specials = []
    fifo = tmp_path / "cap.tar.gz"
    os.mkfifo(str(fifo))
    specials.append(("fifo", fifo))
    link = tmp_path / "via-link.tgz"
    link.symlink_to(fifo)
    specials.append(("fifo", link))
    d = tmp_path / "dir.tar.gz"
    d.mkdir()
    specials.append(("directory", d))
    dev = tmp_path / "full.tgz"
    try:  # the device numbers of /dev/full; needs CAP_MKNOD
        os.mknod(str(dev), 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        specials.append(("character device", dev))
    except (PermissionError, OSError):
        pass
    for kind, path in specials:
        real = os.path.realpath(path)
        before = os.lstat(real)
        # a child process: a regression that opened the FIFO would block, and only a child
        # can be timed out
        line = _one_error_line(run_cli_subprocess("capture", "--snapshot", str(case_path(K05)),
                                                  "-o", str(path), timeout=60))
        assert kind in line
        after = os.lstat(real)
        assert (stat.S_IFMT(after.st_mode), after.st_ino, after.st_rdev) == \
            (stat.S_IFMT(before.st_mode), before.st_ino, before.st_rdev)
    assert link.is_symlink() and not [p for p in tmp_path.rglob(".*.tmp")]


def test_capture_summary_counts_are_pluralised(tmp_path):
    proc = run_cli("capture", "--snapshot", str(case_path(C101)), "-o", str(tmp_path / "c.tgz"))
    assert proc.returncode == 0, proc.stderr
    assert "same facts and 1 finding as this run" in proc.stderr, proc.stderr
    assert "1 file," in proc.stderr and "1 command," in proc.stderr
    assert not re.search(r"(?<![\d.])1 (?:files|links|commands|logs|findings|paths|places|"
                         r"values|listed-only entries)\b", proc.stderr), proc.stderr
    assert "(s)" not in proc.stderr
    # the redaction summary names its kinds in words, with the right number
    snap = build_board(tmp_path)
    proc = run_cli("capture", "--snapshot", str(snap), "-o", str(tmp_path / "b.tgz"))
    assert proc.returncode == 0, proc.stderr
    from npu_doctor.redact import KIND_NOUNS

    red = re.search(r"\(redacted: ([^)]*)\)", proc.stderr).group(1)
    parts = [p.split(" ", 1) for p in red.split(", ")]
    assert len(parts) >= 3, red                    # hostname, user, MAC, serial at least
    for n, noun in parts:
        assert noun in [v[0 if int(n) == 1 else 1] for v in KIND_NOUNS.values()], red
