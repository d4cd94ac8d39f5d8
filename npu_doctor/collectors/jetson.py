"""NVIDIA Jetson: L4T release, JetPack, CUDA/cuDNN/TensorRT versions, GPU load.

Facts written:
- `sdks.l4t.{version, revision, board, gcid, date}` from /etc/nv_tegra_release (else the
  `nvidia-l4t-core` package version);
- `sdks.jetpack.{version, build}` from the `nvidia-jetpack` package (`dpkg-query -W`);
- `sdks.cudnn.version` (cudnn_version.h / cudnn.h, else the libcudnn package),
  `sdks.tensorrt.version` (libnvinfer.so.X.Y.Z, else the tensorrt / libnvinfer package);
  the CUDA toolkit is read by the `cuda-toolkit` probe (probes/nvidia.toml);
- one `accelerators[]` record, vendor `jetson`: name from the device tree `model`, and
  `utilization_percent` from the nvgpu `load` attribute (per mille).
Thermal zones are generic (the thermal probe); the inventory maps gpu-thermal to this record.

The deriver `jetson_matrix` looks the L4T release up in the `jetpack-l4t` matrix of
rules/jetson.toml: `sdks.l4t.jetpack` (the JetPack release of that L4T) and the CUDA/cuDNN/
TensorRT it ships, `compat[]` entries (not-in-matrix for an unknown L4T); and from the JetPack
version alone `sdks.jetpack.l4t_release`, the L4T major release that JetPack belongs to (a log
may name the JetPack but not the L4T: `apt show nvidia-jetpack`, JETSON_JETPACK=...).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import versions
from ..facts import Facts
from ..host import Host
from ..matrices import matrix_rows, matrix_source, set_compat
from ..parsers.dpkg import upstream_version
from ..parsers.jetson import (
    gpu_load_percent,
    jetpack_version,
    parse_cudnn_header,
    parse_nv_tegra_release,
    tensorrt_from_libname,
)
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector, deriver
from .packages import installed_packages

RELEASE_FILE = "/etc/nv_tegra_release"
MODEL_FILES = ("/proc/device-tree/model", "/sys/firmware/devicetree/base/model")
GPU_LOAD_GLOBS = ("/sys/devices/gpu.0/load", "/sys/devices/platform/gpu.0/load",
                  "/sys/devices/*.gpu/load", "/sys/devices/platform/*.gpu/load",
                  "/sys/devices/platform/bus@0/*.gpu/load", "/sys/devices/*.ga10b/load",
                  "/sys/devices/platform/*.ga10b/load", "/sys/devices/*.gv11b/load",
                  "/sys/devices/*.gp10b/load")
CUDNN_HEADERS = ("/usr/include/cudnn_version.h", "/usr/include/aarch64-linux-gnu/cudnn_version_v*.h",
                 "/usr/include/cudnn_version_v*.h", "/usr/local/cuda/include/cudnn_version.h",
                 "/usr/include/cudnn.h", "/usr/include/aarch64-linux-gnu/cudnn_v*.h",
                 "/usr/local/cuda/include/cudnn.h")
TRT_LIBS = ("/usr/lib/aarch64-linux-gnu/libnvinfer.so.*", "/usr/lib/aarch64-linux-gnu/nvidia/libnvinfer.so.*",
            "/usr/lib/x86_64-linux-gnu/libnvinfer.so.*", "/usr/local/cuda/lib64/libnvinfer.so.*")


@collector("jetson")
def collect_jetson(ctx: ProbeContext) -> None:
    facts = ctx.facts
    text = ctx.read(RELEASE_FILE)
    pkgs: Optional[Dict[str, str]] = None
    l4t: Dict[str, Any] = {}
    if text:
        try:
            l4t = parse_nv_tegra_release(text)
        except ValueError:
            l4t = {}
        for key in ("version", "revision", "board", "gcid", "date", "kernel_variant"):
            facts.set(f"sdks.l4t.{key}", l4t.get(key), RELEASE_FILE)
    if not l4t:
        pkgs = installed_packages(ctx)
        core = pkgs.get("nvidia-l4t-core")
        if core:
            facts.set("sdks.l4t.version", upstream_version(core), "$ dpkg-query -W")
            facts.set("sdks.l4t.build", core, "$ dpkg-query -W")
    if facts.get("sdks.l4t.version") is None:
        if text:
            raise ProbeError(f"{RELEASE_FILE}: no 'R<major> (release), REVISION: <x.y>' line "
                             f"(first line: {text.splitlines()[0][:80]!r})")
        raise NoData("not a Jetson (no /etc/nv_tegra_release, no nvidia-l4t-core package)")

    if pkgs is None:
        pkgs = installed_packages(ctx)
    jp = pkgs.get("nvidia-jetpack")
    if jp:
        facts.set("sdks.jetpack.version", jetpack_version(jp), "$ dpkg-query -W")
        facts.set("sdks.jetpack.build", jp, "$ dpkg-query -W")

    # cuDNN
    for pattern in CUDNN_HEADERS:
        hit = None
        for path in ctx.host.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]:
            t = ctx.read(path)
            v = parse_cudnn_header(t) if t else None
            if v:
                hit = (v, path)
                break
        if hit:
            facts.set("sdks.cudnn.version", hit[0], hit[1])
            facts.set("sdks.cudnn.path", hit[1], hit[1])
            break
    else:
        for name in sorted(pkgs):
            if name.startswith("libcudnn") and not name.endswith(("-dev", "-samples", "-doc")):
                facts.set("sdks.cudnn.version", upstream_version(pkgs[name]).split("+")[0],
                          "$ dpkg-query -W")
                break

    # TensorRT
    trt = None
    for pattern in TRT_LIBS:
        for path in ctx.host.glob(pattern):
            v = tensorrt_from_libname(path)
            if v and (trt is None or (versions.compare(v, trt[0]) or 0) > 0):
                trt = (v, path)
        if trt:
            break
    if trt:
        facts.set("sdks.tensorrt.version", trt[0], trt[1])
        facts.set("sdks.tensorrt.path", trt[1], trt[1])
    else:
        for name in ("tensorrt", "libnvinfer10", "libnvinfer8", "libnvinfer7", "libnvinfer6", "libnvinfer5"):
            if name in pkgs:
                facts.set("sdks.tensorrt.version", upstream_version(pkgs[name]).split("+")[0],
                          "$ dpkg-query -W")
                break

    # the integrated GPU as an accelerator
    rec: Dict[str, Any] = {"vendor": "jetson"}
    sources: Dict[str, str] = {}
    for path in MODEL_FILES:
        model = ctx.read(path)
        if model:
            rec["name"] = model.strip("\x00").strip()
            sources["name"] = path
            break
    if "name" not in rec:
        rec["name"] = f"NVIDIA Jetson (L4T {facts.get('sdks.l4t.version')})"
        sources["name"] = RELEASE_FILE
    for pattern in GPU_LOAD_GLOBS:
        paths = ctx.host.glob(pattern)
        if not paths:
            continue
        raw = ctx.read(paths[0])
        if raw is None:
            continue
        pct = gpu_load_percent(raw)
        if pct is not None:
            rec["utilization_percent"] = pct
            sources["utilization_percent"] = paths[0]
        else:
            rec["utilization_invalid"] = raw[:40]
            sources["utilization_invalid"] = paths[0]
        break
    rec["l4t_version"] = facts.get("sdks.l4t.version")
    sources["l4t_version"] = RELEASE_FILE
    facts.add_accelerator(rec, sources=sources)


def _row_for(l4t: str, rows: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    exact = [r for r in rows if versions.compare(str(r.get("l4t")), l4t) == 0]
    if exact:
        return exact[0]
    return None


# JetPack major -> L4T major release where the matrix has no row for a JetPack version
# (JetPack 5.0 / 5.0.1 developer previews are R34, 5.0.2 and later R35: both are matrix rows).
JETPACK_MAJOR_L4T = {"4": "32", "6": "36", "7": "38"}


def jetpack_l4t_release(jetpack: str, rows: List[Dict[str, Any]]) -> Optional[str]:
    """The L4T major release ("32", "35" ...) of a JetPack version: from the matrix rows whose
    JetPack is that version ("5.0.1" is the row "5.0.1 DP"), else from the JetPack major;
    None when the rows disagree or the major is not known (a bare "5": 5.0 DP is R34, 5.1 R35)."""
    if "." not in jetpack:
        return JETPACK_MAJOR_L4T.get(jetpack.strip())
    majors = set()
    for r in rows:
        jp = str(r.get("jetpack") or "").split()
        if jp and versions.compare(jp[0], jetpack) == 0:
            v = versions.normalize(str(r.get("l4t")))
            if v is not None:
                majors.add(str(v.release[0]))
    if len(majors) == 1:
        return majors.pop()
    if majors:
        return None
    v = versions.normalize(jetpack)
    if v is None:
        return None
    if v.release[0] == 5 and len(v.release) > 1 and v.release[1] >= 1:
        return "35"
    return JETPACK_MAJOR_L4T.get(str(v.release[0]))


@deriver(after=("nvidia_compat",))
def jetson_matrix(facts: Facts, host: Host) -> None:
    l4t = facts.get("sdks.l4t.version")
    rows = matrix_rows("jetpack-l4t")
    if not rows:
        return
    jp = facts.get("sdks.jetpack.version")
    if jp:
        rel = jetpack_l4t_release(str(jp), rows)
        if rel:
            facts.set("sdks.jetpack.l4t_release", rel, "rules/jetson.toml matrix jetpack-l4t")
    if not l4t:
        return
    row = _row_for(str(l4t), rows)
    src = "rules/jetson.toml matrix jetpack-l4t"
    if row is None:
        major = str(versions.normalize(str(l4t)).release[0]) if versions.normalize(str(l4t)) else "?"
        family = {"32": "4.x", "34": "5.0 (developer preview)", "35": "5.x", "36": "6.x",
                  "38": "7.x", "39": "7.x"}.get(major)
        if family:
            facts.set("sdks.l4t.jetpack_family", family, src)
        set_compat(facts, "jetpack-l4t", {"matrix": "jetpack-l4t", "subject": "L4T", "what": f"L4T {l4t}",
                       "status": "not-in-matrix",
                       "detail": f"JetPack family {family or 'unknown'} from the major release R{major}"}, matrix_source("jetpack-l4t"))
        return
    facts.set("sdks.l4t.jetpack", row.get("jetpack"), f"{src} ({row.get('source')})")
    for comp in ("cuda", "cudnn", "tensorrt"):
        if row.get(comp):
            facts.set(f"sdks.l4t.expected.{comp}", row[comp], f"{src} ({row.get('source')})")
    status = "ok"
    detail = [f"L4T {l4t} is JetPack {row.get('jetpack')}"]
    jp = facts.get("sdks.jetpack.version")
    if jp and not versions.prefix_match(str(row.get("jetpack")).split()[0], str(jp)) and \
            versions.compare(str(row.get("jetpack")).split()[0], str(jp)) != 0:
        facts.set("sdks.jetpack.matches_l4t", False)
        status = "mismatch"
        detail.append(f"nvidia-jetpack package {jp}")
    trt = facts.get("sdks.tensorrt.version")
    want = row.get("tensorrt")
    if trt and want:
        same_major = str(versions.normalize(str(trt)).release[0]) == str(want).split(".")[0] \
            if versions.normalize(str(trt)) else None
        if same_major is False:
            facts.set("sdks.tensorrt.matches_l4t", False)
            status = "mismatch"
            detail.append(f"TensorRT {trt} (JetPack ships {want})")
    set_compat(facts, "jetpack-l4t", {"matrix": "jetpack-l4t", "subject": "L4T", "what": f"L4T {l4t}",
                   "status": status, "detail": "; ".join(detail)}, matrix_source("jetpack-l4t"))
