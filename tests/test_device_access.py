"""Who may open an accelerator's device node: root without CAP_DAC_OVERRIDE, the vendor nodes the
sysfs inventory does not list (Ascend /dev/davinci*, NVIDIA /dev/nvidia*), and the
device-node-permission finding they raise. Fixtures are the real report of case m403 (HAMi pod,
capabilities dropped, nodes 1000:1000 0660) and variations of it."""

from __future__ import annotations

import shutil

from npu_doctor import registry
from npu_doctor.catalog import load_catalogs
from npu_doctor.host import SnapshotHost, StatInfo, mode_allows, parse_cap_eff, parse_id_output
from npu_doctor.probe_runner import _run_one
from npu_doctor.probes import CommandCache, ProbeSpec
from npu_doctor.tomlcompat import tomllib

from conftest import REPO, check_json, finding_ids

registry.load_all()

HAMI = REPO / "tests" / "cases" / "m403-hami-ascend-capdrop-all-root-davinci-1000-0660"


def copy_case(name, dest):
    """A writable copy of the repository's case m403 (kept with the code, not a shared case)."""
    assert name == "m403"
    shutil.copytree(str(HAMI), str(dest))
    return dest


ROOT = parse_id_output("uid=0(root) gid=0(root) groups=0(root)")
NODE = StatInfo("char", mode=0o660, uid=1000, gid=1000)


def _devnodes_args():
    with open(REPO / "probes" / "accelerators.toml", "rb") as f:
        specs = tomllib.load(f)["probe"]
    return next(p for p in specs if p["id"] == "vendor-device-nodes")["args"]


def _probe(host, collector, args=None):
    spec = ProbeSpec(id=collector, collector=collector, args=args or {})
    return _run_one(spec, host, CommandCache(host), {})


def test_parse_cap_eff_of_proc_status():
    # fs/proc/array.c render_cap_t(): 16 hex digits; a full root shell and a dropped-caps pod
    assert parse_cap_eff("Name:\tbash\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n") == 0x1ffffffffff
    assert parse_cap_eff("CapPrm: 0000000000000000\nCapEff: 0000000000000000\n") == 0
    assert parse_cap_eff("Name:\tbash\n") is None


def test_root_is_held_to_the_mode_without_cap_dac_override():
    assert mode_allows(NODE, ROOT) is True                       # capabilities unknown: root
    assert mode_allows(NODE, ROOT, cap_eff=0x1ffffffffff) is True
    assert mode_allows(NODE, ROOT, cap_eff=0) is False           # not owner, not in group 1000
    assert mode_allows(NODE, ROOT, write=False, cap_eff=1 << 2) is True   # DAC_READ_SEARCH reads
    assert mode_allows(NODE, ROOT, write=True, cap_eff=1 << 2) is False
    in_group = parse_id_output("uid=0(root) gid=0(root) groups=0(root),1000(HwHiAiUser)")
    assert mode_allows(NODE, in_group, cap_eff=0) is True


def test_snapshot_can_open_reads_the_capabilities_of_root(tmp_path):
    snap = copy_case("m403", tmp_path / "snap")
    host = SnapshotHost(str(snap))
    assert host.can_open("/dev/davinci3") is False
    (snap / "fs/proc/self/status").write_text("CapPrm: 00000000a80425fb\nCapEff: 00000000a80425fb\n")
    assert host.can_open("/dev/davinci3") is True                # docker's default set has it


def test_vendor_nodes_of_the_hami_pod_one_verdict_per_vendor(tmp_path):
    snap = copy_case("m403", tmp_path / "snap")
    res = _probe(SnapshotHost(str(snap)), "vendor_device_nodes", _devnodes_args())
    nodes = res.facts.get("device_nodes")
    assert [n["path"] for n in nodes] == ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc",
                                          "/dev/davinci3"]
    assert all(n["vendor"] == "ascend" and n["can_open"] is False and n["mode"] == "0660" for n in nodes)
    (access,) = res.facts.get("device_access")
    assert access["path"] == "/dev/davinci_manager" and access["can_open"] is False
    assert access["denied"] == [n["path"] for n in nodes]
    user = _probe(SnapshotHost(str(snap)), "user")
    assert user.facts.get("user.cap_dac_override") is False


def test_vendor_nodes_absent_is_no_data(tmp_path):
    snap = copy_case("m403", tmp_path / "snap")
    (snap / "stat.toml").unlink()
    res = _probe(SnapshotHost(str(snap)), "vendor_device_nodes", _devnodes_args())
    assert res.status == "no_data"


def test_finding_only_when_the_node_cannot_be_opened(tmp_path):
    snap = copy_case("m403", tmp_path / "snap")
    report = check_json(snap)
    assert "device-node-permission" in finding_ids(report)
    (hit,) = [f for f in report["findings"] if f["id"] == "device-node-permission"]
    assert hit["subject"] == "/dev/davinci_manager"
    assert "--cap-add DAC_OVERRIDE" in " ".join(x["text"] for x in hit["fixes"])
    # the same pod with docker's default capabilities (CAP_DAC_OVERRIDE kept): no finding
    (snap / "fs/proc/self/status").write_text("CapPrm: 00000000a80425fb\nCapEff: 00000000a80425fb\n")
    assert "device-node-permission" not in finding_ids(check_json(snap))


# -- SELinux / AppArmor lines (catalogs/lsm-device-access.toml) ----------------------------------
CATALOGS = load_catalogs()


def _rules(line):
    return [(e.catalog, e.key, e.rule, e.benign) for e, _ in CATALOGS.match_line(line, ("kernel", "runtime"))]


def test_selinux_denial_of_a_node_raises_only_when_enforced():
    line = ("type=AVC msg=audit(1683468487.052:3337): avc:  denied  { map } for  pid=699282 comm=\"vainfo\" "
            "path=\"/dev/dri/renderD128\" dev=\"devtmpfs\" ino=947 scontext=system_u:system_r:container_t:s0:c260,c628 "
            "tcontext=system_u:object_r:dri_device_t:s0 tclass=chr_file permissive=0")
    assert _rules(line) == [("lsm-device-access", "selinux-avc-denied-device-node", "device-node-permission", False)]
    # permissive=1: logged, not enforced; a denial on another class or another node: not ours
    assert _rules(line.replace("permissive=0", "permissive=1")) == []
    assert _rules(line.replace("tclass=chr_file", "tclass=dir")) == []
    assert _rules(line.replace("/dev/dri/renderD128", "/dev/ttyS0")) == []


def test_apparmor_lines_that_are_not_a_refusal_raise_nothing():
    allowed = ('[   12.964002] audit: type=1400 audit(1755194375.717:150): apparmor="ALLOWED" operation="open" '
               'class="file" profile="Xorg" name="/dev/nvidiactl" pid=1225 comm="Xorg" requested_mask="wr" '
               'denied_mask="wr" fsuid=0 ouid=0')
    assert [r for r in _rules(allowed) if not r[3]] == []
    denied = allowed.replace('"ALLOWED"', '"DENIED"')
    assert ("lsm-device-access", "apparmor-denied-device-node", "device-node-permission", False) in _rules(denied)
    other = ('Nov 22 03:43:46 ken kernel: [23409.757646] audit: type=1400 audit(1511322226.099:82): apparmor="DENIED" '
             'operation="open" profile="snap.openra.ra" name="/sys/devices/virtual/net/lo/operstate" pid=20414 '
             'comm="mono-sgen" requested_mask="r" denied_mask="r" fsuid=1001 ouid=0')
    assert _rules(other) == []
