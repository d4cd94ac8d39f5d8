"""The shared-library preflight end to end: the `libraries` probe, its rules, its log
signatures, real vendor wheels from PyPI, and the issue's done-when (OpenVINO 2024.4.0)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from npu_doctor.collectors.logs import match_signatures
from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.linker.elf import read_elf
from npu_doctor.linker.ldso import Resolver
from npu_doctor.probes import load_signatures, load_specs
from npu_doctor.rules import load_rules

from conftest import REPO, case_path, check_json, finding_ids, make_snapshot, run_cli


def _repo_case(prefix: str) -> Path:
    """A real case kept in this repository (tests/cases/<prefix>-...)."""
    return next((Path(__file__).resolve().parent / "cases").glob(prefix + "-*"))

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc not installed")


def cc(out: Path, src: str, *flags: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.with_suffix(out.suffix + ".c")
    c.write_text(src)
    subprocess.run([GCC, "-shared", "-fPIC", "-o", str(out), str(c), *flags], check=True,
                   capture_output=True)
    c.unlink()
    return out


def write_probe_override(d: Path, globs) -> Path:
    """A --probes DIR whose `libraries` spec (same id, so it replaces the shipped one) looks
    at `globs`, with the shipped remedy table."""
    from npu_doctor.tomlcompat import tomllib
    shipped = tomllib.loads((REPO / "probes/libraries.toml").read_text())["probe"][0]["args"]
    d.mkdir(parents=True, exist_ok=True)
    lines = ['[[probe]]', 'id = "libraries"', 'override = true', 'area = "libraries"', 'collector = "libraries"',
             'timeout_s = 60', '[probe.args]', 'python_distributions = []',
             '[[probe.args.location]]', 'sdk = "testsdk"', f"globs = {json.dumps(list(globs))}"]
    for row in shipped["remedy"]:
        lines += ["[[probe.args.remedy]]", f"match = {json.dumps(row['match'])}",
                  f"text = {json.dumps(row['text'])}"]
    (d / "libraries.toml").write_text("\n".join(lines) + "\n")
    return d


def ldconfig_p(*entries) -> str:
    body = "".join(f"\t{n} ({tag}) => {p}\n" for n, tag, p in entries)
    return f"{len(entries)} libs found in cache `/etc/ld.so.cache'\n" + body


def with_commands(snap: Path, *cmds) -> Path:
    """Give the snapshot these (argv, stdout) commands, each exiting 0."""
    return make_snapshot(snap, commands=[(argv, 0, stdout) for argv, stdout in cmds])


# -- data files ------------------------------------------------------------------------------
def test_spec_rules_and_signatures_load():
    spec = {s.id: s for s in load_specs()}["libraries"]
    assert spec.collector == "libraries"
    assert spec.args["location"] and all(loc["globs"] for loc in spec.args["location"])
    assert all(row["match"] and row["text"] for row in spec.args["remedy"])
    assert {"openvino", "onnxruntime-*", "torch-npu", "rknn-toolkit-lite2", "hailort"} <= set(
        spec.args["python_distributions"])
    rules = load_rules()
    for rid in ("missing-shared-library", "symbol-version-unsatisfied"):
        r = rules.get(rid)
        assert r is not None and r.severity == "error" and r.matches
    assert "copy a newer libc" in rules.get("symbol-version-unsatisfied").explain.replace("\n", " ")
    ids = {s.id for s in load_signatures()}
    assert {"shared-library-not-found", "shared-library-version-not-found"} <= ids


# Real loader messages from public reports (URL per line).
LOG_LINES = [
    # NVIDIA/TensorRT #1124
    ("ImportError: /lib64/libm.so.6: version `GLIBC_2.27' not found (required by /home/user/TensorRT-7.0.0.11/lib/libnvinfer.so.7)",
     "shared-library-version-not-found", {"version": "GLIBC_2.27", "provider": "/lib64/libm.so.6",
                                          "required_by": "/home/user/TensorRT-7.0.0.11/lib/libnvinfer.so.7"}),
    # ultralytics/ultralytics #21757 (Jetson, JetPack 5 container)
    ("ImportError: /lib/aarch64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.29' not found (required by /usr/local/lib/python3.8/dist-packages/onnxruntime/capi/onnxruntime_pybind11_state.so)",
     "shared-library-version-not-found", {"version": "GLIBCXX_3.4.29", "provider": "/lib/aarch64-linux-gnu/libstdc++.so.6"}),
    # microsoft/onnxruntime #1113 (ldd output form: object, then provider)
    ("/var/task/onnxruntime/capi/onnxruntime_pybind11_state.so: /usr/lib64/libstdc++.so.6: version `CXXABI_1.3.8' not found (required by /var/task/onnxruntime/capi/onnxruntime_pybind11_state.so)",
     "shared-library-version-not-found", {"version": "CXXABI_1.3.8", "provider": "/usr/lib64/libstdc++.so.6"}),
    # triple-mu/AI-on-Board #3 (rknn-toolkit2 librknnc.so on Ubuntu 18.04)
    ("E build: ImportError: /lib/x86_64-linux-gnu/libm.so.6: version `GLIBC_2.29' not found (required by /home/hbli/miniconda3/envs/rknn/lib/python3.8/site-packages/rknn/api/lib/linux-x86_64/cp38/librknnc.so)",
     "shared-library-version-not-found", {"version": "GLIBC_2.29"}),
    # NVIDIA/nvidia-container-toolkit #228 (glibc 2.36+ marker version, no number)
    ("nvidia-container-cli: /usr/bin/../lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_ABI_DT_RELR' not found (required by /lib/x86_64-linux-gnu/libdl.so.2)",
     "shared-library-version-not-found", {"version": "GLIBC_ABI_DT_RELR", "provider": "/usr/bin/../lib/x86_64-linux-gnu/libc.so.6",
                                          "required_by": "/lib/x86_64-linux-gnu/libdl.so.2"}),
    # mlverse/torch #1360 (a bundled librt.so.1 of another glibc build)
    ("! /home/jordi/R/x86_64-pc-linux-gnu-library/4.5/torch/lib/liblantern.so - /lib/x86_64-linux-gnu/libpthread.so.0: version `GLIBC_PRIVATE' not found (required by /home/jordi/R/x86_64-pc-linux-gnu-library/4.5/torch/lib/librt.so.1) ",
     "shared-library-version-not-found", {"version": "GLIBC_PRIVATE", "provider": "/lib/x86_64-linux-gnu/libpthread.so.0"}),
    # a CUDA library's soname version (KTransformers built for CUDA 11 in a CUDA 12 image)
    ("ImportError: /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.11.0: version `libcudart.so.11.0' not found (required by /opt/conda/lib/python3.11/site-packages/cpuinfer_ext.cpython-311-x86_64-linux-gnu.so)",
     "shared-library-version-not-found", {"version": "libcudart.so.11.0", "provider": "/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.11.0"}),
    # dusty-nv/jetson-inference #357
    ("./imagenet-camera: error while loading shared libraries: libnvcaffe_parser.so.3: cannot open shared object file: No such file or directory",
     "shared-library-not-found", {"library": "libnvcaffe_parser.so.3", "program": "./imagenet-camera"}),
    # openvinotoolkit/openvino_tokenizers #353
    ("RuntimeError: Cannot load library '/home/Projects/py310/lib/python3.10/site-packages/openvino_tokenizers/lib/libopenvino_tokenizers.so': libopenvino.so.2450: cannot open shared object file: No such file or directory",
     "shared-library-not-found", {"library": "libopenvino.so.2450"}),
    # openvinotoolkit/openvino #5232
    ("[ WARNING ] libinference_engine.so: cannot open shared object file: No such file or directory",
     "shared-library-not-found", {"library": "libinference_engine.so"}),
]


@pytest.mark.parametrize("line,sig,groups", LOG_LINES)
def test_loader_messages_are_recognised(line, sig, groups):
    events = match_signatures(line, "app.log", load_signatures(), "runtime")
    ours = [e for e in events if e["signature"].startswith("shared-library-")]
    assert [e["signature"] for e in ours] == [sig]
    for k, v in groups.items():
        assert ours[0][k] == v


def test_unrelated_lines_do_not_match():
    text = ("libze_loader.so.1 => /usr/lib/x86_64-linux-gnu/libze_loader.so.1 (0x7f)\n"
            "GLIBC_2.27 found, all good\nversion 2.27 not found in cache\n"
            # the TFLite/LiteRT GPU delegate retries through the OpenCL ICD loader (opencl_wrapper.cc)
            "INFO: Failed to load OpenCL library with dlopen: libOpenCL.so: cannot open shared "
            "object file: No such file or directory. Trying ICD loader.\n")
    assert not [e for e in match_signatures(text, "x", load_signatures(), "runtime")
                if e["signature"].startswith("shared-library-")]


def test_plugin_loaders_probing_optional_plugins_are_not_missing_libraries():
    """The SYCL/UR, PI and Level Zero loaders try every plugin they know and log each one they
    cannot open (the signature's `unless`); the Intel stacks' own adapters and drivers count."""
    noise = (
        # intel/compute-runtime#818 (SYCL_UR_TRACE, oneAPI 2025.0)
        "<LOADER>[INFO]: failed to load adapter 'libur_adapter_cuda.so.0' with error: libcuda.so.1: cannot open shared object file: No such file or directory\n"
        "<LOADER>[INFO]: failed to load adapter '/opt/intel/oneapi/compiler/2025.0/lib/libur_adapter_hip.so.0' with error: libamd_comgr.so.2: cannot open shared object file: No such file or directory\n"
        "<LOADER>[INFO]: failed to load adapter 'libur_adapter_native_cpu.so.0' with error: libur_adapter_native_cpu.so.0: cannot open shared object file: No such file or directory\n"
        # intel/llvm sycl/test (SYCL_PI_TRACE=-1)
        "SYCL_PI_TRACE[-1]: dlopen(libpi_cuda.so) failed with <libpi_cuda.so: cannot open shared object file: No such file or directory>\n"
        # oneapi-src/level-zero#209, #367 (ZE_ENABLE_LOADER_DEBUG_TRACE)
        "ZE_LOADER_DEBUG_TRACE:Load Library of libze_intel_gpu_legacy1.so.1 failed with libze_intel_gpu_legacy1.so.1: cannot open shared object file: No such file or directory\n"
        "[2025-08-08 17:56:24.940] [ze_loader] [trace] Load Library of libze_intel_vpu.so.1 failed with libze_intel_vpu.so.1: cannot open shared object file: No such file or directory\n")
    from npu_doctor import registry

    registry.load_all()  # probe files name collectors, which must be known to load them
    sigs = load_signatures()
    assert not [e for e in match_signatures(noise, "x", sigs, "runtime") if e["signature"] == "shared-library-not-found"]
    real = (
        # intel/compute-runtime#832: the Level Zero GPU driver is not installed
        "ZE_LOADER_DEBUG_TRACE:Load Library of libze_intel_gpu.so.1 failed with libze_intel_gpu.so.1: cannot open shared object file: No such file or directory\n"
        "<LOADER>[INFO]: failed to load adapter 'libur_adapter_level_zero.so.0' with error: libze_loader.so.1: cannot open shared object file: No such file or directory\n")
    got = [e["library"] for e in match_signatures(real, "x", sigs, "runtime") if e["signature"] == "shared-library-not-found"]
    assert got == ["libze_intel_gpu.so.1", "libze_loader.so.1"]


def test_tensorflow_probing_for_tensorrt_is_not_a_missing_library():
    """TensorFlow 2.1-2.11 dlopens TensorRT at import and logs each library it lacks; TF-TRT is
    optional (the signature's `unless`), the CUDA libraries it needs still count."""
    from npu_doctor import registry

    registry.load_all()
    sigs = load_signatures()
    # googlecolab/colabtools#3408 (TF 2.11); tensorflow/tensorflow#35968 (TF 2.1, two spaces)
    noise = (
        "2023-02-13 19:39:03.670024: W tensorflow/compiler/xla/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open shared object file: No such file or directory; LD_LIBRARY_PATH: /usr/lib64-nvidia\n"
        "2023-02-13 19:39:03.670126: W tensorflow/compiler/xla/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer_plugin.so.7'; dlerror: libnvinfer_plugin.so.7: cannot open shared object file: No such file or directory; LD_LIBRARY_PATH: /usr/lib64-nvidia\n"
        "2020-01-16 20:21:32.912768: W tensorflow/stream_executor/platform/default/dso_loader.cc:55] Could not load dynamic library 'libnvinfer_plugin.so.6'; dlerror: libnvinfer_plugin.so.6:  cannot open shared object file: No such file or directory \n")
    assert not [e for e in match_signatures(noise, "x", sigs, "runtime") if e["signature"] == "shared-library-not-found"]
    # the same loader's line for a CUDA library TensorFlow needs (case w301,
    # JdeRobot/BehaviorMetrics#385): real
    real = (REPO / "tests" / "cases" / "w301-tf-dso-loader-libcusolver-libcudnn-missing-skipping-gpu" / "logs"
            / "driver.log").read_text()
    got = [e["library"] for e in match_signatures(real, "x", sigs, "runtime") if e["signature"] == "shared-library-not-found"]
    assert got[:2] == ["libcusolver.so.11", "libcudnn.so.8"]


def test_ollama_probing_32_bit_gpu_libraries_is_not_a_wrong_elf_class():
    """ollama's discovery tries the 32-bit libcuda/libnvidia-ml of a multilib system and logs
    the failure (the signature's `unless`); a program's own wrong-class library counts."""
    from npu_doctor import registry

    registry.load_all()
    sigs = load_signatures()
    noise = (  # ollama/ollama#2226 (0.1.22), #5493 (0.1.40, OLLAMA_DEBUG)
        "2024/01/27 07:32:28 gpu.go:294: INFO Unable to load CUDA management library /usr/lib/libnvidia-ml.so.545.29.06: Unable to load /usr/lib/libnvidia-ml.so.545.29.06 library to query for Nvidia GPUs: /usr/lib/libnvidia-ml.so.545.29.06: wrong ELF class: ELFCLASS32\n"
        'time=2024-07-04T17:13:20.134+08:00 level=DEBUG source=gpu.go:385 msg="Unable to load nvcuda" library=/usr/lib/libcuda.so.418.74 error="Unable to load /usr/lib/libcuda.so.418.74 library to query for Nvidia GPUs: /usr/lib/libcuda.so.418.74: wrong ELF class: ELFCLASS32"\n')
    assert not [e for e in match_signatures(noise, "x", sigs, "runtime")
                if e["signature"] == "shared-library-wrong-elf-class"]
    # MotrixLab/SMPLer-X#37: cuDNN cannot load because libcuda.so is the 32-bit one
    real = "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: wrong ELF class: ELFCLASS32\n"
    got = [e["library"] for e in match_signatures(real, "x", sigs, "runtime")
           if e["signature"] == "shared-library-wrong-elf-class"]
    assert got == ["libcuda.so"]


def test_a_signature_unless_is_checked_when_loaded(tmp_path):
    from npu_doctor.errors import ConfigError
    from npu_doctor.probes import _load_signatures

    ok = _load_signatures({"signature": [{"id": "s", "regex": "needle", "unless": "hay needle"}]}, "x.toml")
    assert ok[0].unless is not None and ok[0].unless.search("hay needle")
    with pytest.raises(ConfigError, match="unless"):
        _load_signatures({"signature": [{"id": "s", "regex": "needle", "unless": "(unclosed"}]}, "x.toml")


# -- the real cases --------------------------------------------------------------------------
def test_case_c2_10_missing_tensorrt_soname():
    report = check_json(case_path("c2-10"))
    ids = finding_ids(report)
    assert "missing-shared-library" in ids and "symbol-version-unsatisfied" not in ids
    f = next(f for f in report["findings"] if f["id"] == "missing-shared-library")
    assert "libnvcaffe_parser.so.3" in f["message"] and f["subject"] == "libnvcaffe_parser.so.3"
    assert any("TensorRT" in x["text"] and "rebuild" in x["text"] for x in f["fixes"])


def test_case_c2_15_glibc_too_old_for_tensorrt():
    report = check_json(case_path("c2-15"))
    ids = finding_ids(report)
    assert "symbol-version-unsatisfied" in ids and "missing-shared-library" not in ids
    f = next(f for f in report["findings"] if f["id"] == "symbol-version-unsatisfied")
    assert "GLIBC_2.27" in f["message"] and "libnvinfer.so.7" in f["message"]
    fixes = " ".join(x["text"] for x in f["fixes"])
    assert "made for this distribution" in fixes and "Do not copy a newer libc" in fixes


def test_case_x212_conda_libstdcxx_shadowing_gets_the_conda_fix():
    # the provider is conda's own libstdc++ (found first through the interpreter's RPATH): the fix
    # is to update it in the env, not "install the SDK build for this distribution"
    f = next(f for f in check_json(_repo_case("x212"))["findings"]
             if f["id"] == "symbol-version-unsatisfied")
    fixes = " ".join(x["text"] for x in f["fixes"])
    assert "conda environment's own copy" in fixes and "libstdcxx-ng" in fixes
    assert "made for this distribution" not in fixes


def test_system_glibc_too_old_keeps_the_distribution_fix_not_the_conda_one():
    # u202: the requirer lives in an anaconda env but needs GLIBC (never shipped by conda)
    f = next(f for f in check_json(_repo_case("u202"))["findings"]
             if f["id"] == "symbol-version-unsatisfied")
    fixes = " ".join(x["text"] for x in f["fixes"])
    assert "made for this distribution" in fixes and "conda" not in fixes


def test_linker_versioned_undefined_reference_is_symbol_version_unsatisfied():
    report = check_json(_repo_case("x208"))
    f = next(f for f in report["findings"] if f["id"] == "symbol-version-unsatisfied")
    assert f["subject"] == "/opt/intel/openvino/runtime/lib/intel64/libopenvino.so"
    assert "GLIBC_2.29" in f["message"] and "missing-shared-library" not in finding_ids(report)


# -- the probe on built libraries, through snapshots -----------------------------------------
PROV = "int old_fn(void){return 1;}\nint new_fn(void){return 2;}\n"
CONS = ("#include <unistd.h>\nextern int old_fn(void); extern int new_fn(void);\n"
        "int cons(void){return old_fn()+new_fn()+(int)getpid();}\n")


@pytest.fixture(scope="module")
def sdk_build(tmp_path_factory):
    """libsdk.so (RUNPATH $ORIGIN) needs libvprov.so.1 at GLIBC_2.99 and libze_loader.so.1."""
    if GCC is None:
        pytest.skip("gcc not installed")
    d = tmp_path_factory.mktemp("sdk")
    (d / "v.map").write_text("GLIBC_2.17 { global: old_fn; local: *; };\n"
                             "GLIBC_2.99 { global: new_fn; } GLIBC_2.17;\n")
    cc(d / "lib/libvprov.so.1", PROV, "-Wl,-soname,libvprov.so.1", f"-Wl,--version-script={d / 'v.map'}")
    cc(d / "ze/libze_loader.so.1", "int zeInit(int f){return f;}\n", "-Wl,-soname,libze_loader.so.1")
    cc(d / "lib/libsdk.so", CONS + "extern int zeInit(int);\nint ze(void){return zeInit(0);}\n",
       f"-L{d / 'lib'}", f"-L{d / 'ze'}", "-l:libvprov.so.1", "-l:libze_loader.so.1",
       "-Wl,--enable-new-dtags,-rpath,$ORIGIN", "-Wl,-soname,libsdk.so")
    return d


@needs_gcc
def test_snapshot_missing_library_with_search_path_and_remedy(sdk_build, tmp_path):
    snap = tmp_path / "snap"
    lib = snap / "fs/opt/testsdk/lib"
    lib.mkdir(parents=True)
    shutil.copy(sdk_build / "lib/libsdk.so", lib)
    shutil.copy(sdk_build / "lib/libvprov.so.1", lib)
    with_commands(snap,
        (["ldconfig", "-p"], ldconfig_p(("libc.so.6", "libc6,x86-64", "/lib/x86_64-linux-gnu/libc.so.6"))),
        (["ldd", "--version"], "ldd (Debian GLIBC 2.36-9+deb12u4) 2.36\n"))
    probes = write_probe_override(tmp_path / "probes", ["/opt/testsdk/**/*.so*"])
    report = check_json(snap, "--probes", str(probes))
    libs = {ln["path"]: ln for ln in report["facts"]["libraries"]}
    sdk = libs["/opt/testsdk/lib/libsdk.so"]
    assert sdk["missing"] == ["libze_loader.so.1"] and sdk["class"] == "ELF64"
    assert sdk["runpath"] == ["$ORIGIN"] and "RUNPATH /opt/testsdk/lib" in sdk["search_path"]
    assert "ld.so.cache" in sdk["search_path"]
    # the provider is in the snapshot: GLIBC_2.99 is checked against its .gnu.version_d
    assert sdk["unsatisfied"] == []
    missing = [f for f in report["findings"] if f["id"] == "missing-shared-library"]
    assert [f["subject"] for f in missing] == ["/opt/testsdk/lib/libsdk.so"]
    assert "libze_loader.so.1" in missing[0]["message"]
    assert any("Level Zero loader" in x["text"] and "intel-level-zero-npu" in x["text"]
               for x in missing[0]["fixes"])
    assert "symbol-version-unsatisfied" not in finding_ids(report)
    assert report["facts"]["library_scan"]["loader_cache"] == "$ ldconfig -p"


@needs_gcc
def test_snapshot_glibc_fallback_compares_with_libc_version(sdk_build, tmp_path):
    """The provider of GLIBC_2.99 is listed by `ldconfig -p` but not captured: compared with
    libc.version (2.36), it is unsatisfied, and the evidence says how it was decided."""
    snap = tmp_path / "snap"
    lib = snap / "fs/opt/testsdk/lib"
    lib.mkdir(parents=True)
    shutil.copy(sdk_build / "lib/libsdk.so", lib)
    with_commands(snap,
        (["ldconfig", "-p"], ldconfig_p(
            ("libvprov.so.1", "libc6,x86-64", "/usr/lib/x86_64-linux-gnu/libvprov.so.1"),
            ("libze_loader.so.1", "libc6,x86-64", "/usr/lib/x86_64-linux-gnu/libze_loader.so.1"),
            ("libc.so.6", "libc6,x86-64", "/lib/x86_64-linux-gnu/libc.so.6"))),
        (["ldd", "--version"], "ldd (Debian GLIBC 2.36-9+deb12u4) 2.36\n"))
    probes = write_probe_override(tmp_path / "probes", ["/opt/testsdk/**/*.so*"])
    report = check_json(snap, "--probes", str(probes))
    assert report["facts"]["libc"]["version"] == "2.36"
    sdk = report["facts"]["libraries"][0]
    assert sdk["missing"] == []
    assert "libvprov.so.1 => /usr/lib/x86_64-linux-gnu/libvprov.so.1 (ld.so.cache, not captured)" \
        in sdk["resolved"]
    assert sdk["unsatisfied"] == [{"version": "GLIBC_2.99", "library": "libvprov.so.1",
                                   "provider": "/usr/lib/x86_64-linux-gnu/libvprov.so.1",
                                   "basis": "libc.version", "provided_max": "GLIBC_2.36"}]
    f = next(f for f in report["findings"] if f["id"] == "symbol-version-unsatisfied")
    assert "GLIBC_2.99" in f["message"] and "compared with libc.version" in f["message"]
    ev = {e["fact"]: e for e in f["evidence"]}
    assert ev["libc.version"]["value"] == "2.36"
    assert "missing-shared-library" not in finding_ids(report)


@needs_gcc
def test_snapshot_without_loader_cache_reports_nothing_missing(sdk_build, tmp_path):
    snap = tmp_path / "snap"
    (snap / "fs/opt/testsdk").mkdir(parents=True)
    shutil.copy(sdk_build / "lib/libsdk.so", snap / "fs/opt/testsdk")
    probes = write_probe_override(tmp_path / "probes", ["/opt/testsdk/*.so"])
    report = check_json(snap, "--probes", str(probes))
    sdk = report["facts"]["libraries"][0]
    assert sdk["missing"] == [] and "libze_loader.so.1" in sdk["unknown"]
    assert "missing-shared-library" not in finding_ids(report)


@needs_gcc
def test_live_probe_finds_missing_library_and_points_to_the_copy_elsewhere(sdk_build, tmp_path):
    """Live host: the SDK's libze_loader.so.1 is on disk but not on any loader path."""
    probes = write_probe_override(tmp_path / "probes", [f"{sdk_build}/lib/*.so*", f"{sdk_build}/ze/*.so*"])
    proc = run_cli("check", "--probes", str(probes), "--format", "json", "--fail-on", "never",
                   "--select", "missing-shared-library", env={"LD_LIBRARY_PATH": ""})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    f = next(f for f in report["findings"] if f["subject"] == f"{sdk_build}/lib/libsdk.so")
    assert "libze_loader.so.1" in f["message"]
    assert any(f"{sdk_build}/ze/libze_loader.so.1" in x["text"] for x in f["fixes"])
    # with LD_LIBRARY_PATH pointing there, the loader (and npu-doctor) find it
    proc = run_cli("check", "--probes", str(probes), "--format", "json", "--fail-on", "never",
                   env={"LD_LIBRARY_PATH": str(sdk_build / "ze")})
    report = json.loads(proc.stdout)
    sdk = next(ln for ln in report["facts"]["libraries"] if ln["path"].endswith("/lib/libsdk.so"))
    assert sdk["missing"] == []


@needs_gcc
def test_problem_in_a_dependency_outside_the_sdk_gets_its_own_record(tmp_path):
    """libsdk.so -> libmid.so (found through RUNPATH, not an SDK file) -> libgone.so.1 (missing)."""
    cc(tmp_path / "gone/libgone.so.1", "int gone(void){return 1;}\n", "-Wl,-soname,libgone.so.1")
    cc(tmp_path / "mid/libmid.so", "extern int gone(void);\nint mid(void){return gone();}\n",
       f"-L{tmp_path / 'gone'}", "-l:libgone.so.1", "-Wl,-soname,libmid.so")
    cc(tmp_path / "sdk/libsdk.so", "extern int mid(void);\nint sdk(void){return mid();}\n",
       f"-L{tmp_path / 'mid'}", "-l:libmid.so", f"-Wl,--enable-new-dtags,-rpath,{tmp_path / 'mid'}")
    (tmp_path / "gone/libgone.so.1").unlink()
    probes = write_probe_override(tmp_path / "probes", [f"{tmp_path}/sdk/*.so"])
    proc = run_cli("check", "--probes", str(probes), "--format", "json", "--fail-on", "never",
                   "--select", "missing-shared-library", env={"LD_LIBRARY_PATH": ""})
    report = json.loads(proc.stdout)
    recs = {ln["path"]: ln for ln in report["facts"]["libraries"]}
    sdk, mid = recs[f"{tmp_path}/sdk/libsdk.so"], recs[f"{tmp_path}/mid/libmid.so"]
    assert sdk["missing"] == [] and mid["missing"] == ["libgone.so.1"]
    assert mid["dependency_of"] == sdk["path"] and mid["sdk"] == "testsdk"
    f = next(f for f in report["findings"] if f["subject"] == mid["path"])
    assert f"loaded by {sdk['path']}" in f["message"] and "libgone.so.1" in f["message"]


# -- real vendor wheels ----------------------------------------------------------------------
def _cache_dir(request, name: str) -> Path:
    """A directory kept between runs: the pytest cache, or the temp dir without it."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(name + os.environ.get("PYTEST_XDIST_WORKER", "")))
    # and one per xdist worker, so that two never download into one folder at once
    d = Path(tempfile.gettempdir()) / (f"{name}-py{sys.version_info[0]}{sys.version_info[1]}"
                                       + os.environ.get("PYTEST_XDIST_WORKER", ""))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _wheel(request, spec: str, platform: str, pyver: str) -> Path:
    """`pip download --no-deps` one wheel into the pytest cache (skip when offline)."""
    d = _cache_dir(request, "npu-doctor-wheels")
    name = spec.split("==")[0].replace("-", "_")
    arch = platform.rsplit("_", 1)[-1]
    have = sorted(p for p in d.glob("*.whl")
                  if p.name.lower().startswith(name.lower() + "-") and arch in p.name)
    if have:
        return have[0]
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--platform", platform, "--python-version", pyver, "-d", str(d), spec,
                        "--disable-pip-version-check", "-q"], capture_output=True, text=True, timeout=300)
    have = sorted(p for p in d.glob("*.whl") if p.name.lower().startswith(name.lower() + "-"))
    if r.returncode != 0 or not have:
        pytest.skip(f"cannot download {spec} (offline?): {r.stderr.strip()[-200:]}")
    return have[0]


def _unpack(whl: Path, dest: Path, member_re: str) -> list:
    out = []
    with zipfile.ZipFile(whl) as z:
        for m in z.namelist():
            if re.search(member_re, m):
                z.extract(m, dest)
                out.append(dest / m)
    return out


@pytest.mark.slow
def test_rknn_toolkit_lite2_aarch64_wheel_analysed_on_any_host(request, tmp_path):
    whl = _wheel(request, "rknn-toolkit-lite2==2.5.0", "manylinux_2_17_aarch64", "3.11")
    files = _unpack(whl, tmp_path, r"rknn_runtime\.cpython-311-aarch64-linux-gnu\.so$")
    assert files, "the wheel layout changed"
    info = read_elf(LiveHost(), str(files[0]))
    assert (info.elf_class, info.machine, info.e_machine) == (64, "aarch64", "EM_AARCH64")
    assert "libc.so.6" in info.needed
    # matrices.md 8.2: RKNN's aarch64 binaries need GLIBC_2.17 at most
    assert [n.version for n in info.version_needs["libc.so.6"]] == ["GLIBC_2.17"]


@pytest.mark.slow
def test_torch_npu_aarch64_wheel_in_an_ascend_board_snapshot(request, tmp_path):
    """libtorch_npu.so (aarch64) in a snapshot of an Atlas board: its $ORIGIN RPATH finds the
    wheel's own libraries (an x86-64 copy earlier on that RPATH is skipped), CANN's
    libascendcl.so is missing with the set_env.sh remedy, and its GLIBC needs are compared
    with the board's glibc because /lib was not captured."""
    whl = _wheel(request, "torch-npu==2.1.0.post3", "manylinux_2_17_aarch64", "3.10")
    snap = tmp_path / "snap"
    site = snap / "fs/usr/local/lib/python3.10/site-packages"
    files = _unpack(whl, site, r"^torch_npu/lib/lib[^/]+\.so$")
    assert {p.name for p in files} >= {"libtorch_npu.so", "libtensorpipe.so", "libnpu_profiler.so"}
    wrong = site / "torch_npu/lib/lib/libtensorpipe.so"
    if GCC:
        cc(wrong, "int tp(void){return 0;}\n", "-Wl,-soname,libtensorpipe.so")
    system = ["libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libc.so.6",
              "ld-linux-aarch64.so.1", "libdl.so.2", "librt.so.1"]
    entries = [(n, "libc6,AArch64", f"/lib/aarch64-linux-gnu/{n}") for n in system]
    entries.append(("libc.so.6", "libc6,x86-64", "/lib/x86_64-linux-gnu/libc.so.6"))
    with_commands(snap,
        (["ldconfig", "-p"], ldconfig_p(*entries)),
        (["ldd", "--version"], "ldd (Ubuntu GLIBC 2.12-1ubuntu1) 2.12\n"))
    host = SnapshotHost(str(snap))
    root = "/usr/local/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so"
    node = Resolver(host).tree(root)[0]
    assert node.info.machine == "aarch64"
    tp = node.resolutions["libtensorpipe.so"]
    assert tp.path.endswith("torch_npu/lib/libtensorpipe.so") and tp.via == "rpath"
    if GCC:
        assert tp.skipped and "ELF64 x86_64" in tp.skipped[0]
    assert node.resolutions["libc.so.6"].path == "/lib/aarch64-linux-gnu/libc.so.6"
    assert {"libascendcl.so", "libhccl.so", "libge_runner.so", "libtorch.so"} <= set(node.missing)
    # whole check: remedy from the table, glibc fallback against the board's 2.12
    probes = write_probe_override(tmp_path / "probes", ["/usr/local/lib/python3.10/**/torch_npu/lib/*.so"])
    report = check_json(snap, "--probes", str(probes))
    rec = next(ln for ln in report["facts"]["libraries"] if ln["path"] == root)
    assert "libascendcl.so" in rec["missing"]
    assert any(r.startswith("libascendcl.so: CANN's environment is not set") for r in rec["remedies"])
    assert rec["unsatisfied"] and all(u["basis"] == "libc.version" for u in rec["unsatisfied"])
    assert {"symbol-version-unsatisfied", "missing-shared-library"} <= finding_ids(report)


# -- the done-when: OpenVINO 2024.4.0 installed beside npu-doctor ---------------------
OPENVINO = "openvino==2024.4.0"


def _openvino_venv(request) -> Path:
    """A venv (cached in the pytest cache) holding openvino 2024.4.0 and npu-doctor's
    dependencies; npu-doctor itself comes from this checkout via PYTHONPATH. ~45 MB download
    once; skipped when offline."""
    d = _cache_dir(request, "npu-doctor-openvino-2024.4.0")
    py = d / "venv/bin/python"
    done = d / "venv/.complete"
    if done.exists() and py.exists():
        return py
    shutil.rmtree(d / "venv", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(d / "venv")], check=True, capture_output=True)
    deps = ["click>=8.0", "psutil>=5.8", "packaging>=21", "tomli-w>=1.0", "pyelftools>=0.29",
            "tomli>=1.1; python_version < '3.11'"]
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--only-binary=:all:", OPENVINO, *deps], capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        pytest.skip(f"cannot install {OPENVINO} (offline or no wheel for this Python): "
                    f"{r.stderr.strip()[-300:]}")
    done.write_text(OPENVINO)
    return py


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="the OpenVINO NPU plugin ships for Linux x86-64")
@pytest.mark.slow
def test_openvino_2024_4_npu_plugin_without_level_zero(request):
    """Real input on a real host. Fails only on a machine that has libze_loader.so.1, where
    the finding would be wrong; then it is skipped."""
    if any(os.path.exists(os.path.join(d, "libze_loader.so.1")) for d in
           ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")):
        pytest.skip("this host has the Level Zero loader")
    py = _openvino_venv(request)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LD_LIBRARY_PATH", None)
    proc = subprocess.run([str(py), "-m", "npu_doctor", "check", "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120)
    assert proc.returncode == 1, proc.stderr  # an error finding: exit 1
    report = json.loads(proc.stdout)
    plugin = [ln for ln in report["facts"]["libraries"]
              if ln["path"].endswith("/openvino/libs/libopenvino_intel_npu_plugin.so")]
    assert len(plugin) == 1 and plugin[0]["sdk"] == "openvino"
    assert plugin[0]["missing"] == ["libze_loader.so.1"]
    assert plugin[0]["rpath"] == ["$ORIGIN"]
    resolved = plugin[0]["resolved"]
    assert "libze_loader.so.1 => not found" in resolved
    assert any(r.startswith("libopenvino.so.2440 => ") and r.endswith("/openvino/libs/libopenvino.so.2440 (rpath)")
               for r in resolved)
    f = next(f for f in report["findings"] if f["id"] == "missing-shared-library"
             and f["subject"] == plugin[0]["path"])
    assert f["severity"] == "error"
    assert "needs libze_loader.so.1" in f["message"] and "ld.so.cache" in f["message"]
    fix = " ".join(x["text"] for x in f["fixes"])
    assert "Level Zero loader" in fix and "intel-level-zero-npu" in fix
    gpu = [x for x in report["findings"] if x["id"] == "missing-shared-library"
           and x["subject"].endswith("libopenvino_intel_gpu_plugin.so")]
    assert all(x["severity"] == "warning" and "libOpenCL.so.1" in x["message"] for x in gpu)
    # the core library and the CPU plugin load fine: no finding for them
    subjects = {x["subject"] for x in report["findings"] if x["id"] == "missing-shared-library"}
    assert not any(s.endswith("libopenvino.so.2440") or s.endswith("cpu_plugin.so") for s in subjects)
    scan = report["facts"]["library_scan"]
    assert scan["roots"] >= 20 and scan["duration_ms"] < 3000


@needs_gcc
def test_vendor_globs_follow_links_once_and_report_the_real_file(tmp_path):
    """`**` walks below a vendor dir (a symlink loop does not loop), and a library reached
    through its dev and soname links is one record, named by the file itself."""
    from npu_doctor.collectors.libraries import expand_glob
    base = tmp_path / "opt/vendor"
    real = cc(base / "a/b/lib64/libv.so.1.2.3", "int v(void){return 1;}\n", "-Wl,-soname,libv.so.1")
    os.symlink("libv.so.1.2.3", base / "a/b/lib64/libv.so.1")
    os.symlink("libv.so.1", base / "a/b/lib64/libv.so")
    os.symlink("..", base / "a/b/loop")  # a directory link back up
    (base / "a/b/lib64/notes.so.txt").write_text("not a library")
    found = expand_glob(LiveHost(), f"{base}/**/lib64/*.so*")
    assert f"{base}/a/b/lib64/libv.so" in found and f"{base}/a/b/lib64/libv.so.1.2.3" in found
    probes = write_probe_override(tmp_path / "probes", [f"{base}/**/lib64/*.so*"])
    proc = run_cli("check", "--probes", str(probes), "--format", "json", "--fail-on", "never",
                   "--select", "missing-shared-library")
    libs = [ln for ln in json.loads(proc.stdout)["facts"]["libraries"] if ln["sdk"] == "testsdk"]
    assert [ln["path"] for ln in libs] == [str(real)]
    assert libs[0]["soname"] == "libv.so.1" and libs[0]["missing"] == []
