"""The application's Python environment: --python, frameworks.* facts, their rules, and
`check --collect-env`.

Real inputs: a venv with real wheels from PyPI (onnxruntime, openvino, ai-edge-litert; cached
in the pytest cache, skipped only when PyPI cannot be reached), and for the large wheels
(torch, onnxruntime-gpu, torch_npu, tensorrt) the few files copied out of the real wheels in
tests/data/frameworks (SOURCES.md names each wheel).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import tomli_w

from conftest import REPO, check_json, copy_case, finding_ids, run_cli

DATA = REPO / "tests" / "data"
FX = DATA / "frameworks"
SMI_418 = (DATA / "nvidia" / "smi-q-418.67-v100-sxm2.txt").read_text()      # CUDA Version 10.1
SMI_566 = (DATA / "nvidia" / "smi-q-566.36-rtx4070-laptop.txt").read_text()  # CUDA Version 12.7
APP = "/opt/app"
PY = f"{APP}/bin/python"


# -- snapshots of an application environment built from the wheel fixtures --------------------
def app_snapshot(tmp: Path, fixtures, smi=None, base=None, extra_sites=()) -> Path:
    """A snapshot whose application environment (/opt/app, given as --python when captured)
    holds the fixture files; a file a RECORD lists but the fixture lacks is an empty
    placeholder, as capture writes it. The interpreter's answer is not recorded, so its
    site-packages come from its prefix (the path a foreign-architecture capture takes)."""
    snap = base or tmp / "snap"
    site = snap / "fs" / APP.lstrip("/") / "lib/python3.11/site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for fx in fixtures:
        shutil.copytree(str(FX / fx / "site-packages"), str(site), dirs_exist_ok=True)
    for src in extra_sites:
        shutil.copytree(str(src), str(site), dirs_exist_ok=True)
    for record in site.glob("*.dist-info/RECORD"):
        for line in record.read_text().splitlines():
            rel = line.split(",")[0]
            p = site / rel
            if rel and not p.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(b"")
    meta = {"snapshot": {"python": [{"path": PY, "origin": "--python"}]}}
    (snap / "snapshot.toml").write_text(tomli_w.dumps(meta))
    if smi is not None:
        cmds = {"command": [{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": smi}]}
        (snap / "commands.toml").write_text(tomli_w.dumps(cmds, multiline_strings=True))
    return snap


def findings(rep, rid="framework-backend-mismatch"):
    return [f for f in rep["findings"] if f["id"] == rid]


def test_version_files_parse_as_the_wheels_wrote_them():
    from npu_doctor.frameworks import parse_assignments

    cu = parse_assignments((FX / "torch-2.3.1-cu121/site-packages/torch/version.py").read_text())
    assert cu == {"__all__": ["__version__", "debug", "cuda", "git_version", "hip"],
                  "__version__": "2.3.1+cu121", "debug": False, "cuda": "12.1",
                  "git_version": "d44533f9d073df13895333e70b66f81c513c1889", "hip": None}
    cpu = parse_assignments((FX / "torch-2.3.1-aarch64-cpu/site-packages/torch/version.py").read_text())
    assert cpu["cuda"] is None and cpu["hip"] is None and cpu["__version__"] == "2.3.1"
    npu = parse_assignments((FX / "torch-npu-2.1.0.post3/site-packages/torch_npu/version.py").read_text())
    assert npu["__version__"] == "2.1.0.post3"


@pytest.mark.parametrize("built,driver,want", [
    ("12.1", "10.1", "too-old"), ("12.1", "12.7", "ok"), ("12.4", "12.2", "minor-version-compat"),
    ("11.8", "12.7", "ok"), ("12", "11.4", "too-old"), ("12", "12.0", "ok")])
def test_driver_check(built, driver, want):
    from npu_doctor.collectors.frameworks import driver_check

    assert driver_check(built, driver) == want


@pytest.mark.parametrize("torch,driver,want", [
    ("2.3.1", "12.7", "cu121"), ("2.3.1", "11.8", "cu118"), ("2.6.0", "12.4", "cu124"),
    ("2.6.0", None, "cu126"), ("2.3.1", "10.1", None), ("1.13.1", "12.7", None)])
def test_torch_cuda_wheel_for_the_driver(torch, driver, want):
    from npu_doctor.collectors.frameworks import torch_cuda_wheel

    assert torch_cuda_wheel(torch, driver) == want


# -- rules on snapshots --------------------------------------------------------------------------
def test_torch_cu121_on_a_cuda_10_1_driver(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["torch-2.3.1-cu121", "nvidia-cudnn-cu12-8.9.2.26"], SMI_418))
    t = rep["facts"]["frameworks"]["torch"]
    assert (t["version"], t["cuda"], t["hip"], t["backend"], t["debug"]) == ("2.3.1+cu121", "12.1", None, "cuda", False)
    assert t["cudnn"] == "8.9.2.26" and t["python"] == PY and t["driver_check"] == "too-old"
    f = findings(rep)
    assert len(f) == 1 and f[0]["severity"] == "error" and f[0]["subject"] == PY
    assert "torch 2.3.1+cu121 is built for CUDA 12.1" in f[0]["message"]
    assert "418.67" in f[0]["message"] and "10.1" in f[0]["message"]
    env = rep["facts"]["python"]["environments"][0]
    assert env["origin"] == "--python" and env["site_packages"] == [f"{APP}/lib/python3.11/site-packages"]


def test_torch_cu121_on_a_12_7_driver_is_fine_and_on_12_0_runs_by_minor_compat(tmp_path):
    rep = check_json(app_snapshot(tmp_path / "a", ["torch-2.3.1-cu121"], SMI_566))
    assert rep["facts"]["frameworks"]["torch"]["driver_check"] == "ok" and not findings(rep)
    smi = re.sub(r"(CUDA Version\s+:) 12\.7", r"\1 12.0", SMI_566)
    rep = check_json(app_snapshot(tmp_path / "b", ["torch-2.3.1-cu121"], smi))
    f = findings(rep)
    assert len(f) == 1 and f[0]["severity"] == "warning" and "minor-version compatibility" in f[0]["message"]


def test_cpu_only_torch_next_to_an_nvidia_gpu_gets_the_exact_pip_command(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["torch-2.3.1-aarch64-cpu"], SMI_566))
    assert rep["facts"]["frameworks"]["torch"]["backend"] == "cpu"
    f = findings(rep)
    assert len(f) == 1 and f[0]["severity"] == "error"
    assert "CPU-only build" in f[0]["message"] and "NVIDIA GPU" in f[0]["message"]
    assert f[0]["fixes"][0]["text"] == (f"{PY} -m pip install --force-reinstall torch==2.3.1 "
                                        "--index-url https://download.pytorch.org/whl/cu121")


def test_cpu_only_torch_without_a_gpu_is_no_finding(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["torch-2.3.1-aarch64-cpu"]))
    assert rep["facts"]["frameworks"]["torch"]["backend"] == "cpu" and not findings(rep)


def test_two_onnxruntime_flavours_side_by_side(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["onnxruntime-gpu-1.18.0", "onnxruntime-openvino-1.18.0"], SMI_566))
    ort = rep["facts"]["frameworks"]["onnxruntime"]
    assert ort["distributions"] == ["onnxruntime-gpu 1.18.0", "onnxruntime-openvino 1.18.0"]
    assert set(ort["providers"]) == {"cuda", "tensorrt", "openvino"} and ort["flavour"] == "gpu"
    f = findings(rep)
    assert len(f) == 1 and f[0]["severity"] == "warning" and "side by side" in f[0]["message"]


def test_tensorrt_cuda_major_from_its_distribution_names(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["tensorrt-cu12-10.9.0.34"], SMI_418))
    trt = rep["facts"]["frameworks"]["tensorrt"]
    assert (trt["version"], trt["cuda"], trt["driver_check"]) == ("10.9.0.34", "12", "too-old")
    assert any("tensorrt 10.9.0.34 is built for CUDA 12" in f["message"] for f in findings(rep))


def test_torch_npu_against_the_published_torch_and_cann(tmp_path):
    rep = check_json(app_snapshot(tmp_path, ["torch-npu-2.1.0.post3", "torch-2.3.1-aarch64-cpu"]))
    tn = rep["facts"]["frameworks"]["torch_npu"]
    assert tn["version"] == "2.1.0.post3" and tn["cann"] == ["8.0.RC1"]
    assert tn["matrix"]["status"] == "torch-mismatch" and tn["matrix"]["torch"] == "2.1.0"
    f = findings(rep)
    assert len(f) == 1 and "built for torch 2.1.0" in f[0]["message"] and "2.3.1" in f[0]["message"]
    assert f[0]["fixes"][0]["text"].startswith(f"{PY} -m pip install torch==2.1.0")


# -- a real venv with real wheels --------------------------------------------------------------
WHEELS = ("onnxruntime", "openvino", "ai-edge-litert")


def _cache_dir(request, name: str) -> Path:
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider (CI)
    if cache is not None:
        return Path(cache.mkdir(name + os.environ.get("PYTEST_XDIST_WORKER", "")))
    # wheels are per interpreter: one folder per Python version (3.8 and 3.13 share a machine in CI)
    # and one per xdist worker, so that two never download into one folder at once
    d = Path(tempfile.gettempdir()) / (f"{name}-py{sys.version_info[0]}{sys.version_info[1]}"
                                       + os.environ.get("PYTEST_XDIST_WORKER", ""))
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="session")
def app_venv(request, tmp_path_factory):
    """A venv (no pip inside) with onnxruntime, openvino and ai-edge-litert installed from
    real wheels; the wheels are kept in the pytest cache between sessions."""
    cache = _cache_dir(request, "npu-doctor-framework-wheels")
    have = {w: sorted(cache.glob(w.replace("-", "_") + "-*.whl")) for w in WHEELS}
    missing = [w for w, found in have.items() if not found]
    if missing:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "-d", str(cache), "-q", "--disable-pip-version-check", *missing],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            pytest.skip(f"PyPI not reachable: {r.stderr.strip()[-200:]}")
    venv = tmp_path_factory.mktemp("app") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheels = [str(sorted(cache.glob(w.replace("-", "_") + "-*.whl"))[-1]) for w in WHEELS]
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install",
                        "--no-deps", "--no-index", "-q", "--disable-pip-version-check", *wheels],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return venv


def _wheel_versions(venv: Path) -> dict:
    site = next(venv.glob("lib/python3*/site-packages"))
    out = {}
    for d in site.glob("*.dist-info"):
        name, ver = d.name[: -len(".dist-info")].split("-")[:2]
        out[name.lower()] = ver
    return out


def test_live_check_reads_the_application_venv(app_venv):
    proc = run_cli("check", "--python", str(app_venv / "bin/python"), "--format", "json",
                   "--fail-on", "never", timeout=120)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    fws, want = rep["facts"]["frameworks"], _wheel_versions(app_venv)
    assert fws["onnxruntime"]["version"] == want["onnxruntime"]
    assert fws["onnxruntime"]["flavour"] == "cpu" and fws["onnxruntime"]["providers"] == []
    assert fws["openvino"]["version"] == want["openvino"]
    assert {"CPU", "GPU", "NPU"} <= set(fws["openvino"]["devices"])
    assert fws["ai_edge_litert"]["version"] == want["ai_edge_litert"]
    if not any(os.path.exists(os.path.join(d, "libedgetpu.so.1")) for d in ("/usr/lib", "/usr/lib/x86_64-linux-gnu")):
        assert fws["ai_edge_litert"]["edgetpu_delegate_found"] is False
    envs = rep["facts"]["python"]["environments"]
    assert envs[0]["python"] == str(app_venv / "bin/python") and envs[0]["origin"] == "--python"
    assert envs[0]["version"] == "%d.%d.%d" % sys.version_info[:3]
    # that venv's SDK libraries are the ones the preflight checked
    libs = [ln["path"] for ln in rep["facts"]["libraries"] if ln["path"].startswith(str(app_venv))]
    assert any(p.endswith("libopenvino_intel_npu_plugin.so") for p in libs)
    assert any("/onnxruntime/capi/libonnxruntime" in p for p in libs)


def test_capture_replays_the_frameworks_exactly(app_venv, tmp_path):
    out = tmp_path / "cap/"
    py = str(app_venv / "bin/python")
    proc = run_cli("capture", "--python", py, "-o", str(out) + "/", "--no-redact", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "replay check: the capture gives the same facts" in proc.stderr
    live = json.loads(run_cli("check", "--python", py, "--format", "json", "--fail-on", "never",
                              timeout=120).stdout)
    replay = check_json(out)
    assert replay["facts"]["frameworks"] == live["facts"]["frameworks"]
    assert replay["facts"]["python"]["environments"] == live["facts"]["python"]["environments"]


def test_openvino_npu_plugin_on_an_intel_npu_without_its_user_mode_driver(app_venv, tmp_path):
    snap = copy_case("k06", tmp_path / "snap")
    site = next(app_venv.glob("lib/python3*/site-packages"))
    dest = tmp_path / "ov"
    shutil.copytree(str(site / next(d.name for d in site.glob("openvino-*.dist-info"))),
                    str(dest / next(d.name for d in site.glob("openvino-*.dist-info"))))
    (dest / "openvino/libs").mkdir(parents=True)
    for lib in (site / "openvino/libs").iterdir():   # the listing is what is read
        (dest / "openvino/libs" / lib.name).write_bytes(b"")
    rep = check_json(app_snapshot(tmp_path, [], base=snap, extra_sites=[dest]))
    assert rep["facts"]["frameworks"]["openvino"]["npu_umd"]["status"] == "missing"
    f = findings(rep)
    assert len(f) == 1 and "NPU user-mode driver" in f[0]["message"]
    assert "device-node-permission" in finding_ids(rep)


# -- collect-env -------------------------------------------------------------------------------
#: Every label `python -m torch.utils.collect_env` prints (env_info_fmt of
#: https://github.com/pytorch/pytorch/blob/main/torch/utils/collect_env.py).
COLLECT_ENV_LABELS = (
    "PyTorch version:", "Is debug build:", "CUDA used to build PyTorch:", "ROCM used to build PyTorch:",
    "OS:", "GCC version:", "Clang version:", "CMake version:", "Libc version:", "Python version:",
    "Python platform:", "Is CUDA available:", "CUDA runtime version:", "CUDA_MODULE_LOADING set to:",
    "GPU models and configuration:", "Nvidia driver version:", "cuDNN version:", "Is XPU available:",
    "HIP runtime version:",
    "MIOpen runtime version:", "Is XNNPACK available:", "CPU:", "Versions of relevant libraries:")


def _torch_python():
    """An interpreter that can import torch: $NPU_DOCTOR_TORCH_PYTHON, or this one; None when
    neither can (then the labels come from collect_env.py's source, above)."""
    for py in (os.environ.get("NPU_DOCTOR_TORCH_PYTHON"), sys.executable):
        if py and subprocess.run([py, "-c", "import torch.utils.collect_env"],
                                 capture_output=True).returncode == 0:
            return py
    return None


def _fields(text: str) -> dict:
    return {m.group(1) + ":": m.group(2).strip() for m in re.finditer(r"^([A-Z][^:\[\n]*):(.*)$", text, re.M)}


def test_side_by_side_with_torch_collect_env():
    """Every field `python -m torch.utils.collect_env` prints has a line in our block, and the
    facts both can know agree. Needs torch (NPU_DOCTOR_TORCH_PYTHON=/venv/bin/python)."""
    py = _torch_python()
    if py is None:
        pytest.skip("no interpreter with torch (set NPU_DOCTOR_TORCH_PYTHON)")
    theirs = subprocess.run([py, "-m", "torch.utils.collect_env"], capture_output=True, text=True,
                            timeout=300).stdout
    ours = run_cli("check", "--collect-env", "--python", py, "--fail-on", "never", timeout=120).stdout
    t, o = _fields(theirs), _fields(ours)
    # lscpu's own lines of collect_env's CPU section are not fields of ours
    cpu = theirs.split("\nCPU:\n", 1)[1].split("\n\n", 1)[0]
    labels = [k for k in t if k + " " not in cpu and not cpu.startswith(k)]
    assert [k for k in labels if k not in o] == []
    for k in ("PyTorch version:", "Is debug build:", "OS:", "Libc version:", "Python version:",
              "Python platform:", "CUDA runtime version:"):
        assert o[k] == t[k], k


def test_collect_env_block_has_every_collect_env_field(app_venv, tmp_path):
    proc = run_cli("check", "--collect-env", "--python", str(app_venv / "bin/python"), "--fail-on", "never",
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for label in COLLECT_ENV_LABELS:
        assert any(ln.startswith(label) for ln in lines), label
    want = _wheel_versions(app_venv)
    assert f"ONNX Runtime: {want['onnxruntime']} (flavour cpu)" in proc.stdout
    assert "PyTorch version: not found" in lines and "TensorRT: not found" in lines
    assert f"[pip] onnxruntime=={want['onnxruntime']}" in lines
    # same layout on a snapshot: every line present, in the same order
    rep = run_cli("check", "--collect-env", "--snapshot", str(app_snapshot(tmp_path, ["torch-2.3.1-cu121"], SMI_418)),
                  "--fail-on", "never")
    other = rep.stdout.splitlines()
    strip = lambda ls: [ln.split(":")[0] for ln in ls if ":" in ln and not ln.startswith(("  ", "["))]  # noqa: E731
    assert strip(other)[1:] == strip(lines)[1:]
    assert "CUDA used to build PyTorch: 12.1" in other and "Nvidia driver version: 418.67" in other
    assert any(ln.startswith("Is CUDA available: No (built for CUDA 12.1") for ln in other)


def test_python_option_errors_are_one_line(tmp_path):
    proc = run_cli("check", "--python", str(tmp_path / "nope"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--python" in proc.stderr


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_onnxruntime_gpu_whose_cudnn_major_the_loader_cannot_find(tmp_path):
    """The CUDA provider of onnxruntime-gpu 1.18.0 (fixture) stood in for by an ELF built here
    with the same kind of DT_NEEDED entries; the board's loader cache has no cuDNN 9."""
    build = tmp_path / "build"
    build.mkdir()
    for soname in ("libcudnn.so.9", "libcublasLt.so.12"):
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(build / soname), f"-Wl,-soname,{soname}",
                        "-x", "c", "-"], input="int f(void){return 0;}\n", text=True, check=True)
    prov = build / "libonnxruntime_providers_cuda.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(prov), "-x", "c", "-", f"-L{build}",
                    "-Wl,--no-as-needed", "-l:libcudnn.so.9", "-l:libcublasLt.so.12"],
                   input="int g(void){return 1;}\n", text=True, check=True)
    snap = app_snapshot(tmp_path, ["onnxruntime-gpu-1.18.0"], SMI_566)
    shutil.copy(str(prov), str(snap / "fs" / APP.lstrip("/") /
                               "lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so"))
    libc = "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
    data = {"command": [{"argv": ["nvidia-smi", "-q"], "returncode": 0, "stdout": SMI_566},
                        {"argv": ["ldconfig", "-p"], "returncode": 0,
                         "stdout": "1 libs found in cache `/etc/ld.so.cache'\n" + libc}]}
    (snap / "commands.toml").write_text(tomli_w.dumps(data, multiline_strings=True))
    rep = check_json(snap)
    ort = rep["facts"]["frameworks"]["onnxruntime"]
    assert ort["cuda_libs_missing"] == ["libcudnn.so.9", "libcublasLt.so.12"]
    f = [x for x in findings(rep) if "cannot find" in x["message"]]
    assert len(f) == 1 and f[0]["severity"] == "error" and "libcudnn.so.9" in f[0]["message"]


def test_verify_reports_a_cuda_wheel_replaced_by_the_cpu_one(tmp_path):
    gpu = app_snapshot(tmp_path / "a", ["torch-2.3.1-cu121"])
    cpu = app_snapshot(tmp_path / "b", ["torch-2.3.1-aarch64-cpu"])
    lockfile = tmp_path / "env.lock"
    proc = run_cli("lock", "--snapshot", str(gpu), "-o", str(lockfile))
    assert proc.returncode == 0, proc.stderr
    assert 'cuda = "12.1"' in lockfile.read_text()
    proc = run_cli("verify", str(lockfile), "--snapshot", str(cpu), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    msgs = [f["message"] for f in json.loads(proc.stdout)["findings"]]
    assert any("frameworks.torch.cuda" in m and "12.1" in m for m in msgs), msgs


def test_own_interpreter_answered_in_process_equals_asking_it(tmp_path):
    """npu-doctor's own interpreter is answered from its own sys.path (no second
    interpreter started); the sites must be those the query script gets from a subprocess.
    Run in a fresh interpreter: pytest adds its own entries to this process's sys.path."""
    script = (
        "import json, sys\n"
        "from npu_doctor.host import LiveHost\n"
        "from npu_doctor.pyenv import query\n"
        "h = LiveHost()\n"
        "own = query(h, sys.executable, 'npu-doctor')\n"
        "asked = query(h, sys.executable, '--python')\n"
        "print(json.dumps([own.sites, asked.sites, own.source, asked.source, own.version, asked.version,"
        " own.prefix, asked.prefix]))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # a script file, as the console script is: its directory is sys.path[0] there (and must
    # not become a site), where `-c` has ''
    (tmp_path / "own.py").write_text(script)
    out = subprocess.run([sys.executable, str(tmp_path / "own.py")], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    own, asked, own_src, asked_src, own_v, asked_v, own_p, asked_p = json.loads(out.stdout)
    assert own == asked and own  # same import path, not empty
    assert (own_v, own_p) == (asked_v, asked_p)
    assert "this process" in own_src and asked_src.startswith("$ ")
