"""What each ML framework in a Python environment is and was built for, read from its files.

Nothing is imported: versions come from the dist-info folders (`npu_doctor.pyenv`), build
facts from the small Python files the wheels carry, providers and plugins from the library
file names. One record per framework (`frameworks.<name>` facts):

    torch          version, cuda ("12.1" | None for a CPU/ROCm wheel), hip, xpu, git_version,
                   debug, backend (cuda | rocm | xpu | cpu), cudnn / nccl / cuda_runtime /
                   cublas (the bundled nvidia-* wheels), python, path
                   (torch/version.py, written by tools/generate_torch_version.py at build time)
    torch_npu      version, git_version                     (torch_npu/version.py)
    onnxruntime    version, flavour (cpu | gpu | openvino | qnn | directml | rocm | vitisai |
                   training), distributions ["onnxruntime-gpu 1.19.2", ...], providers
                   ["cuda", "tensorrt", ...] (capi/libonnxruntime_providers_*.so),
                   package_name, cuda, cudnn (capi/build_and_package_info.py)
    openvino       version, plugins [file names], devices ["CPU", "GPU", "NPU"] (openvino/libs)
    tensorflow     version, flavour, cuda, cudnn, is_cuda_build, is_rocm_build
                   (tensorflow/python/platform/build_info.py)
    tflite_runtime, ai_edge_litert   version, edgetpu_delegate (path the loader finds for
                   libedgetpu.so.1, or None), edgetpu_delegate_found (bool)
    rknn_toolkit_lite2, rknn_toolkit2, hailort, pycoral   version
    tensorrt       version, cuda (major, from the tensorrt-cuNN dist names), distributions
    jax            version, jaxlib, cuda (major, from jax-cudaNN-plugin/-pjrt), rocm

Each record also has `python` (the interpreter of the environment it was found in) and
`path` (its dist-info folder); a framework found in several environments is taken from the
first one (`--python` order) and listed with all of them in `environments`.
"""

from __future__ import annotations

import ast
import posixpath
import re
from typing import Any, Dict, List, Optional, Tuple

from .errors import HostError
from .host import Host
from .lazyregex import lazy
from .pyenv import Dist, Env

#: onnxruntime distribution name -> flavour (the wheels all install the `onnxruntime` package).
ORT_FLAVOURS = {
    "onnxruntime": "cpu", "onnxruntime-gpu": "gpu", "onnxruntime-openvino": "openvino",
    "onnxruntime-qnn": "qnn", "onnxruntime-directml": "directml", "onnxruntime-rocm": "rocm",
    "onnxruntime-vitisai": "vitisai", "onnxruntime-training": "training",
    "onnxruntime-silicon": "coreml", "onnxruntime-cann": "cann", "onnxruntime-migraphx": "migraphx",
    "ort-nightly": "cpu", "ort-nightly-gpu": "gpu", "ort-nightly-directml": "directml",
    "ort-nightly-qnn": "qnn", "onnxruntime-gpu-cuda11": "gpu",
}
TF_DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
            "tensorflow-aarch64", "tensorflow-rocm", "tf-nightly", "tf-nightly-cpu")
#: openvino/libs plugin file -> device name
OV_DEVICES = (("intel_cpu_plugin", "CPU"), ("arm_cpu_plugin", "CPU"), ("intel_gpu_plugin", "GPU"),
              ("intel_npu_plugin", "NPU"))
SIMPLE = ("rknn_toolkit_lite2", "rknn_toolkit2", "hailort", "pycoral")
_ASSIGN_RE = lazy(r"^(\w+)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.M)
_PAIR_RE = lazy(r"""['"](\w+)['"]\s*[:,]\s*('[^']*'|"[^"]*"|True|False|None|\d+)""")


def parse_assignments(text: str) -> Dict[str, Any]:
    """`name = literal` / `name: Optional[str] = literal` lines of a generated version file
    (torch/version.py, torch_npu/version.py, onnxruntime's build_and_package_info.py) as a
    dict; values that are not literals are left out."""
    out: Dict[str, Any] = {}
    for m in _ASSIGN_RE.finditer(text):
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
    return out


def parse_tf_build_info(text: str) -> Dict[str, Any]:
    """('cuda_version', '12.3') / 'cuda_version': '12.3' pairs of tensorflow's build_info.py."""
    out: Dict[str, Any] = {}
    for k, v in _PAIR_RE.findall(text):
        try:
            out.setdefault(k, ast.literal_eval(v))
        except (ValueError, SyntaxError):
            continue
    return out


def _read(host: Host, path: str) -> Optional[str]:
    try:
        return host.read_text(path, 1024 * 1024)
    except HostError:
        return None


def _listdir(host: Host, path: str) -> List[str]:
    try:
        return host.listdir(path)
    except HostError:
        return []


def _base(dist: Dist, env: Env) -> Dict[str, Any]:
    return {"version": dist.version, "python": env.python, "path": dist.path}


def _nvidia(dists: Dict[str, Dist], stem: str) -> Optional[str]:
    """Version of a bundled nvidia-<stem>-cuNN wheel (nvidia-cudnn-cu12 8.9.2.26)."""
    for norm in sorted(dists):
        if re.match(rf"nvidia-{stem}-cu\d+$", norm):
            return dists[norm].version
    return None


def torch(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = env.dists.get("torch")
    if dist is None:
        return None
    rec = _base(dist, env)
    src = posixpath.join(dist.site, "torch/version.py")
    text = _read(host, src)
    if text is not None:
        v = parse_assignments(text)
        rec["version"] = v.get("__version__", dist.version)
        for k in ("cuda", "hip", "xpu", "git_version", "debug"):
            if k in v:
                rec[k] = v[k]
        if "cuda" in v or "hip" in v:
            rec["backend"] = ("cuda" if v.get("cuda") else "rocm" if v.get("hip")
                              else "xpu" if v.get("xpu") or "+xpu" in str(rec["version"]) else "cpu")
    else:
        src = dist.path
    for key, stem in (("cudnn", "cudnn"), ("nccl", "nccl"), ("cuda_runtime", "cuda-runtime"),
                      ("cublas", "cublas")):
        got = _nvidia(env.dists, stem)
        if got:
            rec[key] = got
    return rec, src


def torch_npu(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = env.dists.get("torch-npu")
    if dist is None:
        return None
    rec = _base(dist, env)
    src = posixpath.join(dist.site, "torch_npu/version.py")
    text = _read(host, src)
    if text is not None:
        v = parse_assignments(text)
        rec["version"] = v.get("__version__", dist.version)
        if v.get("git_version"):
            rec["git_version"] = v["git_version"]
    else:
        src = dist.path
    return rec, src


def onnxruntime(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    found = [d for n, d in sorted(env.dists.items()) if n in ORT_FLAVOURS]
    if not found:
        return None
    capi = posixpath.join(found[0].site, "onnxruntime/capi")
    info_src = posixpath.join(capi, "build_and_package_info.py")
    info = parse_assignments(_read(host, info_src) or "")
    owner = normalize_owner(info.get("package_name"), found)
    rec = _base(owner, env)
    rec["version"] = info.get("__version__", owner.version)
    rec["flavour"] = ORT_FLAVOURS[owner.norm]
    rec["distributions"] = [f"{d.norm} {d.version}" for d in found]
    if info.get("package_name"):
        rec["package_name"] = info["package_name"]
    for k in ("cuda_version", "cudnn_version"):
        if info.get(k):
            rec[k.split("_")[0]] = str(info[k])
    names = _listdir(host, capi)
    rec["providers"] = sorted({m.group(1) for n in names
                               for m in [re.match(r"libonnxruntime_providers_(\w+?)\.so", n)] if m
                               and m.group(1) != "shared"})
    rec["provider_libraries"] = sorted(posixpath.join(capi, n) for n in names
                                       if n.startswith("libonnxruntime_providers_") and ".so" in n)
    return rec, info_src if info else capi


def normalize_owner(package_name: Any, found: List[Dist]) -> Dist:
    """The distribution whose files are on disk: build_and_package_info's package_name when it
    names one of those installed, else the first."""
    if isinstance(package_name, str):
        for d in found:
            if d.norm == package_name.replace("_", "-").lower():
                return d
    return found[0]


def openvino(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = env.dists.get("openvino")
    if dist is None:
        return None
    rec = _base(dist, env)
    libs = posixpath.join(dist.site, "openvino/libs")
    plugins = sorted(n for n in _listdir(host, libs) if "_plugin" in n and ".so" in n)
    rec["plugins"] = plugins
    rec["devices"] = [dev for key, dev in OV_DEVICES if any(key in p for p in plugins)]
    rec["devices"] = sorted(set(rec["devices"]), key=["CPU", "GPU", "NPU"].index)
    return rec, libs


def tensorflow(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = next((env.dists[n] for n in TF_DISTS if n in env.dists), None)
    if dist is None:
        return None
    rec = _base(dist, env)
    rec["flavour"] = dist.norm
    src = posixpath.join(dist.site, "tensorflow/python/platform/build_info.py")
    info = parse_tf_build_info(_read(host, src) or "")
    for k in ("cuda_version", "cudnn_version"):
        if info.get(k):
            rec[k.split("_")[0]] = str(info[k])
    for k in ("is_cuda_build", "is_rocm_build", "is_tensorrt_build"):
        if k in info:
            rec[k] = info[k]
    return rec, src if info else dist.path


def edgetpu_delegate(host: Host, package_dir: str) -> Optional[Dict[str, Any]]:
    """Whether the loader finds libedgetpu.so.1 for the package's interpreter module (what
    `load_delegate('libedgetpu.so.1')` dlopens: LD_LIBRARY_PATH, the module's RUNPATH, the
    loader cache, the default directories). None when there is no such module."""
    from .linker.elf import ElfError, NotElf
    from .linker.ldso import Resolver

    mods = sorted(n for n in _listdir(host, package_dir) if n.endswith(".so") and "interpreter" in n)
    if not mods:
        return None
    requester = posixpath.join(package_dir, mods[0])
    try:
        resolver = Resolver(host)
        info = resolver.elf(requester)
        if info is None:
            return None
        res = resolver.resolve("libedgetpu.so.1", requester, info)
    except (HostError, NotElf, ElfError):
        return None
    return {"edgetpu_delegate": res.path, "edgetpu_delegate_found": res.path is not None}


def tflite_family(host: Host, env: Env, norm: str, package: str) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = env.dists.get(norm)
    if dist is None:
        return None
    rec = _base(dist, env)
    rec["package"] = posixpath.join(dist.site, package)
    return rec, dist.path


def tensorrt(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    found = [d for n, d in sorted(env.dists.items()) if re.match(r"tensorrt(-cu\d+)?(-libs|-bindings)?$", n)]
    if not found:
        return None
    main = next((d for d in found if d.norm == "tensorrt"), found[0])
    rec = _base(main, env)
    rec["distributions"] = [f"{d.norm} {d.version}" for d in found]
    majors = {m.group(1) for d in found for m in [re.search(r"-cu(\d+)", d.norm)] if m}
    if len(majors) == 1:
        rec["cuda"] = majors.pop()
    return rec, main.path


def jax(host: Host, env: Env) -> Optional[Tuple[Dict[str, Any], str]]:
    dist = env.dists.get("jax")
    if dist is None:
        return None
    rec = _base(dist, env)
    if "jaxlib" in env.dists:
        rec["jaxlib"] = env.dists["jaxlib"].version
    for n in sorted(env.dists):
        m = re.match(r"jax-cuda(\d+)-(plugin|pjrt)$", n)
        if m:
            rec["cuda"] = m.group(1)
        if re.match(r"jax-rocm\d*-(plugin|pjrt)$", n):
            rec["rocm"] = env.dists[n].version
    return rec, dist.path


def detect(host: Host, env: Env) -> Dict[str, Tuple[Dict[str, Any], str]]:
    """{framework: (record, source)} of one environment."""
    out: Dict[str, Tuple[Dict[str, Any], str]] = {}
    probes = [("torch", lambda: torch(host, env)), ("torch_npu", lambda: torch_npu(host, env)),
              ("onnxruntime", lambda: onnxruntime(host, env)), ("openvino", lambda: openvino(host, env)),
              ("tensorflow", lambda: tensorflow(host, env)),
              ("tflite_runtime", lambda: tflite_family(host, env, "tflite-runtime", "tflite_runtime")),
              ("ai_edge_litert", lambda: tflite_family(host, env, "ai-edge-litert", "ai_edge_litert")),
              ("tensorrt", lambda: tensorrt(host, env)), ("jax", lambda: jax(host, env))]
    for name in SIMPLE:
        def simple(name: str = name) -> Optional[Tuple[Dict[str, Any], str]]:
            d = env.dists.get(name.replace("_", "-"))
            return (_base(d, env), d.path) if d else None
        probes.append((name, simple))
    for name, fn in probes:
        got = fn()
        if got is not None:
            got[0]["name"] = name
            out[name] = got
    return out
