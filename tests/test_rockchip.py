"""Rockchip RKNPU runtime side: version strings in real ELF files, runtime-log banners of
several runtime versions, the runtime/driver matrix, and `check --snapshot` on real cases."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from npu_doctor.collectors.rknn_runtime import check_failing_below_observed, check_runtime_driver
from npu_doctor.matrices import shipped_matrices as load_matrices
from npu_doctor.parsers.rknn import parse_dist_version, parse_lib_version, parse_runtime_log, rknn_model_header

from conftest import case_path, check_json, fact_values, finding_ids, make_snapshot


def _repo_case(prefix: str) -> Path:
    """A real case kept in this repository (tests/cases/<prefix>-...)."""
    return next((Path(__file__).resolve().parent / "cases").glob(prefix + "-*"))

DATA = Path(__file__).parent / "data" / "rockchip"

# What `strings` prints on the published runtimes (sources in tests/data/rockchip/SOURCES.md).
V160 = "librknnrt version: 1.6.0 (9a7b5d24c@2023-12-13T17:31:11)"
V232_MINI = "librknnmrt version: 2.3.2 (429f97ae6b@2025-04-09T09:11:49)"


def build_so(tmp_path: Path, version_string: str, name: str = "librknnrt.so") -> Path:
    """A real shared object carrying the vendor's version string next to printf formats."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not available")
    src = tmp_path / "rt.c"
    src.write_text(
        '#include <stdio.h>\n'
        'const char *fmt1 = "RKNN Runtime Information, librknnrt version: %s";\n'
        f'const char ver[] __attribute__((used)) = "{version_string}";\n'
        'int rknn_init(void) { printf(fmt1, ver); return 0; }\n')
    out = tmp_path / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_version_string_read_from_real_elf(tmp_path):
    so = build_so(tmp_path, V160)
    data = so.read_bytes()
    assert data[:4] == b"\x7fELF"
    assert parse_lib_version(data) == {"library": "librknnrt", "version": "1.6.0",
                                       "build": "9a7b5d24c@2023-12-13T17:31:11"}


def test_mini_runtime_version_and_no_version():
    assert parse_lib_version(b"\x00junk\x00" + V232_MINI.encode() + b"\x00") == {
        "library": "librknnmrt", "version": "2.3.2", "build": "429f97ae6b@2025-04-09T09:11:49"}
    # a format string alone is not a version
    assert parse_lib_version(b"librknnrt version: %s\x00") is None


@pytest.mark.parametrize("name,expect", [
    ("lite2-2.3.0-librknnrt-1.4.0.log",
     {"runtime": ("librknnrt", "1.4.0", "a10f100eb@2022-09-09T09:07:14"), "driver": "0.9.8",
      "lite2": "2.3.0", "invalid": 6}),
    ("lite2-2.3.0-librknnrt-1.3.0.log",
     {"runtime": ("librknnrt", "1.3.0", "c193be371@2022-05-04T20:16:33"), "driver": "0.7.2",
      "lite2": "2.3.0", "invalid": 6}),
    ("librknnmrt-2.3.2-rv1106.log",
     {"runtime": ("librknnmrt", "2.3.2", "429f97ae6b@2025-04-09T09:11:49"), "driver": "0.9.2",
      "lite2": None, "invalid": None}),
])
def test_runtime_log_banners_colon_and_comma_forms(name, expect):
    got = parse_runtime_log((DATA / name).read_text())
    rt = got["runtime"]
    assert (rt["library"], rt["version"], rt["build"]) == expect["runtime"]
    assert got["driver_version"] == expect["driver"]
    assert got.get("toolkit_lite2_version") == expect["lite2"]
    assert got.get("invalid_model_version") == expect["invalid"]


def test_rkllm_log():
    got = parse_runtime_log((DATA / "rkllm-1.1.2-driver-0.8.2.log").read_text())
    assert got["rkllm"] == {"version": "1.1.2", "driver_version": "0.8.2", "platform": "RK3588"}
    assert got["rkllm_driver_min"] == "0.9.7"
    assert got["driver_version"] == "0.8.2"


def test_dist_version_and_model_header():
    assert parse_dist_version("rknn_toolkit_lite2-2.3.0.dist-info") == "2.3.0"
    assert parse_dist_version("x.dist-info", "Metadata-Version: 2.1\nName: rkllm\nVersion: 1.1.4\n\nbody") == "1.1.4"
    assert rknn_model_header(b"RKNN\x00\x00\x00\x00\x06\x00\x00\x00rest") == 6
    assert rknn_model_header(b"\x7fELF....") is None


@pytest.fixture(scope="module")
def matrix():
    m = load_matrices()
    rows = m["rknn-runtime-driver"]
    assert all(r.get("source") and r.get("date") for r in rows)
    return rows, m["rknpu-driver-known"][0]["newest"]


def test_matrix_rows(matrix):
    rows, newest = matrix
    ok = check_runtime_driver("librknnrt", "2.3.2", "0.9.8", rows, newest)
    assert ok["status"] == "ok"
    # a driver newer than any row is never a mismatch
    future = check_runtime_driver("librknnrt", "2.3.2", "0.9.9", rows, newest)
    assert future["status"] == "not-in-matrix" and "newer" in future["detail"]
    assert check_runtime_driver("librknnrt", "3.0.0", "0.9.8", rows, newest)["status"] == "not-in-matrix"
    # below an observed minimum: unknown, not a mismatch
    assert check_runtime_driver("librknnrt", "2.3.2", "0.9.2", rows, newest)["status"] == "not-in-matrix"
    bad = check_runtime_driver("rkllm", "1.1.2", "0.8.2", rows, newest)
    assert bad["status"] == "mismatch" and bad["driver_min"] == "0.9.7" and bad["kind"] == "required"


def test_below_observed_driver_is_a_mismatch_only_with_failing_jobs(matrix):
    rows, newest = matrix
    rec = check_runtime_driver("librknnrt", "2.3.2", "0.7.2", rows, newest)
    assert rec["status"] == "not-in-matrix" and rec["below_observed"]
    # an old driver alone stays unknown
    assert check_failing_below_observed(rec, [])["status"] == "not-in-matrix"
    # the line of airockchip/rknn-toolkit2#447 (tests/cases/z209-*): the job never completed
    line = ("E RKNN: [07:24:22.771] failed to submit!, op id: 1, op name: Conv:Conv_0, flags: 0x1, "
            "task start: 1301, task number: 68, run task counter: 0, int status: 0")
    ev = {"signature": "catalog:rknn/submit-failed", "source": "logs/app.log", "line_no": 1, "line": line}
    out = check_failing_below_observed(rec, [ev])
    assert out["status"] == "mismatch" and out["kind"] == "observed-failing" and out["failed_line"] == line
    # a driver inside the observed range is not touched
    ok = check_runtime_driver("librknnrt", "2.3.2", "0.9.8", rows, newest)
    assert check_failing_below_observed(ok, [ev]) == ok


def test_c1_06_model_v6_is_a_runtime_problem_not_the_driver():
    rep = check_json(case_path("c1-06"))
    ids = finding_ids(rep)
    assert "toolkit-runtime-mismatch" in ids and "runtime-driver-mismatch" not in ids
    f = rep["facts"]
    assert f["sdks"]["librknnrt"] == {"version": "1.4.0", "build": "a10f100eb@2022-09-09T09:07:14"}
    assert f["sdks"]["rknn_toolkit_lite2"]["version"] == "2.3.0"
    assert f["drivers"]["rknpu"]["version"] == "0.9.8"
    msg = [x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch"][0]["message"]
    assert "1.4.0" in msg and "2.3.0" in msg and "0.9.8" in msg


def test_c3_06_driver_fact_from_mini_runtime_log():
    rep = check_json(case_path("c3-06"))
    assert rep["facts"]["drivers"]["rknpu"]["version"] == "0.9.2"
    assert rep["facts"]["sdks"]["librknnmrt"]["version"] == "2.3.2"
    assert "runtime-driver-mismatch" not in finding_ids(rep)


def test_c1_04_driver_096_facts():
    rep = check_json(case_path("c1-04"))
    assert fact_values(rep["facts"], "drivers.rknpu.version") == ["0.9.6"]
    assert "0.9.6" in fact_values(rep["facts"], "accelerators.*.driver.version")
    names = [p["name"] for p in rep["facts"]["packages"]["selected"]]
    assert "linux-image-rock-5b" in names
    assert not {"runtime-driver-mismatch", "no-accelerator-found"} & finding_ids(rep)


def _snapshot(tmp_path: Path, log_name: str = None) -> Path:
    snap = make_snapshot(tmp_path / "snap", files={"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'},
                         logs={log_name: DATA / log_name} if log_name else None)
    (snap / "fs/usr/lib").mkdir(parents=True)
    return snap


def test_snapshot_library_file_and_python_dist(tmp_path):
    snap = _snapshot(tmp_path)
    shutil.copy(build_so(tmp_path, V160), snap / "fs/usr/lib/librknnrt.so")
    dist = snap / "fs/usr/local/lib/python3.8/dist-packages/rknn_toolkit_lite2-2.3.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rknn-toolkit-lite2\nVersion: 2.3.2\n")
    dbg = snap / "fs/sys/kernel/debug/rknpu"
    dbg.mkdir(parents=True)
    (dbg / "version").write_text("RKNPU driver: v0.9.8\n")
    rep = check_json(snap)
    lib = rep["facts"]["sdks"]["librknnrt"]
    assert (lib["version"], lib["build"], lib["path"]) == ("1.6.0", "9a7b5d24c@2023-12-13T17:31:11",
                                                           "/usr/lib/librknnrt.so")
    assert rep["facts"]["sdks"]["rknn_toolkit_lite2"]["version"] == "2.3.2"
    # toolkit 2.3 models need a 2.3 runtime: warned from the versions alone (no log)
    tk = [x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch"]
    assert tk and "2.3.2" in tk[0]["message"] and "1.6.0" in tk[0]["message"]


def test_snapshot_rkllm_driver_too_low(tmp_path):
    snap = _snapshot(tmp_path, "rkllm-1.1.2-driver-0.8.2.log")
    rep = check_json(snap)
    found = [x for x in rep["findings"] if x["id"] == "runtime-driver-mismatch"]
    assert any(x["severity"] == "error" and "0.9.7" in x["message"] and "0.8.2" in x["message"]
               for x in found), found
    assert rep["facts"]["sdks"]["rkllm"]["version"] == "1.1.2"


def test_snapshot_rknn_server_from_other_release(tmp_path):
    snap = _snapshot(tmp_path)
    shutil.copy(build_so(tmp_path, V160), snap / "fs/usr/lib/librknnrt.so")
    (snap / "fs/usr/bin").mkdir(parents=True)
    # rknn_server 2.3.2's own string (airockchip/rknn-toolkit2 release binaries, matrices.md §2.1)
    (tmp_path / "srv").mkdir()
    server = build_so(tmp_path / "srv", "rknn_server version: 2.3.2 (1842325 build@2025-03-30T09:54:34)",
                      "rknn_server")
    shutil.copy(server, snap / "fs/usr/bin/rknn_server")
    rep = check_json(snap)
    assert rep["facts"]["sdks"]["rknn_server"]["version"] == "2.3.2"
    f = [x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch" and x["subject"] == "rknn_server"]
    assert f and f[0]["severity"] == "warning" and "1.6.0" in f[0]["message"]


def test_compat_records_join_either_form():
    from npu_doctor.facts import Facts
    from npu_doctor.matrices import set_compat as add_compat
    as_table, as_list = Facts(), Facts()
    as_list.data["compat"] = [{"matrix": "other", "status": "ok"}]
    for f in (as_table, as_list):
        add_compat(f, "rknn-driver-librknnrt", {"matrix": "rknn-runtime-driver", "status": "ok"}, "log")
    assert as_table.data["compat"]["rknn-driver-librknnrt"]["status"] == "ok"
    assert as_list.data["compat"][1]["key"] == "rknn-driver-librknnrt"


def test_model_banner_forms():
    got = parse_runtime_log((DATA / "lite2-librknnrt-2.0.0b0-driver-0.9.5.log").read_text())
    assert (got["model_version"], got["model_toolkit_version"]) == (6, "2.0.0b0+9bab5682")
    assert (got["runtime"]["version"], got["driver_version"]) == ("2.0.0b0", "0.9.5")
    got = parse_runtime_log((DATA / "rkllm-1.1.2-lite2-2.2.0-librknnrt-2.1.0-model-2.2.0.log").read_text())
    assert got["model_toolkit_version"] == "2.2.0" and got["runtime"]["version"] == "2.1.0"
    assert got["rkllm"] == {"version": "1.1.2", "driver_version": "0.9.8", "platform": "RK3588"}


def test_snapshot_model_newer_than_runtime_is_a_warning(tmp_path):
    rep = check_json(_snapshot(tmp_path, "rkllm-1.1.2-lite2-2.2.0-librknnrt-2.1.0-model-2.2.0.log"))
    f = [x for x in rep["findings"] if x["id"] == "toolkit-runtime-mismatch"]
    assert f and all(x["severity"] == "warning" for x in f), f
    assert any("2.2.0" in x["message"] and "2.1.0" in x["message"] for x in f)
    # rkllm 1.1.2 on rknpu 0.9.8 is fine, librknnrt 2.1.0 on 0.9.8 too
    assert "runtime-driver-mismatch" not in finding_ids(rep)


def test_toolkit_local_version_splits_build_hash():
    # 'I rknn-toolkit2 version: 2.0.0b0+9bab5682': the version fact is the token, the commit
    # after '+' goes to the sibling build (contract: no build hashes in a version fact)
    rep = check_json(_repo_case("x202"))
    assert rep["facts"]["sdks"]["rknn_toolkit2"] == {"version": "2.0.0b0", "build": "9bab5682"}
