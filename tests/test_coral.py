"""Google Coral: compiler/runtime version parsing across the 2.x -> 14.1 renumbering, apex
kernel-log and DKMS build-log signatures, and `check --snapshot` on the real cases c1-12,
c1-13, c5-01 and c5-05.

Samples under tests/data/coral/ are verbatim public outputs (tests/data/coral/SOURCE).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.check import Config, run_check
from npu_doctor.host import SnapshotHost
from npu_doctor.parsers import coral as P

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot

DATA = Path(__file__).resolve().parent / "data" / "coral"


def data(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name,version,release", [
    ("edgetpu_compiler_16.0.txt", "16.0.384591198", "16.0"),
    ("edgetpu_compiler_14.1.txt", "14.1.317412892", "14.1"),
    ("edgetpu_compiler_2.1.txt", "2.1.302470888", "2.1"),
])
def test_compiler_versions(name, version, release):
    d = P.parse_compiler_version(data(name))
    assert d["version"] == version and d["release"] == release


def test_compiler_order_across_renumbering():
    # 2.1.302470888 was released before 14.1.317412892, although 2 < 14 and 302470888 > 14
    vs = ["16.0.384591198", "2.1.302470888", "14.1.317412892", "2.0.267685300"]
    assert sorted(vs, key=P.compiler_order) == ["2.0.267685300", "2.1.302470888",
                                                "14.1.317412892", "16.0.384591198"]


def test_compiler_version_rejects_other_text():
    with pytest.raises(ValueError):
        P.parse_compiler_version(data("detect_image_runtime_14_vs_13.log"))


def test_runtime_refusal_and_levels():
    assert P.package_runtime_mismatch(data("detect_image_runtime_14_vs_13.log")) == {
        "package": 14, "runtime": 13}
    assert P.package_runtime_mismatch(data("edgetpu_compiler_16.0.txt")) is None
    assert P.runtime_level("BuildLabel(COMPILER=6.3.0 20170516,DATE=redacted,TIME=redacted,"
                           "CL_NUMBER=291256449), RuntimeVersion(14)") == 14


def test_dkms_header():
    first = data("dkms_make_gasket_6.12.log").splitlines()[0]
    assert P.parse_dkms_header(first) == {"module": "gasket", "version": "1.0",
                                          "kernel": "6.12.0-custom", "arch": "x86_64"}
    assert P.kernel_major_minor("6.12.0-custom") == (6, 12)
    assert P.kernel_major_minor("garbage") is None
    # DKMS 3.x names the dkms release and joins module/version with '/'
    # (github.com/KyleGospo/gasket-dkms/issues/25)
    dkms3 = ("DKMS (dkms-3.3.0) make.log for gasket/0.0.git.264.d1a28bc0 for kernel "
             "6.19.7-200.fc43.x86_64 (x86_64)")
    assert P.parse_dkms_header(dkms3) == {"module": "gasket", "version": "0.0.git.264.d1a28bc0",
                                          "kernel": "6.19.7-200.fc43.x86_64", "arch": "x86_64"}


# -- cases ------------------------------------------------------------------------------------
def test_case_c1_13_ram_enable_timeout_is_device_unresponsive():
    rep = check_json(case_path("c1-13"))
    ids = finding_ids(rep)
    assert "device-unresponsive" in ids and "no-accelerator-found" not in ids
    f = rep["facts"]
    assert fact_values(f, "accelerators.*.vendor") == ["coral"]
    assert fact_values(f, "accelerators.*.pci_address") == ["0000:01:00.0"]
    du = [x for x in rep["findings"] if x["id"] == "device-unresponsive"]
    assert any("12000 ms" in x["message"] for x in du)
    assert any("/sys/bus/pci/devices/0000:01:00.0/remove" in fx["text"]
               for x in du for fx in x["fixes"])


def test_case_c5_01_gasket_no_llseek_on_6_12():
    rep = check_json(case_path("c5-01"))
    ids = finding_ids(rep)
    assert "kernel-driver-incompatible" in ids
    assert not ids & {"no-accelerator-found", "firmware-missing", "runtime-driver-mismatch"}
    kdi = [x for x in rep["findings"] if x["id"] == "kernel-driver-incompatible"]
    assert len(kdi) == 1
    assert "6.12.0-custom" in kdi[0]["message"] and "no_llseek" in kdi[0]["message"]
    assert any("https://github.com/google/gasket-driver/issues/36" == fx["text"] for fx in kdi[0]["fixes"])


def test_case_c5_05_package_needs_runtime_14():
    rep = check_json(case_path("c5-05"))
    ids = finding_ids(rep)
    assert "toolkit-runtime-mismatch" in ids
    assert not ids & {"runtime-driver-mismatch", "no-accelerator-found", "device-unresponsive",
                      "kernel-driver-incompatible"}
    trm = next(x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch")
    assert "14" in trm["message"] and "13" in trm["message"]
    assert any("edgetpu_compiler -m 13" in fx["text"] for fx in trm["fixes"])
    assert "libedgetpu" not in rep["facts"].get("sdks", {})  # runtime level 13 is not a package version


def test_case_c1_12_apex_without_thermal_attributes_is_not_a_coral_fault():
    rep = check_json(case_path("c1-12"))
    ids = finding_ids(rep)
    assert not ids & {"thermal-throttling", "device-unresponsive", "kernel-driver-incompatible",
                      "toolkit-runtime-mismatch"}
    # the apex attribute files of this capture are empty: no driver version is invented
    assert "apex" not in rep["facts"].get("drivers", {})


# -- constructed snapshots --------------------------------------------------------------------
def _snapshot(tmp_path, dpkg=None, files=None):
    listing = "".join(f"{k}\t{v}\n" for k, v in (dpkg or {}).items())
    return make_snapshot(tmp_path, files=files,
                         commands=[(["dpkg-query", "-W"], 0, listing)] if dpkg else [])


def _run(snap):
    res = run_check(SnapshotHost(str(snap)), Config.load())
    return res.facts.data, [f.to_json() for f in res.findings]


def test_module_and_package_versions(tmp_path):
    snap = _snapshot(tmp_path, dpkg={"gasket-dkms": "1.0-18", "libedgetpu1-std": "16.0",
                                     "edgetpu-compiler": "16.0"},
                     files={"/sys/module/gasket/version": "1.1.4\n", "/sys/module/apex/version": "1.1\n"})
    facts, findings = _run(snap)
    assert facts["drivers"]["gasket"]["version"] == "1.1.4"
    assert facts["drivers"]["apex"]["version"] == "1.1"
    assert facts["drivers"]["gasket"]["package"] == {"name": "gasket-dkms", "version": "1.0-18"}
    assert facts["sdks"]["libedgetpu"]["version"] == "16.0"
    assert facts["compat"]["edgetpu-compiler-runtime"]["status"] == "ok"


def test_compiler_newer_than_runtime(tmp_path):
    snap = _snapshot(tmp_path, dpkg={"libedgetpu1-max": "15.0", "edgetpu-compiler": "16.0"})
    facts, findings = _run(snap)
    c = facts["compat"]["edgetpu-compiler-runtime"]
    assert (c["status"], c["package_runtime"], c["host_runtime"]) == ("mismatch", 14, 13)
    trm = [f for f in findings if f["id"] == "toolkit-runtime-mismatch"]
    assert trm and trm[0]["severity"] == "warning" and "-m 13" in trm[0]["message"]


def test_unknown_future_runtime_is_info(tmp_path):
    snap = _snapshot(tmp_path, dpkg={"libedgetpu1-std": "17.0", "edgetpu-compiler": "16.0"})
    facts, findings = _run(snap)
    ids = {f["id"]: f for f in findings}
    assert "toolkit-runtime-mismatch" not in ids
    assert ids["version-not-in-matrix"]["severity"] == "info"
    assert "libedgetpu 17.0" in ids["version-not-in-matrix"]["message"]


def test_stock_gasket_dkms_on_6_12_without_build_log(tmp_path):
    # Debian 6.12.12 (google/gasket-driver #43) with the stock gasket-dkms 1.0-18, apex not loaded
    snap = _snapshot(tmp_path, dpkg={"gasket-dkms": "1.0-18"},
                     files={"/proc/sys/kernel/osrelease": "6.12.12-amd64\n"})
    facts, findings = _run(snap)
    if facts.get("kernel", {}).get("release") != "6.12.12-amd64":
        pytest.skip("kernel.release collector not present in this tree")
    kdi = [f for f in findings if f["id"] == "kernel-driver-incompatible"]
    assert kdi and kdi[0]["severity"] == "warning" and "no_llseek" in kdi[0]["message"]
    # the same package on 6.1 is fine
    tmp2 = tmp_path / "b"
    tmp2.mkdir()
    facts, findings = _run(_snapshot(tmp2, dpkg={"gasket-dkms": "1.0-18"},
                                     files={"/proc/sys/kernel/osrelease": "6.1.0-28-amd64\n"}))
    assert "kernel-driver-incompatible" not in {f["id"] for f in findings}


def test_compiler_2_1_is_ordered_before_14_1_not_numerically(tmp_path):
    # edgetpu_compiler 2.1.302470888 (google-coral/edgetpu #60) is older than 14.1.317412892:
    # it targets at most runtime 13, which libedgetpu 15.0 implements -> ok, not unknown
    snap = _snapshot(tmp_path, dpkg={"libedgetpu1-std": "15.0", "edgetpu-compiler": "2.1.302470888-1"})
    facts, findings = _run(snap)
    c = facts["compat"]["edgetpu-compiler-runtime"]
    assert c["status"] == "ok" and c["host_runtime"] == 13
    assert "toolkit-runtime-mismatch" not in {f["id"] for f in findings}


def test_community_libedgetpu_package_version():
    from npu_doctor.collectors.coral import _upstream
    assert _upstream("16.0tf2.17.0-1") == "16.0" and _upstream("16.0") == "16.0"
