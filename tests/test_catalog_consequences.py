"""`consequence_of`: a catalog line caused by another line's finding is that finding's evidence.

Real case logs (tests/cases/*, each with its issue URL in case.toml): the root cause stays the
finding and the consequence is listed under its `also`; the same consequence line with no cause
logged still raises its own rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.catalog import load_catalog_file, load_catalogs
from npu_doctor.catalog.events import apply_consequences
from npu_doctor.errors import ConfigError
from npu_doctor.rules import load_rules

from conftest import check_json, finding_ids, make_snapshot

CASES = Path(__file__).parent / "cases"
RULE_IDS = {r.id for r in load_rules().rules}

# NVIDIA/open-gpu-kernel-modules#230 (case s01): the 515 open module refuses a GeForce, then
# the resource manager cannot initialise it
OPEN_DC_ONLY = "[    3.513141] NVRM: Open nvidia.ko is only ready for use on Data Center GPUs.\n"
RM_INIT = "[    3.824916] NVRM: GPU 0000:04:00.0: RmInitAdapter failed! (0x63:0x0:1905)\n"


def _by_id(report, rule):
    return [f for f in report["findings"] if f["id"] == rule]


def _also(finding):
    return [v for ev in finding["evidence"] if ev["fact"].endswith(".also") for v in ev["value"]]


def test_rminitadapter_after_open_module_refusal_is_evidence_not_a_finding():
    report = check_json(CASES / "s01-nvidia-open-515-geforce-only-datacenter")
    assert "runtime-init-failed" not in finding_ids(report)
    (kdi,) = _by_id(report, "kernel-driver-incompatible")
    assert any("RmInitAdapter failed" in a and "consequence" in a for a in _also(kdi))
    ev = next(e for e in report["facts"]["log_events"] if e.get("entry") == "rminitadapter-failed")
    assert ev["consequence_rule"] == "runtime-init-failed" and ev["consequence_of_line"] == "dmesg:1"
    # the consequence line still states what it knows: the GPU's address
    assert "0000:04:00.0" in [a.get("pci_address") for a in report["facts"]["accelerators"]]


def test_rminitadapter_alone_still_raises_runtime_init_failed(tmp_path):
    snap = make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, RM_INIT)])
    (f,) = _by_id(check_json(snap), "runtime-init-failed")
    assert f["subject"] == "nvidia 0000:04:00.0"


def test_cause_for_another_gpu_does_not_demote(tmp_path):
    # fallen off the bus (osinit.c wording, catalog example) for another GPU than the RmInitAdapter line
    dmesg = "[  10.0] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n" + RM_INIT
    ids = finding_ids(check_json(make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, dmesg)])))
    assert {"device-unresponsive", "runtime-init-failed"} <= ids


def test_cause_of_another_vendor_does_not_demote(tmp_path):
    # a Hailo firmware file missing (case d01's line) is no cause of an NVIDIA GPU's failure
    hailo = ("[    1.428669] hailo 0000:05:00.0: Firmware file not found (/lib/firmware/hailo/hailo8_fw.bin), "
             "please upload the firmware manually\n")
    ids = finding_ids(check_json(make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, hailo + RM_INIT)])))
    assert {"firmware-missing", "runtime-init-failed"} <= ids


def test_same_line_consequence_torch_cuda_init_804():
    # pytorch#60443-style line (case q12): "CUDA initialization: ... Error 804" names the cause
    report = check_json(CASES / "q12-torch-804-compat-libs-geforce-container")
    assert "runtime-init-failed" not in finding_ids(report)
    (f,) = _by_id(report, "runtime-driver-mismatch")
    assert any("CUDA could not initialise" in a or "CUDA_INIT_FAILED" in a for a in _also(f))


def test_torch_cuda_init_alone_still_raises(tmp_path):
    line = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:118: UserWarning: CUDA initialization: "
            "CUDA driver initialization failed, you might not have a CUDA gpu.\n")
    snap = make_snapshot(tmp_path / "s", logs={"torch.log": line})
    assert "runtime-init-failed" in finding_ids(check_json(snap))


def test_cause_in_kernel_log_consequence_in_application_log(tmp_path):
    # case h01's two lines, split over the two logs a snapshot holds
    snap = make_snapshot(
        tmp_path / "s",
        commands=[(["dmesg"], 0, "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")],
        logs={"terminal.log": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                              "Make sure that the latest NVIDIA driver is installed and running.\n"})
    ids = finding_ids(check_json(snap))
    assert "kernel-driver-incompatible" in ids and "driver-not-loaded" not in ids


def test_nvidia_smi_alone_still_says_driver_not_loaded(tmp_path):
    snap = make_snapshot(tmp_path / "s", logs={"terminal.log": (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n")})
    assert "driver-not-loaded" in finding_ids(check_json(snap))


def test_ascend_507033_after_e30006_is_one_finding():
    # vllm-project/vllm-ascend#4284 (case s08): the OPP refusal and "Failed to start the device"
    report = check_json(CASES / "s08-ascend-mineru-e30006-opp-verify-aicpu-start-failed")
    (f,) = _by_id(report, "runtime-init-failed")
    assert "E30006" in f["message"] and any("507033" in a for a in _also(f))
    assert "toolkit-runtime-mismatch" not in finding_ids(report)


def test_probe_summary_after_firmware_error_is_kept():
    # intel_vpu firmware ENOENT then the driver-core probe line (case t01): the driver stays
    # unbound, so both findings stand (the cases expect both)
    ids = finding_ids(check_json(CASES / "t01-ivpu-dev-init-firmware-enoent-after-npu-driver-upgrade"))
    assert {"firmware-missing", "driver-probe-failed"} <= ids


def _ev(line_no, rule, causes=(), vendor="nvidia", source="dmesg", **kw):
    ev = {"source": source, "line_no": line_no, "rule": rule, "vendor": vendor,
          "message": f"{source}:{line_no}: {rule}"}
    if causes:
        ev["consequence_of"] = list(causes)
    ev.update(kw)
    return ev


def test_lines_naming_each_others_rules_leave_one_standing():
    a, b = _ev(1, "runtime-init-failed", ["driver-not-loaded"]), _ev(2, "driver-not-loaded", ["runtime-init-failed"])
    apply_consequences([a, b])
    assert [bool(e.get("rule")) for e in (a, b)].count(True) == 1


def test_a_chain_ends_at_the_first_cause():
    root = _ev(1, "kernel-driver-incompatible")
    mid = _ev(2, "driver-probe-failed", ["kernel-driver-incompatible"])
    last = _ev(3, "driver-probe-failed", ["driver-probe-failed"], pci_address="0000:09:00.0")
    apply_consequences([root, mid, last])
    assert root["rule"] and "rule" not in mid and "rule" not in last
    assert mid["consequence_of_line"] == last["consequence_of_line"] == "dmesg:1"
    assert len(root["also"]) == 2


def test_vendorless_lines_relate_only_within_one_log():
    cause = _ev(1, "memlock-limit-low", vendor=None, source="logs/a.log")
    other_log = _ev(1, "runtime-init-failed", ["memlock-limit-low"], vendor=None, source="logs/b.log")
    apply_consequences([cause, other_log])
    assert other_log["rule"] == "runtime-init-failed"


def test_every_consequence_of_names_a_known_rule():
    marked = [e for e in load_catalogs().entries() if e.consequence_of]
    assert len(marked) >= 20
    for e in marked:
        assert e.rule and set(e.consequence_of) <= RULE_IDS, (e.catalog, e.key)


HEAD = '[catalog]\nid = "x"\nsource = "https://x"\n'


def test_catalog_default_applies_to_rule_entries_only(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[catalog]\nid = "x"\nsource = "https://x"\nconsequence_of = ["device-unresponsive"]\n'
                 '[[entry]]\nkey = "a"\npattern = "aaaa"\nmeaning = "m"\nrule = "runtime-init-failed"\n'
                 '[[entry]]\nkey = "b"\npattern = "bbbb"\nmeaning = "m"\nbenign = true\n'
                 '[[entry]]\nkey = "c"\npattern = "cccc"\nmeaning = "m"\nrule = "device-busy"\nconsequence_of = []\n')
    a, b, c = load_catalog_file(str(p)).entries
    assert a.consequence_of == ["device-unresponsive"] and b.consequence_of == [] and c.consequence_of == []


@pytest.mark.parametrize("text", [
    HEAD + '[[entry]]\nkey = "a"\npattern = "aaaa"\nmeaning = "m"\nbenign = true\nconsequence_of = ["device-busy"]\n',
    HEAD + '[[entry]]\nkey = "a"\npattern = "aaaa"\nmeaning = "m"\nrule = "device-busy"\nconsequence_of = "device-busy"\n',
    HEAD + '[[entry]]\nkey = "a"\npattern = "aaaa"\nmeaning = "m"\nrule = "device-busy"\nconsequence_of = ["Not An Id"]\n',
    '[catalog]\nid = "x"\nsource = "https://x"\nconsequence_of = [1]\n',
])
def test_bad_consequence_of_is_one_config_error(tmp_path, text):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_catalog_file(str(p))
    assert "consequence_of" in str(exc.value) and "\n" not in str(exc.value)


def test_a_warning_cause_takes_the_severity_of_the_error_it_absorbed(tmp_path):
    # rknn.toml examples (librknnrt's own wording): the runtime only recommends a newer driver
    # (warning), then rknn_init fails (-3, an error) because of it: the one finding left must
    # still be an error, or the run's exit code would say all is well
    warn = "W RKNN: [09:15:02.411] Current driver version: 0.9.2, recommend to upgrade the driver to the new version: >= 0.9.3\n"
    snap = make_snapshot(tmp_path / "s", logs={"app.log": warn + "rknn_init fail! ret=-3\n"})
    report = check_json(snap)
    (f,) = _by_id(report, "runtime-driver-mismatch")
    assert "runtime-init-failed" not in finding_ids(report)
    assert f["severity"] == "error"
    alone = check_json(make_snapshot(tmp_path / "w", logs={"app.log": warn}))
    (f,) = _by_id(alone, "runtime-driver-mismatch")
    assert f["severity"] == "warning"


# hailo-ai/hailo-rpi5-examples#63 (case f210): hailofilter's dlopen of the post-process .so
# fails (a probe signature, not a catalog line), then its dlsym of `filter` fails
POSTPROC_MISSING = ("Could not load lib /home/pi/hailo-rpi5-examples/basic_pipelines/…/resources/"
                    "libyolo_hailortpp_postprocess.so: cannot open shared object file: No such file or directory\n")
DLSYM_FILTER = ("Cannot load symbol: /lib/aarch64-linux-gnu/gstreamer-1.0/libgsthailotools.so: "
                "undefined symbol: filter\n")


def test_dlsym_failure_after_missing_plugin_is_evidence_of_the_missing_library(tmp_path):
    report = check_json(make_snapshot(tmp_path / "s", logs={"run.log": POSTPROC_MISSING + DLSYM_FILTER}))
    assert "symbol-version-unsatisfied" not in finding_ids(report)
    assert "missing-shared-library" in finding_ids(report)
    ev = next(e for e in report["facts"]["log_events"] if e.get("entry") == "dlsym-entry-point-undefined")
    assert ev["consequence_rule"] == "symbol-version-unsatisfied"
    assert ev["consequence_of_line"] == "logs/run.log:1"


def test_dlsym_failure_alone_still_raises_its_rule(tmp_path):
    report = check_json(make_snapshot(tmp_path / "s", logs={"run.log": DLSYM_FILTER}))
    assert "symbol-version-unsatisfied" in finding_ids(report)


def test_signature_cause_rules_are_the_rules_that_match_them():
    # a signature's cause_rule (probes/*.toml) must be the rule whose log_events match selects it
    from npu_doctor.probes import load_signatures
    from npu_doctor.tomlcompat import tomllib
    rules_dir = Path(__file__).parent.parent / "rules"
    selects = {}
    for path in rules_dir.glob("*.toml"):
        for rule in tomllib.loads(path.read_text()).get("rule", []):
            for m in rule.get("match", []):
                for cond in m.get("when", []):
                    if cond.get("fact") == "it.signature" and "eq" in cond:
                        selects.setdefault(cond["eq"], set()).add(rule["id"])
    sigs = load_signatures()
    with_cause = {s.id: s.fields["cause_rule"] for s in sigs if "cause_rule" in s.fields}
    assert with_cause, "no signature declares a cause_rule"
    for sid, rule in with_cause.items():
        assert rule in RULE_IDS and rule in selects.get(sid, set()), (sid, rule)


# rockchip-linux/rknn-toolkit2#44 (case h304) and #218 (case t05): librknnrt's "failed to malloc
# npu memory" is the finding when nothing else explains it, evidence when the kernel's swiotlb line does
RKNN_MALLOC = "E RKNN: failed to malloc npu memory!, size: 59187712, flags: 0x2\n"


def test_rknn_malloc_failure_alone_raises_runtime_init_failed(tmp_path):
    snap = make_snapshot(tmp_path / "s", logs={"app.log": RKNN_MALLOC})
    (f,) = _by_id(check_json(snap), "runtime-init-failed")
    assert f["subject"] == "rknpu"


def test_rknn_malloc_failure_after_swiotlb_full_is_evidence(tmp_path):
    snap = make_snapshot(
        tmp_path / "s",
        commands=[(["dmesg"], 0, "[  47.025] RKNPU fde40000.npu: swiotlb buffer is full (sz: 6422528 bytes)\n")],
        logs={"app.log": RKNN_MALLOC})
    (f,) = _by_id(check_json(snap), "runtime-init-failed")
    assert "swiotlb" in f["message"]
    assert any("could not allocate a 59187712-byte NPU buffer" in a and "consequence" in a for a in _also(f))
