"""The application's Python environments and frameworks (probes/frameworks.toml).

Collectors:
- `python_frameworks`: `python.environments[]` (npu_doctor.pyenv.Env.to_fact), `python.*` of
  the first environment (version, sys_version, compiler, bits, executable), and
  `frameworks.<name>` (npu_doctor.frameworks) from the first environment that has it, with
  `environments` listing every interpreter it was found under. onnxruntime's CUDA provider
  is resolved like ld.so does: `frameworks.onnxruntime.cuda_libs_missing`.
- `toolchain`: `toolchain.{gcc,clang,cmake}.version` (`<tool> --version`), and
  `cpu.inference_flags` (the /proc/cpuinfo flags that inference kernels dispatch on).

Derivers (after every probe):
- `frameworks.<name>.driver_check` = ok | minor-version-compat | too-old for a framework
  built for CUDA, against `drivers.nvidia.cuda_version`;
- `frameworks.<name>.cpu_only` {accelerator, fix} for a CPU-only wheel next to an NVIDIA GPU
  or an Intel NPU (the fix is the exact pip command, for that environment's interpreter);
- `frameworks.torch_npu.matrix` {status, torch, cann, source} (matrix `torch-npu-cann`);
- `frameworks.onnxruntime.openvino_matrix` {status, openvino, source}
  (matrix `onnxruntime-openvino`);
- `frameworks.openvino.npu_umd` {status, need, source} (matrix `intel-npu-release`).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .. import frameworks as fw
from .. import pyenv, versions
from ..errors import HostError
from ..facts import Facts
from ..host import Host
from ..matrices import matrix_rows as load_matrix
from ..namematch import any_match
from ..probes import NoData, ProbeContext
from ..registry import collector, deriver

#: /proc/cpuinfo flags that inference libraries (oneDNN, XNNPACK, MLAS, KleidiAI) dispatch on.
INFERENCE_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                   "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
                   "asimd", "asimddp", "asimdhp", "i8mm", "bf16", "sve", "sve2", "sme")
#: Distributions listed per environment: what collect_env lists (torch, numpy, mypy, flake8,
#: triton, optree, onnx) plus the frameworks and accelerator wheels of this field.
RELEVANT_PACKAGES = ("torch", "torch-*", "torchvision", "torchaudio", "numpy", "mypy", "flake8",
                     "triton", "optree", "onnx", "onnx-*", "onnxruntime", "onnxruntime-*",
                     "ort-nightly*", "openvino", "openvino-*", "tensorflow", "tensorflow-*",
                     "tf-nightly*", "tflite-runtime", "ai-edge-litert", "tensorrt", "tensorrt-*",
                     "jax", "jaxlib", "jax-*", "nvidia-*", "rknn-toolkit*", "rknnlite*", "hailort",
                     "pycoral", "intel-npu-acceleration-library", "pytorch-triton*")
TOOLS = (("gcc", r"gcc[^\n]*?\)?\s+(\d+\.\d+(?:\.\d+)?)"), ("clang", r"clang version (\S+)"),
         ("cmake", r"cmake version (\S+)"))


@collector("python_frameworks")
def collect_python_frameworks(ctx: ProbeContext) -> None:
    envs = pyenv.environments(ctx.host, ctx.run)
    if not envs:
        raise NoData("no Python environment to inspect")
    for i, env in enumerate(envs):
        rec = env.to_fact()
        rec["packages"] = {n: d.version for n, d in sorted(env.dists.items())
                           if any_match(n, RELEVANT_PACKAGES)}
        conda = _conda_packages(ctx, env)
        if conda is not None:
            rec["conda_packages"] = conda
        ctx.facts.set(f"python.environments[{i}]", rec, env.source or env.python)
    environ = ctx.host.environ()
    for var in ("CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES"):
        if var in environ:
            ctx.facts.set(f"python.environ.{var}", environ[var], f"${var}")
    first = envs[0]
    src = first.source or first.python
    ctx.facts.set("python.executable", first.python, src)
    for key in ("version", "sys_version", "bits"):
        ctx.facts.set(f"python.{key}", getattr(first, key), src)
    m = re.search(r"\[(GCC|Clang)\s+([^\]\s]+)", first.sys_version or "")
    if m:
        ctx.facts.set("python.compiler", f"{m.group(1)} {m.group(2)}", src)
    found: Dict[str, List[str]] = {}
    for env in envs:
        for name, (rec, source) in fw.detect(ctx.host, env).items():
            found.setdefault(name, []).append(env.python)
            if len(found[name]) > 1:
                continue
            # one subtree: a known None (torch built for no CUDA) stays null, not absent
            ctx.facts.set(f"frameworks.{name}", rec, source)
    for name, pythons in found.items():
        ctx.facts.set(f"frameworks.{name}.environments", pythons, f"frameworks.{name}.python")


def _conda_packages(ctx: ProbeContext, env: "pyenv.Env") -> Optional[Dict[str, str]]:
    """{name: version} of the relevant packages of a conda environment (conda-meta/*.json
    file names are NAME-VERSION-BUILD.json), or None when it is not one."""
    if not env.prefix:
        return None
    try:
        names = ctx.host.listdir(env.prefix.rstrip("/") + "/conda-meta")
    except HostError:
        return None
    out = {}
    for n in names:
        m = re.match(r"(.+)-([^-]+)-([^-]+)\.json$", n)
        if m and any_match(m.group(1), RELEVANT_PACKAGES + ("cudatoolkit", "mkl", "magma")):
            out[m.group(1)] = m.group(2)
    return dict(sorted(out.items()))


def ort_cuda_libs(host: Host, lib: str) -> Optional[Dict[str, List[str]]]:
    """The CUDA/cuDNN libraries the CUDA execution provider needs and those the loader cannot
    find. ORT loads the provider at session creation and, when that fails, logs one line and
    runs on the CPU."""
    from ..linker.elf import ElfError, NotElf
    from ..linker.ldso import Resolver

    try:
        node = Resolver(host).tree(lib, ("libpython3*.so*", "libonnxruntime*.so*"))[0]
    except (HostError, NotElf, ElfError, IndexError):
        return None
    return {"cuda_libs_needed": [n for n in node.info.needed if re.match(r"lib(cu|nv)", n)],
            "cuda_libs_missing": list(node.missing)}


@deriver(after=("remedies_for_logged_loader_errors",))
def derive_framework_libraries(facts: Facts, host: Host) -> None:
    """ELF checks of framework libraries, after the probes (so that they never run beside
    the library preflight and its measurements): the onnxruntime CUDA provider's
    dependencies, and the Edge TPU delegate of tflite-runtime / ai-edge-litert."""
    fws = facts.get("frameworks")
    if not isinstance(fws, dict):
        return
    ort = fws.get("onnxruntime") or {}
    lib = next((p for p in ort.get("provider_libraries", []) if "providers_cuda" in p), None)
    if lib:
        got = ort_cuda_libs(host, lib)
        for k, v in (got or {}).items():
            facts.set(f"frameworks.onnxruntime.{k}", v, f"ELF dynamic section of {lib}")
    for name in ("tflite_runtime", "ai_edge_litert"):
        pkg = (fws.get(name) or {}).get("package")
        got = fw.edgetpu_delegate(host, pkg) if pkg else None
        for k, v in (got or {}).items():
            facts.set(f"frameworks.{name}.{k}", v, f"loader search for libedgetpu.so.1 from {pkg}")


@collector("toolchain")
def collect_toolchain(ctx: ProbeContext) -> None:
    for tool, rx in TOOLS:
        try:
            res = ctx.run([tool, "--version"], timeout=5)
        except HostError:
            continue
        m = re.search(rx, res.stdout) if res.ok else None
        if m:
            ctx.facts.set(f"toolchain.{tool}.version", m.group(1), res.source)
            ctx.facts.set(f"toolchain.{tool}.banner", res.stdout.strip().splitlines()[0], res.source)
    text = ctx.read("/proc/cpuinfo") or ""
    m = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    if m:
        have = set(m.group(1).split())
        ctx.facts.set("cpu.inference_flags", [f for f in INFERENCE_FLAGS if f in have], "/proc/cpuinfo")
    if not ctx.facts.data:
        raise NoData("no compiler, build tool or CPU flags found")


# -- derivers ----------------------------------------------------------------------------------
def _major(v: Any) -> Optional[int]:
    m = re.match(r"(\d+)", str(v or ""))
    return int(m.group(1)) if m else None


def driver_check(built: str, driver: str) -> Optional[str]:
    """ok | minor-version-compat | too-old for a framework built for CUDA `built` ("12.4" or
    just "12") on a driver whose highest CUDA is `driver` ("12.2"). CUDA's minor version
    compatibility runs a 12.x build on any 12.y driver (>= 525), without PTX JIT of newer PTX
    (https://docs.nvidia.com/deploy/cuda-compatibility/)."""
    b, d = _major(built), _major(driver)
    if b is None or d is None:
        return None
    if b > d:
        return "too-old"
    if b == d and "." in str(built) and versions.compare(str(built), str(driver)) == 1:
        return "minor-version-compat"
    return "ok"


def _nvidia_present(facts: Facts) -> bool:
    accs = facts.get("accelerators") or []
    return bool(facts.get("drivers.nvidia.version")) or any(
        a.get("vendor") == "nvidia" for a in accs if isinstance(a, dict))


def _intel_npu_present(facts: Facts) -> bool:
    return any(a.get("vendor") == "intel-npu" for a in facts.get("accelerators") or [] if isinstance(a, dict))


def torch_cuda_wheel(torch_version: str, driver_cuda: Optional[str]) -> Optional[str]:
    """`cu124` etc.: the newest CUDA variant published for this torch release that the driver
    runs (matrix `torch-cuda-wheels`); the newest variant when the driver's CUDA is unknown."""
    mm = versions.major_minor(torch_version.split("+")[0])
    row = next((r for r in load_matrix("torch-cuda-wheels") if str(r.get("torch")) == mm), None)
    if row is None:
        return None
    variants = sorted(row.get("cuda", []), key=lambda v: int(v[2:]))
    if driver_cuda:
        ok = [v for v in variants if versions.compare(f"{v[2:-1]}.{v[-1]}", driver_cuda) not in (None, 1)]
        if ok:
            return ok[-1]
        return None
    return variants[-1] if variants else None


@deriver(after=("derive_framework_libraries", "nvidia_compat", "derive_intel_npu_compat"))
def derive_framework_backends(facts: Facts, host: Host) -> None:
    fws = facts.get("frameworks")
    if not isinstance(fws, dict):
        return
    driver = facts.get("drivers.nvidia.cuda_version")
    dsrc = facts.source_of("drivers.nvidia.cuda_version") or "drivers.nvidia.cuda_version"
    for name, rec in fws.items():
        if isinstance(rec, dict) and rec.get("cuda") and driver:
            check = driver_check(str(rec["cuda"]), str(driver))
            if check:
                facts.set(f"frameworks.{name}.driver_check", check, dsrc)
    nvidia, npu = _nvidia_present(facts), _intel_npu_present(facts)
    torch = fws.get("torch") or {}
    py = lambda rec: rec.get("python") or "python"  # noqa: E731
    if nvidia and torch.get("backend") == "cpu":
        base = str(torch.get("version", "")).split("+")[0]
        cu = torch_cuda_wheel(base, driver)
        fix = (f"{py(torch)} -m pip install --force-reinstall torch=={base} --index-url "
               f"https://download.pytorch.org/whl/{cu}") if cu else (
               f"{py(torch)} -m pip install --force-reinstall torch --index-url "
               "https://download.pytorch.org/whl/cu126  (pick the CUDA variant the driver runs: "
               "https://pytorch.org/get-started/locally/)")
        facts.set("frameworks.torch.cpu_only", {"accelerator": "NVIDIA GPU", "fix": fix,
                                               "wheel": cu}, facts.source_of("frameworks.torch.backend"))
    ort = fws.get("onnxruntime") or {}
    if ort:
        provs = set(ort.get("providers") or [])
        ver = ort.get("version")
        dists = " ".join(d.split()[0] for d in ort.get("distributions", []))
        if nvidia and not provs & {"cuda", "tensorrt"}:
            facts.set("frameworks.onnxruntime.cpu_only", {
                "accelerator": "NVIDIA GPU", "fix": f"{py(ort)} -m pip uninstall -y {dists} && "
                f"{py(ort)} -m pip install onnxruntime-gpu=={ver}"}, facts.source_of("frameworks.onnxruntime.providers"))
        elif npu and not provs & {"openvino"}:
            facts.set("frameworks.onnxruntime.cpu_only", {
                "accelerator": "Intel NPU", "fix": f"{py(ort)} -m pip uninstall -y {dists} && "
                f"{py(ort)} -m pip install onnxruntime-openvino"}, facts.source_of("frameworks.onnxruntime.providers"))
        _ort_openvino(facts, ort)
    _torch_npu(facts, fws)
    _openvino_npu(facts, fws.get("openvino") or {}, npu)


def _ort_openvino(facts: Facts, ort: Dict[str, Any]) -> None:
    ov = facts.get("frameworks.openvino.version")
    if ort.get("flavour") != "openvino" or not ov:
        return
    mm = versions.major_minor(str(ort.get("version")))
    row = next((r for r in load_matrix("onnxruntime-openvino")
                if versions.major_minor(str(r.get("onnxruntime"))) == mm), None)
    if row is None:
        return
    ok = versions.prefix_match(str(ov), str(row["openvino"]))
    facts.set("frameworks.onnxruntime.openvino_matrix", {
        "status": "ok" if ok else "mismatch", "openvino": row["openvino"],
        "source": row.get("source")}, f"rules/frameworks.toml matrix onnxruntime-openvino ({row.get('source')})")


def _torch_npu(facts: Facts, fws: Dict[str, Any]) -> None:
    tn = fws.get("torch_npu") or {}
    if not tn.get("version"):
        return
    rows = [r for r in load_matrix("torch-npu-cann") if str(r.get("torch_npu")) == str(tn["version"])]
    src = f"rules/frameworks.toml matrix torch-npu-cann ({rows[0].get('source') if rows else 'no row'})"
    if not rows:
        facts.set("frameworks.torch_npu.matrix", {"status": "not-in-matrix"}, src)
        return
    want_torch = str(rows[0]["torch"])
    canns = sorted({str(r["cann"]) for r in rows})
    rec: Dict[str, Any] = {"torch": want_torch, "cann": canns, "source": rows[0].get("source")}
    facts.set("frameworks.torch_npu.cann", canns, src)
    torch_v = str((fws.get("torch") or {}).get("version") or "").split("+")[0]
    cann = facts.get("sdks.cann.version")
    if torch_v and versions.compare(torch_v, want_torch) != 0:
        rec["status"] = "torch-mismatch"
    elif cann and not any(versions.prefix_match(str(cann), c) or versions.compare(str(cann), c) == 0
                          for c in canns):
        rec["status"] = "cann-mismatch"
    else:
        rec["status"] = "ok"
    facts.set("frameworks.torch_npu.matrix", rec, src)


def _openvino_npu(facts: Facts, ov: Dict[str, Any], npu: bool) -> None:
    if "NPU" not in (ov.get("devices") or []) or not npu:
        return
    umd = facts.get("sdks.npu_umd.version")
    src = "rules/intel_npu.toml matrix intel-npu-release"
    if not umd:
        facts.set("frameworks.openvino.npu_umd", {"status": "missing"}, facts.source_of("frameworks.openvino.devices"))
        return
    rows = [r for r in load_matrix("intel-npu-release") if r.get("openvino")]
    older = [r for r in rows if versions.compare(str(r["openvino"]), str(ov.get("version"))) not in (None, 1)]
    if not older:
        return
    row = max(older, key=lambda r: versions.normalize(str(r["openvino"])))  # type: ignore[arg-type,return-value]
    status = "too-old" if versions.compare(str(umd), str(row["umd"])) == -1 else "ok"
    facts.set("frameworks.openvino.npu_umd", {"status": status, "need": row["umd"],
                                              "verified_with": row["openvino"], "source": row.get("source")}, src)
