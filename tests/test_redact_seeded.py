"""`capture` of a seeded machine: a real case (c1-04, an RK3588 board's os-release, kernel,
rknpu debugfs and dpkg-query) with personal data planted in its logs, commands.toml,
os-release, hostname files and environment. Not one planted value may survive the capture,
and the versions, kernel releases, PCI addresses and timestamps that look like them must."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npu_doctor.redact import Redactor
from npu_doctor.tomlcompat import tomllib

from conftest import case_path, run_cli
from test_capture import all_text, extract

HOST = "rk-bench-lab42"
USER = "mlops-bob"
# Every planted secret, by kind (each also appears in the texts below).
PLANTED = {
    "hostname": [HOST, "rk-bench-lab42.corp.example"],
    "user": [USER],
    "rfc1918": ["10.20.30.41", "172.20.0.5", "192.168.1.9"],
    "link-local": ["169.254.3.4", "fe80::1c2b:3cff:fe4d:5e6f"],
    "cgnat": ["100.72.4.9"],
    "ula": ["fd12:3456:789a:1::5"],
    "public": ["52.14.3.9", "93.184.216.34", "2a01:4f8:c17:1a2b::1"],
    "mac": ["3c:7c:3f:1a:2b:4d", "0a:fe:6f:e7:95:0e"],
    "serial": ["4C1D7A0F22XQ", "9edc63d23d25b853"],
    "uuid": ["ef4839d8-c96f-44cf-9181-7b7b3a374056"],
    "token": ["hunter2secret", "hf_AbCdEfGhIjKlMnOpQrStUvWx12", "ghp_0123456789abcdefABCDEF0123456789abcd",
              "eyJhbGciOiJIUzI1NiJ9.payload.sig", "s3cr3t-Passw0rd", "X-Amz-Sig-0a1b2c3d4e5f"],
}
# Values that look like the above and are facts, not personal data.
KEEP = ["10.3.0.26-1+cuda12.5", "6.1.43-20-5bdd6ed", "6.1.43-19-428a0a5e6", "0000:01:00.0",
        "0002:21:00.0", "[    3.221706]", "10:02:11", "2024-03-03", "8.6.1.6", "fdab0000.npu",
        "git.example.internal", "huggingface.co"]

DMESG = f"""\
[    0.000000] Kernel command line: console=ttyS2,1500000n8 ethaddr=0a:fe:6f:e7:95:0e serial=9edc63d23d25b853 root=UUID=ef4839d8-c96f-44cf-9181-7b7b3a374056
[    3.221706] r8169 0002:21:00.0 eth0: RTL8125B, 3c:7c:3f:1a:2b:4d, XID 641, IRQ 125
[    3.750054] systemd[1]: Hostname set to <{HOST}>.
[    9.100000] RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode
[   12.000000] hailo 0000:01:00.0: Probing: Added board 1e60-2864
[   20.100000] r8169 0002:21:00.0 eth0: Link is Up - 1Gbps/Full - flow control off
"""
APP_LOG = f"""\
Mar  3 10:02:11 {HOST} rknn_server[812]: start on 10.20.30.41:8554, peer 172.20.0.5
2024-03-03T10:02:12+0800 {HOST} app[900]: loading model /home/{USER}/models/yolov5s-640-640.rknn
52.14.3.9 - - [03/Mar/2024:10:02:13 +0800] "POST /infer HTTP/1.1" 200 512
client 192.168.1.9 via gateway 169.254.3.4, tailscale peer 100.72.4.9
connect to 93.184.216.34:443 ok; inet6 2a01:4f8:c17:1a2b::1 ula fd12:3456:789a:1::5 ll fe80::1c2b:3cff:fe4d:5e6f
git clone https://bob:hunter2secret@git.example.internal/models.git
GET https://huggingface.co/api/models/x?token=hf_AbCdEfGhIjKlMnOpQrStUvWx12&revision=main
GITHUB_TOKEN=ghp_0123456789abcdefABCDEF0123456789abcd
Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig
db password: s3cr3t-Passw0rd
s3 https://bucket.s3.amazonaws.com/m.onnx?X-Amz-Signature=X-Amz-Sig-0a1b2c3d4e5f&X-Amz-Expires=60
{USER}@{HOST}:~$ python3 run.py   # fqdn {HOST}.corp.example
Board Serial Number: 4C1D7A0F22XQ
TensorRT version 8.6.1.6
"""
DPKG_EXTRA = "libnvinfer10\t10.3.0.26-1+cuda12.5\ntensorrt\t10.3.0.26-1+cuda12.5\n"


def seeded_snapshot(tmp_path: Path) -> Path:
    import tomli_w

    snap = tmp_path / "seeded"
    shutil.copytree(case_path("c1-04"), snap)
    (snap / "case.toml").unlink()
    fs = snap / "fs"
    (fs / "etc/hostname").write_text(HOST + "\n")
    (fs / "proc/sys/kernel/hostname").write_text(HOST + "\n")
    osr = fs / "etc/os-release"
    osr.write_text(osr.read_text() + f'VARIANT="lab image of {HOST}"\nBUILD_ID={HOST}-2024\n')
    cmds = tomllib.loads((snap / "commands.toml").read_text())["command"]
    for c in cmds:
        if c["argv"] == ["dpkg-query", "-W"]:
            c["stdout"] += DPKG_EXTRA
    cmds += [{"argv": ["dmesg"], "returncode": 0, "stdout": DMESG, "stderr": ""},
             {"argv": ["id"], "returncode": 0, "stderr": "",
              "stdout": f"uid=1001({USER}) gid=1001({USER}) groups=1001({USER}),44(video)\n"}]
    (snap / "commands.toml").write_text(tomli_w.dumps({"command": cmds}, multiline_strings=True))
    (snap / "environ.toml").write_text(tomli_w.dumps({"environ": {
        "HOME": f"/home/{USER}", "USER": USER, "LD_LIBRARY_PATH": f"/home/{USER}/sdk/lib",
        "VIRTUAL_ENV": f"/home/{USER}/venv"}}))
    (snap / "logs").mkdir()
    (snap / f"logs/app-{HOST}.log").write_text(APP_LOG)
    return snap


@pytest.mark.cases
def test_capture_of_a_seeded_machine_keeps_no_planted_secret(tmp_path):
    snap = seeded_snapshot(tmp_path)
    out = tmp_path / "cap.tar.gz"
    proc = run_cli("capture", "--snapshot", str(snap), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    root = extract(out, tmp_path / "x")
    text = all_text(root)
    # not vacuous: the log, dmesg, dpkg-query and os-release were all captured
    assert "POST /infer" in text and "Hostname set to <host-1>" in text
    assert "VARIANT=" in (root / "fs/etc/os-release").read_text()
    leaked = [(kind, s) for kind, values in PLANTED.items() for s in values
              if s.lower() in text.lower()]
    assert not leaked, leaked
    kept = [v for v in KEEP if v not in text]
    assert not kept, f"redacted although not personal: {kept}"
    assert "tensorrt\t10.3.0.26-1+cuda12.5" in text
    assert "https://REDACTED-1@git.example.internal/models.git" in text


def test_one_mapping_per_capture():
    """The same value gets the same placeholder in every text, kind by kind."""
    r = Redactor()
    texts = [APP_LOG, DMESG, f"peer 10.20.30.41 on {HOST}", f"/home/{USER}/x"]
    for t in texts:
        r.scan(t)
    a = r.apply(texts[0])
    c = r.apply(texts[2])
    ip = c.split()[1]
    assert ip.startswith("192.0.2.") and ip in a
    assert c.endswith("host-1") and "Hostname set to <host-1>" in r.apply(DMESG)
    assert r.apply(texts[3]) == "/home/user1/x"
    assert r.apply(a) == a


@pytest.mark.parametrize("line", [
    "libnvinfer10\t10.3.0.26-1+cuda12.5",
    "Linux version 5.10.160-rockchip (builder@host) #1 SMP",
    "hailo 0000:01:00.0: Probing: Added board 1e60-2864",
    "[Sun Mar  3 10:02:11 2024] rknpu fdab0000.npu: RKNN Driver 0.9.8",
    "TensorRT version 10.3.0.26 from 2024",
    "cudnn 8.9.7.29 to 9.1.0.70 upgrade",
    "CUDA driver version 12.4 from 550.54.15",
])
def test_version_like_strings_survive(line):
    r = Redactor()
    r.scan(line)
    assert r.apply(line) == line
