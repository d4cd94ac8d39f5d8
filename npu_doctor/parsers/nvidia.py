"""NVIDIA data-centre / desktop GPU outputs: `nvidia-smi -q`, `/proc/driver/nvidia/version`,
CUDA toolkit version files, `nvcc --version`, and NVIDIA package upgrades in apt's history.

`nvidia-smi -q` is an indented `Key : Value` text (nvidia-smi(1); "the output is not
guaranteed backward compatible"). What differs between driver generations, all handled here:

- clock reasons: "Clocks Throttle Reasons" (up to R530) and "Clocks Event Reasons" (R535+),
  same entries (Idle, Applications Clocks Setting, SW Power Cap, HW Slowdown, HW Thermal
  Slowdown, HW Power Brake Slowdown, Sync Boost, SW Thermal Slowdown, Display Clock Setting);
  very old drivers print `Clocks Throttle Reasons : N/A`;
- temperatures: absolute thresholds "GPU Shutdown Temp", "GPU Slowdown Temp", "GPU Max
  Operating Temp", "GPU Target Temperature" (`N/A` where the board has none), or, from R565 on
  Ada and later, *margins* to the thermal limit: "GPU T.Limit Temp" (degrees left before the
  limit) and "GPU Shutdown/Slowdown/Max Operating T.Limit Temp" (the margin at which that
  action starts, e.g. -2 C = 2 degrees past T.Limit). NVML nvmlDeviceGetMarginTemperature:
  "distance to nearest slowdown threshold";
- PCIe: "PCIe Generation" Max/Current, plus Device Current/Device Max/Host Max on R530+;
  link width printed `16x` (or `x16` on old drivers);
- power: "Power Readings" (old) or "GPU Power Readings" (R530+), limit as "Power Limit" or
  "Current Power Limit".

Real outputs of 418.67, 465.27 and 566.36 are in tests/data/nvidia (sources in SOURCES.md).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..lazyregex import lazy
from ..registry import parser
from .nvidia_clocks import REASON_SECTIONS, THERMAL_REASONS, counters, power_limits, reasons
from .nvidia_versions import (  # noqa: F401
    nvidia_upgrades,
    parse_cuda_version_file,
    parse_nvcc_version,
    parse_proc_driver_version,
)

_KV_RE = lazy(r"^(\S.*?)\s+:\s?(.*)$")
_GPU_HDR_RE = lazy(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$")
_NUM_RE = lazy(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)")

#: PCIe generation -> transfer rate per lane in GT/s (PCI-SIG base specs 1.0 ... 6.0).
PCIE_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

#: NVML failure lines nvidia-smi prints instead of its report -> (kind, what it means).
#: Sources: nvidia-smi(1) RETURN VALUE; nvml.h nvmlReturn_t strings.
FAILURES: List[Tuple["re.Pattern[str]", str]] = [
    (lazy(r"Failed to initialize NVML:\s*Driver/library version mismatch", re.I), "version-mismatch"),
    (lazy(r"NVML library version:\s*\S+", re.I), "version-mismatch"),
    (lazy(r"couldn't communicate with the NVIDIA driver", re.I), "driver-not-loaded"),
    (lazy(r"Failed to initialize NVML:\s*Driver Not Loaded", re.I), "driver-not-loaded"),
    (lazy(r"Failed to initialize NVML:\s*Insufficient Permissions", re.I), "no-permission"),
    (lazy(r"Unable to determine the device handle for GPU\s*\S*:\s*(?:Unknown Error|GPU is lost)", re.I), "gpu-lost"),
    (lazy(r"\bGPU is lost\b", re.I), "gpu-lost"),
    (lazy(r"Failed to initialize NVML:\s*\S", re.I), "nvml-init-failed"),
    (lazy(r"^No devices were found", re.I | re.M), "no-devices"),
]


def pci_address(bus_id: str) -> Optional[str]:
    """`00000000:2D:00.0` (NVML's 8-digit domain) -> `0000:2d:00.0`; None if unreadable."""
    m = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$", bus_id.strip())
    if not m:
        return None
    dom = int(m.group(1), 16)
    return f"{dom:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def _tree(text: str) -> Tuple[Dict[str, Any], List[Tuple[str, Dict[str, Any]]]]:
    """(top-level keys, [(gpu bus id, gpu tree)]) of an `nvidia-smi -q` report."""
    top: Dict[str, Any] = {}
    gpus: List[Tuple[str, Dict[str, Any]]] = []
    stack: List[Tuple[int, Dict[str, Any]]] = [(-1, top)]
    for raw in text.splitlines():
        if not raw.strip() or raw.strip().startswith("====="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            m = _GPU_HDR_RE.match(line)
            if m:
                node: Dict[str, Any] = {}
                gpus.append((m.group(1), node))
                stack = [(-1, top), (0, node)]
                continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        kv = _KV_RE.match(line)
        if kv:
            key, val = kv.group(1).strip(), kv.group(2).strip()
            parent.setdefault(key, val)
        else:
            child: Dict[str, Any] = {}
            parent.setdefault(line, child)
            if isinstance(parent[line], dict):
                stack.append((indent, parent[line]))
    return top, gpus


def _val(s: Any) -> Optional[str]:
    if not isinstance(s, str):
        return None
    s = s.strip()
    if not s or s.upper() in ("N/A", "[N/A]", "UNKNOWN ERROR", "[UNKNOWN ERROR]", "NOT SUPPORTED",
                             "[NOT SUPPORTED]", "REQUESTED FUNCTIONALITY HAS BEEN DEPRECATED"):
        return None
    return s


def _num(s: Any) -> Optional[float]:
    v = _val(s)
    if v is None:
        return None
    m = _NUM_RE.match(v)
    if not m:
        return None
    n = float(m.group(1))
    return int(n) if n.is_integer() and "." not in m.group(1) else n


def _width(s: Any) -> Optional[int]:
    v = _val(s)
    if v is None:
        return None
    m = re.match(r"^x?(\d+)x?$", v)
    return int(m.group(1)) if m else None


def _get(tree: Dict[str, Any], *path: str) -> Any:
    node: Any = tree
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def _first(tree: Dict[str, Any], *paths: Tuple[str, ...]) -> Any:
    for p in paths:
        v = _get(tree, *p)
        if v is not None:
            return v
    return None


def _gpu_record(bus: str, g: Dict[str, Any], index: int) -> Dict[str, Any]:
    rec: Dict[str, Any] = {"vendor": "nvidia", "index": index}
    addr = pci_address(_val(_get(g, "PCI", "Bus Id")) or bus)
    if addr:
        rec["pci_address"] = addr
    for key, field in (("Product Name", "name"), ("Product Architecture", "architecture"),
                       ("GPU UUID", "uuid"), ("Performance State", "performance_state"),
                       ("Persistence Mode", "persistence_mode"), ("Compute Mode", "compute_mode")):
        v = _val(g.get(key))
        if v is not None:
            rec[field] = v
    vbios = _val(g.get("VBIOS Version"))
    if vbios:
        rec["firmware"] = {"version": vbios, "kind": "vbios"}
    minor = _num(g.get("Minor Number"))
    if minor is not None:
        rec["minor_number"] = int(minor)
        rec["dev"] = f"/dev/nvidia{int(minor)}"
    dm = _val(_get(g, "Driver Model", "Current"))
    if dm:
        rec["driver_model"] = dm

    # temperatures
    t = g.get("Temperature") if isinstance(g.get("Temperature"), dict) else {}
    cur = _num(t.get("GPU Current Temp"))
    if cur is not None:
        rec["temperature_c"] = cur
    thermal: Dict[str, Any] = {}
    for key, field in (("GPU Shutdown Temp", "shutdown_c"), ("GPU Slowdown Temp", "slowdown_c"),
                       ("GPU Max Operating Temp", "max_operating_c"),
                       ("GPU Target Temperature", "target_c"),
                       ("Memory Current Temp", "memory_c"),
                       ("Memory Max Operating Temp", "memory_max_operating_c"),
                       ("GPU T.Limit Temp", "margin_c"),
                       ("GPU Shutdown T.Limit Temp", "shutdown_margin_c"),
                       ("GPU Slowdown T.Limit Temp", "slowdown_margin_c"),
                       ("GPU Max Operating T.Limit Temp", "max_operating_margin_c"),
                       ("Memory Max Operating T.Limit Temp", "memory_max_operating_margin_c")):
        v = _num(t.get(key))
        if v is not None:
            thermal[field] = v
    _thermal_limit(rec, thermal)
    if "memory_c" in thermal and "memory_max_operating_c" in thermal:
        # HBM/GDDR: the driver slows memory clocks at its max operating temperature
        thermal["memory_headroom_c"] = thermal["memory_max_operating_c"] - thermal["memory_c"]
    if thermal:
        rec["thermal"] = thermal

    # utilisation, power, clocks
    util = _num(_first(g, ("Utilization", "Gpu"), ("Utilization", "GPU")))  # "GPU" from R580 on
    if util is not None:
        rec["utilization_percent"] = util
    mem_util = _num(_get(g, "Utilization", "Memory"))
    if mem_util is not None:
        rec["memory_utilization_percent"] = mem_util
    # the first reading that is a number: R580+ GeForce print "Average Power Draw : N/A"
    # next to an instantaneous reading
    pw = next((v for v in (_num(_get(g, *p)) for p in (
        ("GPU Power Readings", "Power Draw"), ("Power Readings", "Power Draw"),
        ("GPU Power Readings", "Average Power Draw"),
        ("GPU Power Readings", "Instantaneous Power Draw"))) if v is not None), None)
    if pw is not None:
        rec["power_w"] = pw
    rec.update(power_limits(g, _num))
    freq: Dict[str, Any] = {}
    cur_mhz = _num(_get(g, "Clocks", "Graphics"))
    max_mhz = _num(_get(g, "Max Clocks", "Graphics"))
    if cur_mhz is not None:
        freq["cur_hz"] = int(cur_mhz * 1_000_000)
    if max_mhz is not None:
        freq["max_hz"] = int(max_mhz * 1_000_000)
    if freq:
        rec["freq"] = freq

    # PCIe link
    link = _get(g, "PCI", "GPU Link Info")
    if isinstance(link, dict):
        gen = link.get("PCIe Generation") if isinstance(link.get("PCIe Generation"), dict) else {}
        width = link.get("Link Width") if isinstance(link.get("Link Width"), dict) else {}
        pcie: Dict[str, Any] = {}
        for key, field in (("Current", "cur_gen"), ("Max", "max_gen"),
                           ("Device Max", "device_max_gen"), ("Host Max", "host_max_gen")):
            v = _num(gen.get(key))
            if v is not None:
                pcie[field] = int(v)
        if "cur_gen" in pcie and pcie["cur_gen"] in PCIE_GEN_GTS:
            pcie["cur_speed_gts"] = PCIE_GEN_GTS[pcie["cur_gen"]]
        if "max_gen" in pcie and pcie["max_gen"] in PCIE_GEN_GTS:
            pcie["max_speed_gts"] = PCIE_GEN_GTS[pcie["max_gen"]]
        cw, mw = _width(width.get("Current")), _width(width.get("Max"))
        if cw is not None:
            pcie["cur_width"] = cw
        if mw is not None:
            pcie["max_width"] = mw
        if pcie:
            # GPUs lower the link speed when idle (ASPM / power-saving): a lower current
            # generation only means something under load. Width is not power-managed.
            pcie["speed_power_managed"] = True
            rec["pcie"] = pcie

    # clock event (throttle) reasons, old and new names
    why = reasons(_first(g, ("Clocks Event Reasons",), ("Clocks Throttle Reasons",)))
    if why is not None:
        rec["clocks_event_reasons"] = why["active"]
        rec["thermal_throttle_reasons"] = why["thermal"]
        rec["power_throttle_reasons"] = why["power"]
    spent = counters(_first(g, ("Clocks Event Reasons Counters",), ("Clocks Throttle Reasons Counters",)))
    if spent is not None:
        rec["clocks_event_counters"] = spent

    # health-ish state
    rr = _val(_get(g, "GPU Reset Status", "Reset Required"))
    if rr:
        rec["reset_required"] = rr.lower() == "yes"
    rf = _val(_get(g, "Remapped Rows", "Remapping Failure Occurred"))
    if rf:
        rec["remapping_failure"] = rf.lower() == "yes"
    # "Pending Page Blacklist" (R450 on; "Pending" before): pages marked, retired at the next reset
    rp = _val(_first(g, ("Retired Pages", "Pending Page Blacklist"), ("Retired Pages", "Pending")))
    if rp:
        rec["retired_pages_pending"] = rp.lower() == "yes"
    # A100 on (row remapping replaces page retirement): rows marked, remapped at the next reset
    rrp = _val(_get(g, "Remapped Rows", "Pending"))
    if rrp:
        rec["row_remap_pending"] = rrp.lower() == "yes"
    rru = _num(_get(g, "Remapped Rows", "Uncorrectable Error"))
    if rru is not None:
        rec["remapped_rows_uncorrectable"] = int(rru)
    ecc = _ecc_uncorrectable(_get(g, "ECC Errors", "Volatile"))
    if ecc is not None:
        rec["ecc_uncorrectable_volatile"] = ecc
    # Blackwell (R575+): memory channel / TPC repairs that wait for a reset
    pending = [k for k in ("Channel Repair Pending", "TPC Repair Pending")
               if (_val(_get(g, "ECC Errors", k)) or "").lower() == "yes"]
    if pending:
        rec["repair_pending"] = pending
    ra = _val(g.get("GPU Recovery Action"))
    if ra:
        rec["recovery_action"] = ra
    return rec


def _ecc_uncorrectable(volatile: Any) -> Optional[int]:
    """Uncorrectable ECC errors since the driver loaded, from `ECC Errors / Volatile` in any of
    nvidia-smi's layouts: R3xx-R440 `Double Bit / Total`; R450+ `SRAM Uncorrectable` and
    `DRAM Uncorrectable`; R570+ `SRAM Uncorrectable Parity` / `SRAM Uncorrectable SEC-DED`.
    None when ECC is off or not supported (every counter N/A)."""
    if not isinstance(volatile, dict):
        return None
    dbe = volatile.get("Double Bit")
    if isinstance(dbe, dict):
        total = _num(dbe.get("Total"))
        return None if total is None else int(total)
    counts = [_num(v) for k, v in volatile.items() if "Uncorrectable" in k and not isinstance(v, dict)]
    counts = [c for c in counts if c is not None]
    return int(sum(counts)) if counts else None


def _thermal_limit(rec: Dict[str, Any], thermal: Dict[str, Any]) -> None:
    """The nearest temperature the driver acts on, and the headroom to it.

    Absolute form: the lowest of GPU Target Temperature, GPU Max Operating Temp (clocks may go
    below base) and GPU Slowdown Temp (hardware slowdown). Margin form (T.Limit): headroom =
    margin - the margin at which max-operating (else slowdown) starts. Shutdown is not a
    throttle point and is not considered.
    """
    cur = rec.get("temperature_c")
    if "margin_c" in thermal:
        for key, name in (("max_operating_margin_c", "GPU Max Operating T.Limit Temp"),
                          ("slowdown_margin_c", "GPU Slowdown T.Limit Temp")):
            if key in thermal:
                head = thermal["margin_c"] - thermal[key]
                thermal["headroom_c"] = head
                thermal["limit"] = name
                if cur is not None:
                    thermal["limit_c"] = cur + head
                return
    if cur is None:
        return
    cands = [(thermal[k], n) for k, n in (("target_c", "GPU Target Temperature"),
                                          ("max_operating_c", "GPU Max Operating Temp"),
                                          ("slowdown_c", "GPU Slowdown Temp")) if k in thermal]
    if not cands:
        return
    limit, name = min(cands, key=lambda c: c[0])
    thermal["limit_c"] = limit
    thermal["limit"] = name
    thermal["headroom_c"] = limit - cur
    if "slowdown_c" in thermal and "max_operating_c" in thermal:
        # how far the platform pulled the max-operating target below hardware slowdown
        thermal["max_operating_below_slowdown_c"] = thermal["slowdown_c"] - thermal["max_operating_c"]


def nvml_failure(text: str) -> Optional[Dict[str, str]]:
    """{kind, message} when nvidia-smi printed an NVML failure instead of a report, else None.

    kinds: version-mismatch, driver-not-loaded, no-permission, gpu-lost, nvml-init-failed,
    no-devices.
    """
    for rx, kind in FAILURES:
        m = rx.search(text)
        if m:
            line = next((ln.strip() for ln in text.splitlines() if m.group(0) in ln), m.group(0))
            out = {"kind": kind, "message": line}
            if kind == "version-mismatch":
                out["error"] = "Driver/library version mismatch"
                lib = re.search(r"NVML library version:\s*(\S+)", text)
                if lib:
                    out["nvml_version"] = lib.group(1)
            return out
    return None


@parser("nvidia_smi_q")
def parse_nvidia_smi_q(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q` (full or `-d TEMPERATURE`-style subset) ->
    {driver_version, cuda_version, attached_gpus, gpus: [accelerator records]}.

    Each record: vendor "nvidia", index, pci_address ("0000:2d:00.0"), name, uuid,
    firmware.version (VBIOS), temperature_c, thermal {shutdown_c, slowdown_c, max_operating_c,
    target_c, memory_c, margin_c (T.Limit), ..., limit_c, limit, headroom_c}, utilization_percent,
    power_w, power_limit_w (+ _default_w, _max_w, _min_w, _requested_w, _below_default_w),
    freq {cur_hz, max_hz}, pcie {cur_gen, max_gen, cur_speed_gts,
    max_speed_gts, cur_width, max_width}, persistence_mode ("Enabled"/"Disabled"),
    clocks_event_reasons [active reason names], thermal_throttle_reasons, power_throttle_reasons,
    clocks_event_counters {sw_thermal_s, hw_thermal_s, sw_power_cap_s, hw_power_brake_s,
    sync_boost_s, thermal_s, power_s} (parsers.nvidia_clocks), reset_required, remapping_failure,
    retired_pages_pending, row_remap_pending, remapped_rows_uncorrectable, ecc_uncorrectable_volatile,
    repair_pending, compute_mode. °C, W. ValueError for text that is not such a report (or block).
    """
    top, gpus = _tree(text)
    drv = _val(top.get("Driver Version"))
    if drv is None and not gpus:
        if not any(isinstance(top.get(k), dict) for k in REASON_SECTIONS):
            raise ValueError("no 'Driver Version' and no GPU section (is this `nvidia-smi -q` output?)")
        gpus = [("", top)]  # one GPU's block pasted alone (grep -A8 'Clocks Throttle'): unnamed
    out: Dict[str, Any] = {"gpus": [_gpu_record(bus, g, i) for i, (bus, g) in enumerate(gpus)]}
    if drv:
        out["driver_version"] = drv
        for r in out["gpus"]:
            r["driver"] = {"name": "nvidia", "version": drv}
    cuda = _val(top.get("CUDA Version"))
    if cuda:
        out["cuda_version"] = cuda
    n = _num(top.get("Attached GPUs"))
    if n is not None:
        out["attached_gpus"] = int(n)
    return out


__all__ = ["THERMAL_REASONS", "parse_nvidia_smi_q", "parse_proc_driver_version", "nvml_failure", "pci_address",
           "parse_cuda_version_file", "parse_nvcc_version", "nvidia_upgrades", "PCIE_GEN_GTS"]
