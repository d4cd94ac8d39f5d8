"""NVIDIA Jetson: /etc/nv_tegra_release of L4T 32/35/36, JetPack and TensorRT packages, cuDNN
header, nvgpu load, the JetPack<->L4T matrix, and check --snapshot on case c2-10.

Real files: tests/data/jetson/ (sources in SOURCES.md) and ../shared/cases.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor.matrices import matrix_rows as load_matrix
from npu_doctor.parsers.jetson import (
    gpu_load_percent,
    jetpack_version,
    parse_cudnn_header,
    parse_nv_tegra_release,
    tensorrt_from_libname,
)

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot

DATA = Path(__file__).parent / "data" / "jetson"
R35_PACKAGES = ("nvidia-jetpack\t5.1.2-b104\n"
                "tensorrt\t8.5.2.2-1+cuda11.4\n"
                "nvidia-l4t-core\t35.4.1-20230801124926\n")


@pytest.mark.parametrize("name,version,board", [
    ("nv_tegra_release-r32.5.1", "32.5.1", "t186ref"),
    ("nv_tegra_release-r32.7.6", "32.7.6", "t210ref"),
    ("nv_tegra_release-r35.4.1", "35.4.1", "t186ref"),
    ("nv_tegra_release-r36.4.3", "36.4.3", "generic"),
])
def test_nv_tegra_release_generations(name, version, board):
    out = parse_nv_tegra_release((DATA / name).read_text())
    assert out["version"] == version and out["board"] == board and out["kind"] == "release"
    assert out["eabi"] == "aarch64"


def test_nv_tegra_release_r36_extra_lines():
    out = parse_nv_tegra_release((DATA / "nv_tegra_release-r36.4.3").read_text())
    assert out["kernel_variant"] == "oot"
    assert out["gcid"] == "38968081"
    assert out["date"] == "Wed Jan 8 01:49:37 UTC 2025"


def test_nv_tegra_release_of_case_c2_10():
    out = parse_nv_tegra_release((case_path("c2-10") / "fs/etc/nv_tegra_release").read_text())
    # "R32 ... REVISION: 1.0" is L4T 32.1.0 (not 32.1 or 32.10)
    assert out["version"] == "32.1.0" and out["revision"] == "1.0"


def test_nv_tegra_release_garbage():
    with pytest.raises(ValueError):
        parse_nv_tegra_release("Ubuntu 20.04\n")


def test_cudnn_header_forms():
    # cudnn_version.h (cuDNN 8+) and cudnn.h (<= 7) use the same defines, spacing varies
    assert parse_cudnn_header("#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 6\n#define CUDNN_PATCHLEVEL 0\n") == "8.6.0"
    assert parse_cudnn_header("#define CUDNN_MAJOR      5\n#define CUDNN_MINOR      1\n"
                              "#define CUDNN_PATCHLEVEL 10\n--\n#define CUDNN_VERSION    "
                              "(CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n") == "5.1.10"
    assert parse_cudnn_header("#define CUDNN_MAJOR 8\n") is None


def test_tensorrt_and_load():
    assert tensorrt_from_libname("/usr/lib/aarch64-linux-gnu/libnvinfer.so.8.5.2") == "8.5.2"
    assert tensorrt_from_libname("/usr/lib/aarch64-linux-gnu/libnvinfer.so.10.3.0") == "10.3.0"
    assert tensorrt_from_libname("/usr/lib/aarch64-linux-gnu/libnvinfer.so.8") is None
    assert gpu_load_percent("437\n") == 43.7
    assert gpu_load_percent("0") == 0 and gpu_load_percent("1000") == 100
    assert gpu_load_percent("4294967295") is None and gpu_load_percent("x") is None


def test_matrix_rows_have_sources_and_known_pairs():
    rows = {r["l4t"]: r for r in load_matrix("jetpack-l4t")}
    assert all(r.get("source") and r.get("date") for r in rows.values())
    assert rows["32.1.0"]["jetpack"] == "4.2"
    assert rows["35.1.0"]["jetpack"] == "5.0.2"  # minor numbers do not line up
    assert rows["35.2.1"]["jetpack"] == "5.1"
    assert rows["36.4.3"]["jetpack"] == "6.2"


# -- check --snapshot -----------------------------------------------------------------------------
def test_case_c2_10_facts():
    rep = check_json(case_path("c2-10"))
    facts = rep["facts"]
    assert fact_values(facts, "sdks.l4t.version") == ["32.1.0"]
    assert "jetson" in fact_values(facts, "accelerators.*.vendor")
    assert fact_values(facts, "sdks.l4t.jetpack") == ["4.2"]
    ids = finding_ids(rep)
    assert "runtime-driver-mismatch" not in ids and "version-not-in-matrix" not in ids


def _snapshot(tmp: Path, files=None, commands=None) -> Path:
    return make_snapshot(tmp, files=files, commands=commands or None)


def _r35(tmp: Path, packages: str = R35_PACKAGES, extra=None) -> Path:
    files = {"/etc/nv_tegra_release": (DATA / "nv_tegra_release-r35.4.1").read_text(),
             "/usr/lib/aarch64-linux-gnu/libnvinfer.so.8.5.2": "",
             "/sys/devices/gpu.0/load": "437\n"}
    files.update(extra or {})
    return _snapshot(tmp, files, [{"argv": ["dpkg-query", "-W"], "returncode": 0, "stdout": packages}])


def test_snapshot_r35_consistent_board(tmp_path):
    rep = check_json(_r35(tmp_path))
    facts = rep["facts"]
    assert fact_values(facts, "sdks.l4t.version") == ["35.4.1"]
    assert fact_values(facts, "sdks.jetpack.version") == ["5.1.2"]
    assert fact_values(facts, "sdks.jetpack.build") == ["5.1.2-b104"]
    assert fact_values(facts, "sdks.tensorrt.version") == ["8.5.2"]
    assert fact_values(facts, "sdks.l4t.jetpack") == ["5.1.2"]
    jet = [a for a in facts["accelerators"] if a["vendor"] == "jetson"]
    assert len(jet) == 1 and jet[0]["utilization_percent"] == 43.7
    ids = finding_ids(rep)
    assert "runtime-driver-mismatch" not in ids and "version-not-in-matrix" not in ids


def test_snapshot_jetpack_package_of_another_release(tmp_path):
    pk = R35_PACKAGES.replace("nvidia-jetpack\t5.1.2-b104", "nvidia-jetpack\t5.1.1-b56")
    rep = check_json(_r35(tmp_path, pk))
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and f[0]["severity"] == "warning"
    assert "5.1.1" in f[0]["message"] and "35.4.1" in f[0]["message"] and "5.1.2" in f[0]["message"]


def test_snapshot_tensorrt_of_another_jetpack(tmp_path):
    snap = _r35(tmp_path, extra={"/usr/lib/aarch64-linux-gnu/libnvinfer.so.8.5.2": "",
                                 "/usr/lib/aarch64-linux-gnu/libnvinfer.so.10.3.0": ""})
    rep = check_json(snap)
    msgs = [f["message"] for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert any("TensorRT 10.3.0" in m and "8.5.2" in m for m in msgs)


def test_jetpack_package_versions_of_every_generation():
    # JetPack 4/5 put the build after a '-', JetPack 6 after a '+' (apt show nvidia-jetpack)
    assert jetpack_version("4.6-b197") == "4.6"
    assert jetpack_version("5.1.2-b104") == "5.1.2"
    assert jetpack_version("6.2+b77") == "6.2"
    assert jetpack_version("6.2.1+b38") == "6.2.1"
    assert jetpack_version("6.0") == "6.0"


def test_snapshot_jetpack6_package_matches_its_l4t(tmp_path):
    # "6.2+b77" is JetPack 6.2, the release of L4T 36.4.3: no mismatch
    pk = "nvidia-jetpack\t6.2+b77\nnvidia-l4t-core\t36.4.3-20250107174145\n"
    snap = _snapshot(tmp_path, {"/etc/nv_tegra_release": (DATA / "nv_tegra_release-r36.4.3").read_text()},
                     [{"argv": ["dpkg-query", "-W"], "returncode": 0, "stdout": pk}])
    rep = check_json(snap)
    assert fact_values(rep["facts"], "sdks.jetpack.version") == ["6.2"]
    assert fact_values(rep["facts"], "sdks.jetpack.build") == ["6.2+b77"]
    assert "runtime-driver-mismatch" not in finding_ids(rep)


def test_snapshot_unknown_l4t_is_info(tmp_path):
    text = (DATA / "nv_tegra_release-r36.4.3").read_text().replace("REVISION: 4.3", "REVISION: 9.0")
    rep = check_json(_snapshot(tmp_path, {"/etc/nv_tegra_release": text}))
    ids = finding_ids(rep)
    assert "version-not-in-matrix" in ids and "runtime-driver-mismatch" not in ids
    assert fact_values(rep["facts"], "sdks.l4t.jetpack_family") == ["6.x"]


def test_snapshot_invalid_load(tmp_path):
    rep = check_json(_r35(tmp_path, extra={"/sys/devices/gpu.0/load": "4294967295\n"}))
    assert "sensor-reading-invalid" in finding_ids(rep)
    jet = [a for a in rep["facts"]["accelerators"] if a["vendor"] == "jetson"]
    assert "utilization_percent" not in jet[0]


def test_nvidia_smi_on_jetson_does_not_add_a_discrete_gpu(tmp_path):
    # L4T 36 ships nvidia-smi for the iGPU; its records belong to the jetson probe
    smi = (Path(__file__).parent / "data" / "nvidia" / "smi-q-566.36-rtx4070-laptop.txt").read_text()
    snap = _snapshot(tmp_path, {"/etc/nv_tegra_release": (DATA / "nv_tegra_release-r36.4.3").read_text()},
                     [{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": smi}])
    rep = check_json(snap)
    vendors = fact_values(rep["facts"], "accelerators.*.vendor")
    assert "nvidia" not in vendors and "jetson" in vendors


def test_snapshot_unreadable_release_file_is_a_probe_error(tmp_path):
    rep = check_json(_snapshot(tmp_path, {"/etc/nv_tegra_release": "corrupted\n"}))
    probe = next(p for p in rep["probes"] if p["id"] == "jetson")
    assert probe["status"] == "error" and "nv_tegra_release" in probe["error"]
    assert "probe-failed" in finding_ids(rep)


# -- the host's L4T known only as its JetPack; container images of another L4T release ------------
# Real lines: dusty-nv/jetson-containers#164 (apt show nvidia-jetpack on JetPack 5.0.1, an r32.6.1
# image), #108 (JETSON_JETPACK=4.6, an r32.6.1 image), #126 (an r32.5.0 image on an R32.3.1 host).
JP501_DEPENDS = ("Depends: nvidia-cuda (= 5.0.1-b118), nvidia-opencv (= 5.0.1-b118), nvidia-cudnn8 (= 5.0.1-b118), "
                 "nvidia-tensorrt (= 5.0.1-b118), nvidia-container (= 5.0.1-b118), nvidia-vpi (= 5.0.1-b118), "
                 "nvidia-nsight-sys (= 5.0.1-b118), nvidia-l4t-jetson-multimedia-api (>> 34.1-0), "
                 "nvidia-l4t-jetson-multimedia-api (<< 34.2-0)\n")
R32_IMAGE = "docker run -it --rm --net=host --runtime nvidia nvcr.io/nvidia/l4t-pytorch:r32.6.1-pth1.8-py3\n"


def test_jetpack_l4t_release_of_every_generation():
    from npu_doctor.collectors.jetson import jetpack_l4t_release
    rows = load_matrix("jetpack-l4t")
    want = {"4.2": "32", "4.6": "32", "4.6.1": "32", "5.0.1": "34", "5.0.2": "35", "5.1": "35",
            "5.1.2": "35", "6.0": "36", "6.2": "36", "7.0": "38",
            "4.9": "32", "5.1.9": "35", "6.9": "36"}  # the last three: not rows, by the major
    assert {jp: jetpack_l4t_release(jp, rows) for jp in want} == want
    assert jetpack_l4t_release("3.3", rows) is None and jetpack_l4t_release("5", rows) is None


def test_r32_image_on_a_jetpack5_host_known_from_apt_show(tmp_path):
    rep = check_json(make_snapshot(tmp_path, logs={"docker.log": R32_IMAGE + JP501_DEPENDS}))
    assert fact_values(rep["facts"], "sdks.jetpack.l4t_release") == ["34"]
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and "r32.6.1" in f[0]["message"] and "JetPack 5.0.1" in f[0]["message"]


def test_r32_image_on_its_own_jetpack_is_no_mismatch(tmp_path):
    log = ("$printenv | grep JETPACK\nJETSON_JETPACK=4.6\n"
           "$ sudo docker run --rm --runtime nvidia -it nvcr.io/nvidia/l4t-pytorch:r32.6.1-pth1.9-py3\n")
    rep = check_json(make_snapshot(tmp_path, logs={"session.log": log}))
    assert fact_values(rep["facts"], "sdks.jetpack.version") == ["4.6"]
    assert "runtime-driver-mismatch" not in finding_ids(rep)


def test_container_newer_than_host_within_r32_is_a_warning_older_is_not(tmp_path):
    image = ("docker run --gpus all --runtime nvidia -it --ipc=host --ulimit memlock=-1 --ulimit "
             "stack=67108864 --rm dustynv/ros:foxy-pytorch-l4t-r32.5.0\n")
    r3231 = "# R32 (release), REVISION: 3.1, GCID: 18284527, BOARD: t186ref, EABI: aarch64,\n"
    rep = check_json(make_snapshot(tmp_path / "a", logs={"docker.log": image + r3231}))
    f = [f for f in rep["findings"] if f["id"] == "runtime-driver-mismatch"]
    assert len(f) == 1 and f[0]["severity"] == "warning" and "r32.5.0" in f[0]["message"]
    r3261 = ("# R32 (release), REVISION: 6.1, GCID: 27863751, BOARD: t186ref, EABI: aarch64, "
             "DATE: Mon Jul 26 19:36:31 UTC 2021\n")
    rep = check_json(make_snapshot(tmp_path / "b", logs={"docker.log": image + r3261}))
    assert "runtime-driver-mismatch" not in finding_ids(rep)
