"""`npu-doctor check --collect-env`: the environment block people paste into bug reports.

The layout follows `python -m torch.utils.collect_env` (its labels, in its order: PyTorch
version ... CPU ... Versions of relevant libraries), then adds what that script cannot see
without importing each framework: every framework of this field, accelerators and SDKs, and
the findings. Every line is printed, with "not found" (nothing installed or exposed) or "not
checked" (would need importing a framework or running the model) rather than left out, and
the order never changes, so two blocks diff line by line. Built from the facts only, so a
snapshot replays the same block.

Source of the layout: https://github.com/pytorch/pytorch/blob/main/torch/utils/collect_env.py
(`env_info_fmt`).
"""

from __future__ import annotations

from typing import Any, Dict, List

from . import __version__
from .facts import lookup

NOT_FOUND = "not found"
NOT_CHECKED = "not checked (npu-doctor does not import frameworks)"
#: (label, framework key) of the Frameworks section, in print order.
FRAMEWORKS = (("PyTorch", "torch"), ("torch_npu", "torch_npu"), ("ONNX Runtime", "onnxruntime"),
              ("OpenVINO", "openvino"), ("TensorFlow", "tensorflow"), ("tflite-runtime", "tflite_runtime"),
              ("ai-edge-litert", "ai_edge_litert"), ("TensorRT", "tensorrt"), ("JAX", "jax"),
              ("rknn-toolkit-lite2", "rknn_toolkit_lite2"), ("rknn-toolkit2", "rknn_toolkit2"),
              ("HailoRT (pyhailort)", "hailort"), ("PyCoral", "pycoral"))


def _v(facts: Dict[str, Any], path: str, default: str = NOT_FOUND) -> str:
    val = lookup(facts, path)
    if val is None or val == "" or val == []:
        return default
    if isinstance(val, bool):
        return "Yes" if val else "No"
    if isinstance(val, list):
        return ", ".join(map(str, val))
    return str(val)


def _torch_build(facts: Dict[str, Any], key: str) -> str:
    t = lookup(facts, "frameworks.torch") or {}
    if not t:
        return NOT_FOUND
    if key not in t:
        return "unknown (torch/version.py not read)"
    return "None" if t[key] is None else str(t[key])


def _cuda_available(facts: Dict[str, Any]) -> str:
    """What `torch.cuda.is_available()` would say, from the build and the driver."""
    t = lookup(facts, "frameworks.torch") or {}
    if not t:
        return NOT_FOUND + " (no torch)"
    if t.get("backend") == "cpu":
        return "No (CPU-only torch build)"
    if t.get("cuda"):
        drv = lookup(facts, "drivers.nvidia.cuda_version")
        if not drv:
            return "No (torch is built for CUDA but no NVIDIA driver was found)"
        check = t.get("driver_check")
        if check == "too-old":
            return f"No (built for CUDA {t['cuda']}, the driver supports up to {drv})"
        return f"expected Yes (built for CUDA {t['cuda']}, driver supports {drv}; " + NOT_CHECKED + ")"
    return NOT_CHECKED


def _xpu(facts: Dict[str, Any]) -> str:
    t = lookup(facts, "frameworks.torch") or {}
    if not t:
        return NOT_FOUND + " (no torch)"
    if t.get("backend") in ("cpu", "cuda", "rocm"):
        return f"No (torch built for {t['backend']})"
    if t.get("backend") == "xpu":
        return "expected Yes (torch built for XPU; " + NOT_CHECKED + ")"
    return NOT_CHECKED


def _gpus(facts: Dict[str, Any]) -> str:
    gpus = [a for a in lookup(facts, "accelerators") or [] if a.get("vendor") in ("nvidia", "jetson")]
    if not gpus:
        return NOT_FOUND
    lines = [f"GPU {a.get('index', i)}: {a.get('name', '?')}" for i, a in enumerate(gpus)]
    return lines[0] if len(lines) == 1 else "\n" + "\n".join(lines)


def _os(facts: Dict[str, Any]) -> str:
    name = _v(facts, "os.pretty_name", "")
    arch = _v(facts, "arch", "")
    if not name:
        return NOT_FOUND
    return f"{name} ({arch})" if arch else name


def _tool(facts: Dict[str, Any], tool: str) -> str:
    ver = lookup(facts, f"toolchain.{tool}.version")
    if not ver:
        return NOT_FOUND
    banner = lookup(facts, f"toolchain.{tool}.banner") or ""
    return f"{ver} ({banner})" if banner and banner != str(ver) else str(ver)


def _python(facts: Dict[str, Any]) -> str:
    sv = lookup(facts, "python.sys_version")
    if not sv:
        return NOT_FOUND
    bits = lookup(facts, "python.bits")
    return f"{sv} ({bits}-bit runtime)" if bits else str(sv)


def _platform(facts: Dict[str, Any]) -> str:
    """platform.platform()'s form: Linux-<release>-<machine>-with-<libc><version>."""
    rel, arch = lookup(facts, "kernel.release"), lookup(facts, "arch")
    if not rel or not arch:
        return f"Python platform: {NOT_FOUND}"
    libc = lookup(facts, "libc") or {}
    tail = f"-with-{libc['name']}{libc['version']}" if libc.get("name") and libc.get("version") else ""
    return f"Python platform: Linux-{rel}-{arch}{tail}"


def _framework_line(facts: Dict[str, Any], key: str) -> str:
    r = lookup(facts, f"frameworks.{key}") or {}
    if not r:
        return NOT_FOUND
    parts: List[str] = [str(r.get("version", "?"))]
    extra = []
    for k, label in (("backend", "backend"), ("flavour", "flavour"), ("cuda", "CUDA"), ("hip", "ROCm"),
                     ("cudnn", "cuDNN"), ("nccl", "NCCL"), ("cann", "CANN"), ("jaxlib", "jaxlib"),
                     ("providers", "providers"), ("devices", "devices")):
        if r.get(k) not in (None, [], ""):
            val = ", ".join(map(str, r[k])) if isinstance(r[k], list) else r[k]
            extra.append(f"{label} {val}")
    if "edgetpu_delegate_found" in r:
        extra.append("Edge TPU delegate " + (str(r.get("edgetpu_delegate")) if r["edgetpu_delegate_found"]
                                             else "not found"))
    if len(r.get("distributions") or []) > 1:
        extra.append("installed: " + ", ".join(r["distributions"]))
    if extra:
        parts.append("(" + "; ".join(extra) + ")")
    parts.append(f"[{r.get('python', '?')}]")
    return " ".join(parts)


def _packages(facts: Dict[str, Any], key: str, tag: str) -> List[str]:
    out: List[str] = []
    for env in lookup(facts, "python.environments") or []:
        pk = env.get(key)
        if pk is None:
            continue
        for name, ver in pk.items():
            out.append(f"[{tag}] {name}=={ver}" + (f"  ({env.get('python')})"
                                                   if len(lookup(facts, 'python.environments')) > 1 else ""))
    if not out:
        return [f"[{tag}] {NOT_FOUND}"]
    return out


def render_collect_env(result: Any) -> str:
    """The block for `check --collect-env` (text, ends with a newline)."""
    f = result.facts.to_dict()
    host = result.host.describe()
    where = "this host" if host.get("source") == "live" else f"snapshot {host.get('path')}"
    env_lines = [f"  {e.get('python')} ({e.get('origin')}, Python {e.get('version', '?')}, "
                 f"{e.get('distributions', 0)} distributions" + (f"; {e['error']}" if e.get("error") else "") + ")"
                 for e in lookup(f, "python.environments") or []]
    libc = lookup(f, "libc") or {}
    libc_s = f"{libc.get('name')}-{libc.get('version')}" if libc.get("name") and libc.get("version") else NOT_FOUND
    cudnn = _v(f, "sdks.cudnn.version")
    if lookup(f, "frameworks.torch.cudnn"):
        cudnn += f" (system); {lookup(f, 'frameworks.torch.cudnn')} (nvidia-cudnn wheel)"
    lines = [
        f"npu-doctor {__version__} environment report ({where})",
        "",
        f"PyTorch version: {_v(f, 'frameworks.torch.version')}",
        f"Is debug build: {_torch_build(f, 'debug')}",
        f"CUDA used to build PyTorch: {_torch_build(f, 'cuda')}",
        f"ROCM used to build PyTorch: {_torch_build(f, 'hip')}",
        "",
        f"OS: {_os(f)}",
        f"Kernel: {_v(f, 'kernel.release')}",
        f"GCC version: {_tool(f, 'gcc')}",
        f"Clang version: {_tool(f, 'clang')}",
        f"CMake version: {_tool(f, 'cmake')}",
        f"Libc version: {libc_s}",
        "",
        f"Python version: {_python(f)}",
        _platform(f),
        f"Python compiler: {_v(f, 'python.compiler')}",
        "Python environments:" + ("" if env_lines else " " + NOT_FOUND),
        *env_lines,
        f"Is CUDA available: {_cuda_available(f)}",
        f"CUDA runtime version: {_v(f, 'sdks.cuda.version')}",
        f"CUDA_MODULE_LOADING set to: {_v(f, 'python.environ.CUDA_MODULE_LOADING', 'not set')}",
        f"GPU models and configuration: {_gpus(f)}",
        f"Nvidia driver version: {_v(f, 'drivers.nvidia.version')}",
        f"Driver CUDA version: {_v(f, 'drivers.nvidia.cuda_version')}",
        f"cuDNN version: {cudnn}",
        f"Is XPU available: {_xpu(f)}",
        f"HIP runtime version: {_v(f, 'sdks.rocm.version')}",
        f"MIOpen runtime version: {_v(f, 'sdks.miopen.version')}",
        f"Is XNNPACK available: {NOT_CHECKED}",
        f"Caching allocator config: {_v(f, 'python.environ.PYTORCH_CUDA_ALLOC_CONF', 'not set')}",
        "",
        "CPU:",
        f"Model name: {_v(f, 'cpu.model')}",
        f"CPU(s): {_v(f, 'cpu.count')}",
        f"Inference flags: {_v(f, 'cpu.inference_flags')}",
        "",
        "Frameworks:",
        *[f"{label}: {_framework_line(f, key)}" for label, key in FRAMEWORKS],
        "",
        "Accelerators:",
        *([f"{a.get('vendor', '?')} {a.get('name', '?')}"
           + (f" (driver {lookup(a, 'driver.version')})" if lookup(a, "driver.version") else "")
           for a in lookup(f, "accelerators") or []] or [NOT_FOUND]),
        "SDKs: " + (", ".join(f"{k} {v.get('version', '?')}" for k, v in sorted((lookup(f, "sdks") or {}).items())
                             if isinstance(v, dict)) or NOT_FOUND),
        "",
        "Versions of relevant libraries:",
        *_packages(f, "packages", "pip"),
        *_packages(f, "conda_packages", "conda"),
        "",
        "Findings: " + (", ".join(f"{x.severity} {x.id}" for x in result.findings) or "none"),
    ]
    return "\n".join(lines) + "\n"
