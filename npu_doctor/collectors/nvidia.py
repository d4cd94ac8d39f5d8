"""NVIDIA GPUs: driver, NVML, CUDA toolkit, per-GPU state from `nvidia-smi -q`.

Facts written:
- `drivers.nvidia.{version, open_kernel_module, built}` from /proc/driver/nvidia/version (the
  module in memory), else /sys/module/nvidia/version, else nvidia-smi's "Driver Version";
- `sdks.nvml.{version, path}` from the user-space library's file name
  (`libnvidia-ml.so.460.73.01`);
- `drivers.nvidia.cuda_version`: the CUDA level the driver supports (nvidia-smi "CUDA Version"),
  which is not an installed toolkit (on a Jetson: `sdks.l4t.cuda_driver_version`);
- `sdks.cuda.{version, path}` from the toolkit itself (`/usr/local/cuda*/version.json`,
  `version.txt`, or `nvcc --version`; the `cuda-toolkit` probe);
- `accelerators[]` (vendor nvidia) from `nvidia-smi -q` (see parsers.nvidia), or, when the
  command is not there (a snapshot of a report), from a `-q` report pasted into a runtime log,
  else from the default `nvidia-smi` table pasted there (parsers.nvidia_table: name, bus id and
  the readings of each row; a cell showing ERR! or N/A stays unknown);
- `nvidia.smi.{status, kind, error, message, returncode}` when nvidia-smi failed, plus an
  `inventory.incomplete` entry (the GPU count is unknown, not 0);
- `nvidia.upgrades[]` / `nvidia.last_upgrade`: NVIDIA package changes from apt's history.

The deriver `nvidia_compat` then checks the CUDA toolkit against the driver with the
`cuda-toolkit-min-driver` matrix of rules/nvidia.toml and fills `compat[]` and
`nvidia.mismatch_detail`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Dict, List, Optional, Tuple

from .. import versions
from ..errors import CommandNotFound, HostError
from ..facts import Facts
from ..host import Host
from ..matrices import matrix_rows, matrix_source, set_compat
from ..parsers.nvidia import (
    nvidia_upgrades,
    nvml_failure,
    parse_cuda_version_file,
    parse_nvcc_version,
    parse_nvidia_smi_q,
    parse_proc_driver_version,
)
from ..parsers.nvidia_query import parse_nvidia_query_gpu
from ..parsers.nvidia_table import parse_nvidia_smi_table
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector, deriver
from ..sysfs import module_version
from .pastes import NVSMI_BANNER

SMI = ["nvidia-smi", "-q"]
PROC_VERSION = "/proc/driver/nvidia/version"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")
APT_HISTORY = "/var/log/apt/history.log"
CUDA_DIRS = ("/usr/local/cuda", "/opt/cuda")


def _nvml_library(ctx: ProbeContext) -> Optional[Dict[str, str]]:
    for d in ctx.args.get("lib_dirs", LIB_DIRS):
        for path in ctx.host.glob(posixpath.join(d, "libnvidia-ml.so.*")):
            m = re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)*)$", path)
            if m:
                return {"version": m.group(1), "path": path}
    return None


@collector("nvidia")
def collect_nvidia(ctx: ProbeContext) -> None:
    facts = ctx.facts
    found = False
    text = ctx.read(PROC_VERSION)
    if text:
        try:
            drv = parse_proc_driver_version(text)
            facts.set("drivers.nvidia.version", drv["version"], PROC_VERSION)
            facts.set("drivers.nvidia.open_kernel_module", drv["open"], PROC_VERSION)
            facts.set("drivers.nvidia.built", drv.get("built"), PROC_VERSION)
            found = True
        except ValueError:
            pass
    if facts.get("drivers.nvidia.version") is None:
        v, vpath = module_version(ctx.host.read_attr, "nvidia")
        if v:
            facts.set("drivers.nvidia.version", v, vpath)
            found = True
    if facts.get("drivers.nvidia.version") is None:
        found = _add_proc_version_line(ctx) or found

    lib = _nvml_library(ctx)
    if lib:
        facts.set("sdks.nvml.version", lib["version"], lib["path"])
        facts.set("sdks.nvml.path", lib["path"], lib["path"])
        found = True

    history = ctx.read(APT_HISTORY)
    if history:
        ups = nvidia_upgrades(history)
        if ups:
            facts.set("nvidia.upgrades", ups[-10:], APT_HISTORY)
            facts.set("nvidia.last_upgrade", ups[-1], APT_HISTORY)

    try:
        res = ctx.run(SMI)
    except CommandNotFound:
        pasted = smi_report_in_logs(ctx)
        if pasted is not None and NVSMI_BANNER not in pasted[1] and _add_table(ctx):
            # a banner-less clock-reasons block (collectors.pastes) next to a pasted default
            # table: the table names the GPU; the block's reasons are that GPU's when it is the
            # only one (with several, which GPU the block came from is unknown)
            nv = [a for a in ctx.facts.data.get("accelerators", []) if a.get("vendor") == "nvidia"]
            if len(nv) == 1 and nv[0].get("pci_address"):
                rec = parse_nvidia_smi_q(pasted[1])["gpus"][0]
                rec["pci_address"] = nv[0]["pci_address"]
                ctx.facts.add_accelerator(rec, source=pasted[0])
            return
        if pasted is not None:
            _add_report(ctx, pasted[1], pasted[0])
            return
        tabled = _add_table(ctx)
        if _add_query(ctx) or tabled:
            return
        if not found:
            raise NoData("no NVIDIA driver, NVML library or nvidia-smi on this host")
        return
    src = res.source or "$ nvidia-smi -q"
    out = (res.stdout or "") + "\n" + (res.stderr or "")
    if res.timed_out:
        facts.set("nvidia.smi", {"status": "timeout", "kind": "timeout",
                                 "message": "nvidia-smi -q did not answer"}, src)
        _incomplete(ctx, "nvidia-smi -q timed out (a hung GPU or driver)")
        return
    has_report = "NVSMI LOG" in res.stdout
    fail = nvml_failure(out) if (res.returncode != 0 or not has_report) else None
    if fail is not None or res.returncode != 0:
        info: Dict[str, Any] = {"status": "failed", "returncode": res.returncode}
        info.update(fail or {"kind": "failed",
                             "message": (out.strip().splitlines() or ["(no output)"])[-1][:200]})
        if fail and fail.get("nvml_version") and facts.get("sdks.nvml.version") is None:
            facts.set("sdks.nvml.version", fail["nvml_version"], src)
        _incomplete(ctx, f"nvidia-smi failed: {info['message']}")
        if not has_report:
            facts.set("nvidia.smi", info, src)
            return
        # a partial report (e.g. one GPU lost, the others listed): keep both
        info["status"] = "partial"
        facts.set("nvidia.smi", info, src)
    if res.returncode == 0:
        facts.set("nvidia.smi.status", "ok", src)
    _add_report(ctx, res.stdout, src)


def _log_scans(ctx: ProbeContext) -> List[Any]:
    """The one pass over each runtime log (collectors.logscan.scan_logs, shared by the probes);
    [] when a log cannot be read (the runtime-logs probe reports that)."""
    from .logscan import scan_logs

    try:
        return scan_logs(ctx.host, ctx.options.get("signatures", []), ctx.options.get("catalogs"))
    except HostError:
        return []


def smi_report_in_logs(ctx: ProbeContext) -> Optional[Tuple[str, str]]:
    """(source, text) of the last `nvidia-smi -q` report pasted into a runtime log (a snapshot's
    logs/, `--log FILE`): from its "==...NVSMI LOG==..." banner to the end of the file or the
    next banner (collectors.logscan, the one pass over each log). Reports give the same facts
    as the command; None when no log has one."""
    found = None
    for scan in _log_scans(ctx):
        if scan.nvsmi_report is not None:
            found = (scan.name, scan.nvsmi_report)
    return found


def _add_proc_version_line(ctx: ProbeContext) -> bool:
    """drivers.nvidia.version from the last /proc/driver/nvidia/version line ("NVRM version:
    ...") pasted into a runtime log, for a snapshot of a report without the file: tools such
    as cuda_memtest print it as they start. True when a log had one."""
    scans = _log_scans(ctx)
    found = None
    for scan in scans:
        if scan.nvrm_version_line is not None:
            try:
                found = (scan.name, parse_proc_driver_version(scan.nvrm_version_line))
            except ValueError:
                continue
    if found is None:
        return False
    src, drv = found
    ctx.facts.set("drivers.nvidia.version", drv["version"], src)
    ctx.facts.set("drivers.nvidia.open_kernel_module", drv["open"], src)
    return True


def _add_table(ctx: ProbeContext) -> bool:
    """Facts of the last default `nvidia-smi` table pasted into a runtime log (header: driver and
    CUDA level; rows: the GPUs and their readings, parsers.nvidia_table). True when it had GPUs."""
    scans = _log_scans(ctx)
    found = None
    for scan in scans:
        if scan.nvsmi_table is not None:
            parsed = parse_nvidia_smi_table(scan.nvsmi_table)
            if parsed["gpus"]:
                found = (scan.name, parsed)
    if found is None or ctx.host.exists("/etc/nv_tegra_release"):
        return False
    src, parsed = found
    facts = ctx.facts
    if parsed["driver_version"] and facts.get("drivers.nvidia.version") is None:
        facts.set("drivers.nvidia.version", parsed["driver_version"], src)
    if parsed["cuda_version"]:
        facts.set("drivers.nvidia.cuda_version", parsed["cuda_version"], src)
    for rec in parsed["gpus"]:
        facts.add_accelerator(rec, source=src)
    return True


def _add_query(ctx: ProbeContext) -> bool:
    """GPU records of the last `--query-gpu` CSV with clock reasons pasted into a log
    (parsers.nvidia_query): a row with a bus id merges with that GPU; a row without one is the
    pasted table's GPU when the table has exactly one. True when a row was added."""
    scans = _log_scans(ctx)
    found = [(s.name, s.nvsmi_query) for s in scans if s.nvsmi_query is not None]
    if not found or ctx.host.exists("/etc/nv_tegra_release"):
        return False
    src, text = found[-1]
    try:
        rows = parse_nvidia_query_gpu(text)["gpus"]
    except ValueError:
        return False
    nv = [a for a in ctx.facts.data.get("accelerators", []) if a.get("vendor") == "nvidia"]
    for rec in rows:
        if "pci_address" not in rec and len(rows) == 1 and len(nv) == 1 and nv[0].get("pci_address"):
            rec["pci_address"] = nv[0]["pci_address"]
        ctx.facts.add_accelerator(rec, source=src)
    return bool(rows)


def _add_report(ctx: ProbeContext, text: str, src: str) -> None:
    """Facts of one `nvidia-smi -q` report (the command's stdout or a pasted copy)."""
    facts = ctx.facts
    try:
        parsed = parse_nvidia_smi_q(text)
    except ValueError as e:
        raise ProbeError(f"unparsable output from nvidia-smi -q: {e}") from None
    if ctx.host.exists("/etc/nv_tegra_release"):
        # Jetson (L4T 36+ ships nvidia-smi for the integrated nvgpu GPU, "Orin (nvgpu)", with
        # mostly N/A fields): the jetson probe owns that GPU; keep only the CUDA level.
        facts.set("sdks.l4t.cuda_driver_version", parsed.get("cuda_version"), src)
        facts.set("nvidia.smi.integrated", True, src)
        return
    drv = parsed.get("driver_version")
    if drv:
        if facts.get("drivers.nvidia.version") is None:
            facts.set("drivers.nvidia.version", drv, src)
        elif versions.compare(drv, facts.get("drivers.nvidia.version")) != 0:
            facts.set("nvidia.smi.driver_version", drv, src)
    facts.set("drivers.nvidia.cuda_version", parsed.get("cuda_version"), src)
    facts.set("nvidia.smi.attached_gpus", parsed.get("attached_gpus"), src)
    for rec in parsed["gpus"]:
        facts.add_accelerator(rec, source=src)


def _incomplete(ctx: ProbeContext, reason: str) -> None:
    lst = ctx.facts.data.setdefault("inventory", {}).setdefault("incomplete", [])
    lst.append({"probe": ctx.spec.id, "vendor": "nvidia", "reason": reason})


@collector("cuda_toolkit")
def collect_cuda_toolkit(ctx: ProbeContext) -> None:
    """sdks.cuda.{version, path} from the toolkit's version file, else `nvcc --version`."""
    dirs: List[str] = list(ctx.args.get("dirs", CUDA_DIRS))
    for d in list(dirs):
        dirs.extend(p for p in ctx.host.glob(d + "-*") if p not in dirs)
    for d in dirs:
        for name in ("version.json", "version.txt"):
            path = posixpath.join(d, name)
            text = ctx.read(path)
            if not text:
                continue
            v = parse_cuda_version_file(text)
            if v:
                ctx.facts.set("sdks.cuda.version", v, path)
                ctx.facts.set("sdks.cuda.path", d, path)
                return
    try:
        res = ctx.run(["nvcc", "--version"])
    except CommandNotFound:
        raise NoData("no CUDA toolkit (no /usr/local/cuda/version.json, no nvcc)") from None
    v = parse_nvcc_version(res.stdout) if res.ok else None
    if not v:
        raise NoData("nvcc printed no release line")
    ctx.facts.set("sdks.cuda.version", v, res.source)


# -- deriver: toolkit vs driver, mismatch evidence ----------------------------------------


def cuda_min_driver(toolkit: str, rows: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The matrix row that gives the minimum Linux driver for a CUDA toolkit version.

    Rows are {cuda, label, linux_driver, ...}; the row of the same major.minor with the
    highest `cuda` not above the toolkit (a later update needs its own row's driver), else the
    lowest row of that major.minor. None when the major.minor is not in the table.
    """
    mm = versions.major_minor(toolkit)
    same = [r for r in rows if versions.major_minor(str(r.get("cuda"))) == mm]
    if not same:
        return None
    same.sort(key=lambda r: versions.normalize(str(r["cuda"])))  # type: ignore[arg-type,return-value]
    best = None
    for r in same:
        c = versions.compare(str(r["cuda"]), toolkit)
        if c is not None and c <= 0:
            best = r
    return best or same[0]


@deriver(after=("derive_catalog_facts",))
def nvidia_compat(facts: Facts, host: Host) -> None:
    smi = facts.get("nvidia.smi") or {}
    drv = facts.get("drivers.nvidia.version")
    nvml = facts.get("sdks.nvml.version")
    if smi.get("kind") == "version-mismatch" or (
            drv and nvml and versions.compare(drv, nvml) not in (0, None)):
        parts = []
        if drv:
            parts.append(f"loaded kernel module {drv}")
        if nvml:
            parts.append(f"NVML library {nvml}")
        up = facts.get("nvidia.last_upgrade")
        if up:
            who = posixpath.basename(str(up.get("commandline", "")).split()[0]) if up.get("commandline") else "apt"
            change = (f"{up['from_version']} -> {up['to_version']}" if up.get("to_version")
                      else up.get("version", ""))
            verb = {"upgrade": "upgraded", "install": "installed", "remove": "removed",
                    "downgrade": "downgraded", "purge": "purged"}.get(str(up.get("action")), "changed")
            parts.append(f"{who} {verb} {up['package']} {change} on {up.get('date', '?')}")
        facts.set("nvidia.mismatch_detail", "; ".join(parts) if parts else
                  "the user-space NVIDIA libraries and the loaded kernel module are from different releases",
                  facts.source_of("nvidia.smi") or facts.source_of("sdks.nvml.version"))

    toolkit = facts.get("sdks.cuda.version")
    if not toolkit or not drv or facts.get("sdks.l4t.version"):
        return  # Jetson: the CUDA driver comes with L4T (checked by the JetPack matrix)
    rows = matrix_rows("cuda-toolkit-min-driver")
    if not rows:
        return
    row = cuda_min_driver(toolkit, rows)
    if row is None:
        set_compat(facts, "cuda-toolkit-min-driver", {"matrix": "cuda-toolkit-min-driver", "subject": "CUDA toolkit",
                       "what": f"CUDA toolkit {toolkit}", "status": "not-in-matrix",
                       "detail": f"driver {drv}; the table covers CUDA "
                                 f"{rows[-1].get('cuda')} .. {rows[0].get('cuda')}"}, matrix_source("cuda-toolkit-min-driver"))
        return
    need = str(row["linux_driver"])
    facts.set("sdks.cuda.min_driver", need, f"rules/nvidia.toml matrix cuda-toolkit-min-driver ({row.get('source')})")
    facts.set("sdks.cuda.min_driver_for", row.get("label") or row["cuda"])
    fam = [r for r in matrix_rows("cuda-minor-version-compat")
           if str(r.get("cuda_major")) == str(versions.normalize(toolkit).release[0])]  # type: ignore[union-attr]
    ok = versions.compare(drv, need)
    status = "ok" if ok is not None and ok >= 0 else "too-old"
    level = facts.get("drivers.nvidia.cuda_version")
    rel = versions.normalize(toolkit)
    if status == "too-old" and level and rel is not None and len(rel.release) >= 2:
        # the driver's own CUDA level (nvidia-smi "CUDA Version") covers the toolkit's release: a
        # driver of that branch runs it fully (the PTX ISA changes per minor release, not per
        # update); the table's minimum for an update is the driver its installer bundles
        # (12.6 Update 3 lists 560.35.05, a 560.35.03 reporting CUDA 12.6 runs it)
        at_least = versions.compare(str(level), f"{rel.release[0]}.{rel.release[1]}")
        if at_least is not None and at_least >= 0:
            status = "ok"
    if status == "too-old" and fam:
        facts.set("sdks.cuda.family_min_driver", str(fam[0]["linux_driver"]))
        if versions.compare(drv, str(fam[0]["linux_driver"])) not in (None, -1):
            status = "minor-version-compat"
    facts.set("sdks.cuda.driver_check", status)
    set_compat(facts, "cuda-toolkit-min-driver", {"matrix": "cuda-toolkit-min-driver", "subject": "CUDA toolkit",
                   "what": f"CUDA toolkit {toolkit}", "status": status,
                   "detail": f"needs driver >= {need}, loaded {drv}"}, matrix_source("cuda-toolkit-min-driver"))
