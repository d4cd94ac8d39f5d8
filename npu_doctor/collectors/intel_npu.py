"""Intel Core Ultra NPU (`intel_vpu`): sysfs telemetry, kernel-log firmware/probe state,
firmware files, Level Zero / NPU user-mode driver / OpenVINO versions.

Facts (accelerator records merge with the accelerators probe by pci_address / sysfs):
- `accelerators[]` {vendor: "intel-npu", pci_address, sysfs, driver.name "intel_vpu",
  driver.version (DRM driver version from `Initialized intel_vpu 1.0.0`), driver.probe_error,
  firmware.version (the `[drm] Firmware: FILE, version: STRING` line), firmware.file,
  firmware.failed_names [{name, error, attempts}] (names tried before one loaded, or all of
  them), firmware.request_error, freq.cur_hz / freq.max_hz (npu_current/max_frequency_mhz;
  cur left out while runtime-suspended, where the driver reads 0), busy_time_us,
  utilization_percent (delta of npu_busy_time_us over the --sample window), power_w (hwmon)}.
- `drivers.intel_vpu.version` from the same `Initialized` line.
- `intel_npu.firmware_files[]` {path, version}: files under /lib/firmware{,/updates}/intel/vpu
  with the build string inside the blob.
- `sdks.level_zero`, `sdks.npu_umd`, `sdks.openvino` {version, path} from the library file names
  (`libze_loader.so.1.24.2`, `libze_intel_npu.so.1.35.0`) and Python metadata; the packages probe
  adds what dpkg says.
"""

from __future__ import annotations

import posixpath
import time
from typing import Any, Dict, List, Optional

from .. import versions
from ..errors import HostError
from ..facts import Facts
from ..host import Host
from ..lazyregex import lazy
from ..matrices import matrix_rows, set_compat
from ..parsers.intel_npu import firmware_blob_version, parse_kernel_log, soname_version
from ..probes import NoData, ProbeContext
from ..registry import collector, deriver
from ..sysfs import accel_devices
from .logs import kernel_log
from .rknn_runtime import python_dists

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/opt/intel/openvino/runtime/lib/intel64")
FW_DIRS = ("/lib/firmware/updates/intel/vpu", "/lib/firmware/intel/vpu",
           "/usr/lib/firmware/intel/vpu")
MAX_FW_BYTES = 32 * 1024 * 1024


def _int(v: Optional[str]) -> Optional[int]:
    try:
        return int(str(v).strip()) if v is not None else None
    except ValueError:
        return None


#: firmware file family -> NPU generation (linux-npu-driver docs/overview.md, matrices.md §4.1)
_GENERATIONS = (("vpu_37xx", "Intel NPU 37xx (Meteor/Arrow Lake)"), ("mtl_vpu", "Intel NPU 37xx (Meteor Lake)"),
                ("vpu_40xx", "Intel NPU 40xx (Lunar Lake)"), ("vpu_50xx", "Intel NPU 50xx (Panther Lake)"),
                ("vpu_60xx", "Intel NPU 60xx (Nova Lake)"))


def npu_name(firmware_file: Optional[str]) -> str:
    """A display name from the firmware file the driver loaded (`intel/vpu/vpu_40xx_v1.bin` ->
    `Intel NPU 40xx (Lunar Lake)`), `Intel NPU` when unknown."""
    base = posixpath.basename(firmware_file or "")
    for prefix, name in _GENERATIONS:
        if base.startswith(prefix):
            return name
    return "Intel NPU"


def intel_npu_devices(host: Host) -> List[Dict[str, str]]:
    """[{accel, sysfs, pci_address}] for every /sys/class/accel/accel* bound to intel_vpu."""
    return accel_devices(host, "intel_vpu")


def _telemetry(ctx: ProbeContext, dev: Dict[str, str], t0_busy: Optional[int], t0: float) -> None:
    sysfs = dev["sysfs"]
    rec: Dict[str, Any] = {"vendor": "intel-npu", "pci_address": dev["pci_address"], "sysfs": sysfs,
                           "driver": {"name": "intel_vpu"}}
    sources: Dict[str, str] = {}
    status = ctx.host.read_attr(posixpath.join(sysfs, "power/runtime_status"))
    cur = _int(ctx.host.read_attr(posixpath.join(sysfs, "npu_current_frequency_mhz")))
    mx = _int(ctx.host.read_attr(posixpath.join(sysfs, "npu_max_frequency_mhz")))
    if mx:
        rec.setdefault("freq", {})["max_hz"] = mx * 1_000_000
        sources["freq.max_hz"] = posixpath.join(sysfs, "npu_max_frequency_mhz")
    if cur is not None and not (cur == 0 and status == "suspended"):
        rec.setdefault("freq", {})["cur_hz"] = cur * 1_000_000
        sources["freq.cur_hz"] = posixpath.join(sysfs, "npu_current_frequency_mhz")
    busy_path = posixpath.join(sysfs, "npu_busy_time_us")
    busy = _int(ctx.host.read_attr(busy_path))
    if busy is not None:
        rec["busy_time_us"] = busy
        sources["busy_time_us"] = busy_path
        if t0_busy is not None:
            elapsed = time.monotonic() - t0
            if elapsed > 0 and busy >= t0_busy:
                pct = min(100.0, (busy - t0_busy) / (elapsed * 1e6) * 100.0)
                rec["utilization_percent"] = round(pct, 1)
                rec["utilization_window_s"] = round(elapsed, 2)
                sources["utilization_percent"] = busy_path
    for hw in ctx.host.glob(posixpath.join(sysfs, "hwmon/hwmon*/power1_input")):
        uw = _int(ctx.host.read_attr(hw))
        if uw is not None:
            rec["power_w"] = round(uw / 1e6, 3)
            sources["power_w"] = hw
            break
    ctx.facts.add_accelerator(rec, sources, source=sysfs)


@collector("intel_npu")
def collect_intel_npu(ctx: ProbeContext) -> None:
    host = ctx.host
    devs = intel_npu_devices(host)
    sample_s = float(ctx.options.get("sample_s", 0) or 0)
    if devs and sample_s > 0:
        first = {d["sysfs"]: _int(host.read_attr(posixpath.join(d["sysfs"], "npu_busy_time_us")))
                 for d in devs}
        t0 = time.monotonic()
        time.sleep(sample_s)
        for d in devs:
            _telemetry(ctx, d, first.get(d["sysfs"]), t0)
    else:
        for d in devs:
            _telemetry(ctx, d, None, time.monotonic())

    got = kernel_log(ctx)
    if got is not None:
        source, text = got
        source = source.lstrip("$ ")
        for pci, st in parse_kernel_log(text).items():
            rec: Dict[str, Any] = {"vendor": "intel-npu", "pci_address": pci,
                                   "driver": {"name": "intel_vpu"}}
            if st.get("driver_version"):
                rec["driver"]["version"] = st["driver_version"]
                ctx.facts.set("drivers.intel_vpu.version", st["driver_version"], source)
                ctx.facts.set("drivers.intel_vpu.source", source, source)
            if st.get("probe_error") is not None:
                rec["driver"]["probe_error"] = st["probe_error"]
            fw: Dict[str, Any] = {}
            if st.get("firmware"):
                fw.update(st["firmware"])
            rec["name"] = npu_name(fw.get("file"))
            if st.get("firmware_failures"):
                fw["failed_names"] = st["firmware_failures"]
            if st.get("firmware_request_error") is not None:
                fw["request_error"] = st["firmware_request_error"]
            if fw:
                rec["firmware"] = fw
            if st.get("initialized") is not None:
                rec["initialized"] = st["initialized"]
            if st.get("initialized") and st.get("minor") is not None:
                # accel-class drivers register /dev/accel/accel<minor>
                rec["dev"] = f"/dev/accel/accel{st['minor']}"
            ctx.facts.add_accelerator(rec, source=source)

    files = []
    for d in FW_DIRS:
        try:
            names = host.listdir(d)
        except HostError:
            continue
        for n in names:
            p = posixpath.join(d, n)
            if host.is_dir(p):
                continue
            entry: Dict[str, Any] = {"path": p}
            if not n.endswith((".zst", ".xz", ".gz")):
                try:
                    v = firmware_blob_version(host.read_bytes(p, MAX_FW_BYTES))
                except HostError:
                    v = None
                if v:
                    entry["version"] = v
            files.append(entry)
    if files:
        ctx.facts.set("intel_npu.firmware_files", files, FW_DIRS[1])

    for sdk, stems in (("level_zero", ("libze_loader.so",)),
                       ("npu_umd", ("libze_intel_npu.so", "libze_intel_vpu.so"))):
        for d in LIB_DIRS:
            hit = None
            for stem in stems:
                for p in host.glob(posixpath.join(d, stem + ".*")):
                    v = soname_version(posixpath.basename(p), stem)
                    if v:
                        hit = (v, p)
                        break
                if hit:
                    break
            if hit:
                ctx.facts.set(f"sdks.{sdk}.version", hit[0], hit[1])
                ctx.facts.set(f"sdks.{sdk}.path", hit[1], hit[1])
                break
    for pre, (ver, where) in python_dists(host, ("openvino",), run=ctx.run).items():
        ctx.facts.set("sdks.openvino.version", ver, where)
        ctx.facts.set("sdks.openvino.path", where, where)
    if not ctx.facts.data:
        raise NoData("no Intel NPU (intel_vpu) device, kernel-log line, firmware or user-space stack")


# -- zeInit 0x78000001: which causes the other facts rule out --------------------------------
ZE_CAUSES = (
    ("driver-missing", "the intel_vpu kernel driver is not loaded or failed to bind"),
    ("bios-disabled", "the NPU is disabled in the BIOS/UEFI setup (no PCI function 0000:00:0b.0)"),
    ("no-access", "this user cannot open /dev/accel/accel* (not in the render group)"),
    ("umd-missing", "the NPU user-mode driver (libze_intel_npu.so, package intel-level-zero-npu) is not installed"),
)


def _ze_causes(facts: Facts) -> Dict[str, str]:
    """{cause id: why it is ruled out} for the zeInit-uninitialised causes the facts exclude."""
    out: Dict[str, str] = {}
    npus = [a for a in facts.get("accelerators", []) or [] if a.get("vendor") == "intel-npu"]
    bound = [a for a in npus if (a.get("driver") or {}).get("name") == "intel_vpu"
             and (a.get("initialized") is True or a.get("dev") or a.get("dev_nodes"))]
    if bound:
        out["driver-missing"] = f"intel_vpu is bound to {bound[0].get('pci_address') or bound[0].get('sysfs')}"
    if any(a.get("pci_address") for a in npus):
        out["bios-disabled"] = f"the NPU is on the PCI bus ({[a.get('pci_address') for a in npus if a.get('pci_address')][0]})"
    uid = facts.get("user.uid")
    nodes = [n for a in npus for n in (a.get("dev_nodes") or [])]
    if uid == 0:
        out["no-access"] = "running as root"
    elif nodes and all(n.get("can_open") is True for n in nodes):
        out["no-access"] = f"{nodes[0].get('path')} opens read-write for this user"
    if facts.get("sdks.npu_umd.version"):
        out["umd-missing"] = f"NPU user-mode driver {facts.get('sdks.npu_umd.version')} is installed"
    return out


def _is_ze_uninitialized(ev: Dict[str, Any]) -> bool:
    """A catalogs/level-zero.toml event for ZE_RESULT_ERROR_UNINITIALIZED (any spelling)."""
    return ev.get("catalog") == "level-zero" and \
        str(ev.get("mnemonic") or "").startswith("ZE_RESULT_ERROR_UNINITIALIZED")


@deriver(after=("derive_intel_npu_compat",))
def derive_ze_uninitialized(facts: Facts, host: Host) -> None:
    """Annotate each ZE_RESULT_ERROR_UNINITIALIZED log event (catalogs/level-zero.toml) with
    `ruled_out` and `remaining` (text lists of the causes the other facts exclude / leave open)
    and append them to its message, so the finding says which causes are still open."""
    events = facts.get("log_events") or []
    zes = [e for e in events if isinstance(e, dict) and _is_ze_uninitialized(e)]
    if not zes:
        return
    ruled = _ze_causes(facts)
    remaining = [text for cid, text in ZE_CAUSES if cid not in ruled]
    ruled_txt = "; ".join(f"{dict(ZE_CAUSES)[cid].split(' (')[0]} — ruled out: {why}"
                          for cid, why in ruled.items()) or "none (no device facts to rule any out)"
    for e in zes:
        e["remaining"] = "; ".join(remaining) or "none of the usual causes: check `sudo dmesg` for intel_vpu errors"
        e["ruled_out"] = ruled_txt
        if e.get("message") and "Causes still open" not in e["message"]:
            e["message"] += f". Causes still open: {e['remaining']}. Ruled out by other facts: {e['ruled_out']}."


# -- UMD <-> firmware, against rules/intel_npu.toml `intel-npu-release` -----------------------
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"), 1)}
_FW_DATE_RE = lazy(r"^(?:(\d{8})|([A-Z][a-z]{2}) +(\d{1,2}) (\d{4}))\*")


def firmware_date(version: Optional[str]) -> Optional[str]:
    """Build date `YYYYMMDD` of an NPU firmware string: `20240611*MTL_...` -> `20240611`,
    `Nov 13 2025*NPU40xx*...` -> `20251113`; None for other strings."""
    m = _FW_DATE_RE.match(version or "")
    if not m:
        return None
    if m.group(1):
        return m.group(1)
    mon = _MONTHS.get(m.group(2))
    return f"{m.group(4)}{mon:02d}{int(m.group(3)):02d}" if mon else None


def check_umd_firmware(umd: str, fw_version: str, rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """compat record: status `mismatch` when the running firmware was built before the UMD's
    release firmware, `ok` when not, `not-in-matrix` when the UMD release has no row or the
    firmware string has no date."""
    rec: Dict[str, Any] = {"matrix": "intel-npu-release", "subject": "intel-npu",
                           "what": f"NPU user-mode driver {umd} with firmware {fw_version.split('*')[0]}",
                           "umd_version": umd, "firmware_version": fw_version}
    row = next((r for r in rows if versions.compare(r.get("umd"), umd) == 0), None)
    date = firmware_date(fw_version)
    if row is None or date is None:
        rec.update(status="not-in-matrix",
                   detail=("no verified configuration of linux-npu-driver " + umd + " in the matrix")
                   if row is None else "the firmware string carries no build date")
        return rec
    rec.update(row_source=row.get("source"), release_firmware_date=row["firmware_date"])
    if date < row["firmware_date"]:
        rec.update(status="mismatch",
                   detail=f"the running firmware was built {date}, before the firmware of the UMD's "
                          f"release ({row['firmware_date']}); install both from one linux-npu-driver release")
    else:
        rec.update(status="ok", detail=f"firmware {date} >= release firmware {row['firmware_date']}")
    return rec


@deriver(after=("derive_catalog_facts",))
def derive_intel_npu_compat(facts: Facts, host: Host) -> None:
    """`compat.intel-npu-release` (then `-1`, `-2` ...): one record per Intel NPU whose running
    firmware and UMD version are known."""
    umd = facts.get("sdks.npu_umd.version")
    if not umd:
        return
    rows = matrix_rows("intel-npu-release")
    npus = [a for a in facts.get("accelerators", []) or []
            if a.get("vendor") == "intel-npu" and (a.get("firmware") or {}).get("version")]
    for n, a in enumerate(npus):
        rec = check_umd_firmware(umd, a["firmware"]["version"], rows)
        key = "intel-npu-release" + (f"-{n}" if n else "")
        set_compat(facts, key, rec, facts.source_of("sdks.npu_umd.version"))
