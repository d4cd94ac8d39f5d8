"""Huawei Ascend: npu-smi inventory, driver/firmware/CANN versions, the debug-log environment.

Facts written:
- accelerators[] (vendor "ascend", one per chip): name, index (Phy-ID/Device id when printed,
  else the NPU id), npu_id, chip_id, pci_address (lower-case, only when no other chip shares
  it), health, power_w, temperature_c, utilization_percent (AICore %), memory.{hbm_used_mb,
  hbm_total_mb}, driver.version (npu-smi header), firmware.{version, compatibility} (board).
- ascend.npu_smi.{status: "ok"|"failed", returncode, error, dcmi_code, dcmi_kind, count,
  missing_library (the loader could not start npu-smi: a driver library it needs is missing)}
  and inventory.unknown[] {vendor, reason} when npu-smi failed (the NPU count is unknown).
- ascend.driver.{version, innerversion, compatible_version, compatible_version_fw},
  ascend.firmware.{version, package_version, compatible_version_drv}
- sdks.cann.{version, innerversion, compatible_version, path} (toolkit install.info, both the
  `ascend-toolkit/latest/<arch>-linux` and the 8.5+ `cann[-<ver>]/<arch>-linux` layouts)
- ascend.log_env.{problems[], log_dir, log_level}
- compat.ascend-* entries (see the deriver) for the version rules.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional

from .. import versions
from ..errors import CommandNotFound, HostError
from ..facts import Facts
from ..matrices import matrix_rows, set_compat
from ..parsers import ascend as P
from ..parsers.timeouts import says_only_timed_out
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector, deriver

ROOTS = ("/usr/local/Ascend",)
DRIVER_INFO = "/usr/local/Ascend/driver/version.info"
FIRMWARE_INFO = "/usr/local/Ascend/firmware/version.info"
INSTALL_INFO = "/etc/ascend_install.info"
TOOLKIT_GLOBS = (
    "{root}/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info",
    "{root}/cann/*-linux/ascend_toolkit_install.info",
    "{root}/cann-*/*-linux/ascend_toolkit_install.info",
    "{root}/ascend-toolkit/*/*-linux/ascend_toolkit_install.info",
)
NPU_SMI = ["npu-smi", "info"]


def _pci(bus_id: str) -> str:
    bus_id = bus_id.strip().lower()
    dom, _, rest = bus_id.partition(":")
    if len(dom) > 4:  # 00000000:5a:00.0 -> 0000:5a:00.0
        dom = dom[-4:]
    return f"{dom}:{rest}"


@collector("ascend_npu_smi")
def collect_npu_smi(ctx: ProbeContext) -> None:
    res = ctx.run(NPU_SMI)  # CommandNotFound -> no_data (no Ascend stack here)
    src = res.source
    text = (res.stdout or "") + "\n" + (res.stderr or "")
    try:
        table = P.parse_npu_smi_info(res.stdout or "")
    except ValueError:
        table = None
    if table is None:
        loader = P.parse_loader_failure(text)
        fail = None if loader else P.parse_npu_smi_failure(text)
        if loader is None and fail is None and res.returncode == 0 and not res.timed_out:
            # exit 0 and no table we can read: a layout we do not know, not a device fault
            ctx.facts.set("inventory.unknown", [{"vendor": "ascend", "tool": "npu-smi info",
                                                 "reason": "output not understood"}], src)
            raise ProbeError("npu-smi info printed no device table that npu-doctor can read")
        last = [ln.strip() for ln in text.splitlines() if ln.strip()]
        hit = loader or fail
        err = hit["line"] if hit else (last[-1] if last else f"exit status {res.returncode}")
        # a run that hung, or whose output only says it timed out, is not an init failure
        timeout = res.timed_out or (fail is None and says_only_timed_out(text))
        ctx.facts.set("ascend.npu_smi", {"status": "timeout" if timeout else "failed",
                                          "returncode": res.returncode, "error": err[:300]}, src)
        if loader:
            ctx.facts.set("ascend.npu_smi.missing_library", loader["library"], src)
        if fail:
            ctx.facts.set("ascend.npu_smi.dcmi_code", fail.get("code"), src)
            ctx.facts.set("ascend.npu_smi.dcmi_kind", fail["kind"], src)
            ctx.facts.set("ascend.npu_smi.dcmi_meaning", fail["meaning"], src)
        if res.timed_out:
            ctx.facts.set("ascend.npu_smi.error", "npu-smi info timed out", src)
        ctx.facts.set("inventory.unknown", [{"vendor": "ascend", "tool": "npu-smi info",
                                             "reason": err[:200]}], src)
        return
    chips = table["chips"]
    ctx.facts.set("ascend.npu_smi", {"status": "ok", "returncode": res.returncode,
                                      "count": len(chips)}, src)
    if table.get("tool_version"):
        ctx.facts.set("ascend.npu_smi.version", table["tool_version"], src)
    drv = table.get("driver_version")
    bus_count: Dict[str, int] = {}
    for c in chips:
        bus_count[c.get("bus_id", "")] = bus_count.get(c.get("bus_id", ""), 0) + 1
    boards: Dict[int, Dict[str, Any]] = {}
    commons: Dict[int, Dict[str, Any]] = {}
    per_npu: Dict[int, int] = {}
    for c in chips:
        per_npu[c["npu_id"]] = per_npu.get(c["npu_id"], 0) + 1
    for npu_id in sorted(per_npu):
        for kind, parse, into in (("board", P.parse_board, boards), ("common", P.parse_common, commons)):
            if kind == "common" and per_npu[npu_id] != 1:
                continue  # several chips per NPU: `-t common` without -c would mix them up
            argv = ["npu-smi", "info", "-t", kind, "-i", str(npu_id)]
            try:
                br = ctx.run(argv, timeout=8)
            except (CommandNotFound, HostError):
                continue
            if br.ok:
                try:
                    into[npu_id] = dict(parse(br.stdout), _source=br.source)
                except ValueError:
                    pass
    for c in chips:
        idx = c.get("phy_id", c.get("device_id", c["npu_id"]))
        rec: Dict[str, Any] = {"vendor": "ascend", "name": c.get("name"), "index": idx,
                               "npu_id": c["npu_id"], "chip_id": c.get("chip_id"),
                               "health": c.get("health"), "power_w": c.get("power_w"),
                               "temperature_c": c.get("temperature_c"),
                               "utilization_percent": c.get("aicore_percent"),
                               "bus_id": c.get("bus_id")}
        if c.get("bus_id") and bus_count.get(c["bus_id"], 0) == 1:
            rec["pci_address"] = _pci(c["bus_id"])
        mem = {k: c[k] for k in ("hbm_used_mb", "hbm_total_mb", "memory_used_mb",
                                 "memory_total_mb") if k in c}
        if mem:
            rec["memory"] = mem
        if drv:
            rec["driver"] = {"version": drv}
        sources = {}
        b = boards.get(c["npu_id"])
        if b:
            fw: Dict[str, Any] = {}
            if b.get("firmware_version"):
                fw["version"] = b["firmware_version"]
                sources["firmware.version"] = b["_source"]
            if b.get("compatibility"):
                fw["compatibility"] = b["compatibility"]
                sources["firmware.compatibility"] = b["_source"]
            if fw:
                rec["firmware"] = fw
            if b.get("software_version") and not drv:
                rec["driver"] = {"version": b["software_version"]}
                sources["driver.version"] = b["_source"]
        cm = commons.get(c["npu_id"])
        if cm and (cm.get("rated_mhz") or cm.get("cur_mhz")):
            freq = {}
            if cm.get("cur_mhz") is not None:
                freq["cur_hz"] = int(cm["cur_mhz"] * 1000000)
            if cm.get("rated_mhz") is not None:
                freq["max_hz"] = int(cm["rated_mhz"] * 1000000)
            rec["freq"] = freq
            for k in freq:
                sources[f"freq.{k}"] = cm["_source"]
        rec = {k: v for k, v in rec.items() if v is not None}
        ctx.facts.add_accelerator(rec, sources=sources, source=src)


def _toolkit_infos(ctx: ProbeContext) -> List[str]:
    seen: List[str] = []
    roots = list(ROOTS)
    env = {}
    try:
        env = ctx.host.environ()
    except HostError:
        pass
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        v = env.get(var)
        if v:
            for cand in (posixpath.join(v, "*-linux", "ascend_toolkit_install.info"),
                         posixpath.join(v, "ascend_toolkit_install.info")):
                for p in ctx.host.glob(cand):
                    if p not in seen:
                        seen.append(p)
    home = env.get("HOME")
    if home:
        roots.append(posixpath.join(home, "Ascend"))
    for root in roots:
        for pat in TOOLKIT_GLOBS:
            for p in ctx.host.glob(pat.format(root=root)):
                if p not in seen:
                    seen.append(p)
    return seen


def _info_file(ctx: ProbeContext, path: str) -> Optional[Dict[str, str]]:
    """A `key=value` version/install file parsed, or None when missing or unreadable."""
    text = ctx.read(path)
    if not text:
        return None
    try:
        return P.parse_info_file(text)
    except ValueError:
        return None


@collector("ascend_versions")
def collect_versions(ctx: ProbeContext) -> None:
    found = False
    for path, key in ((DRIVER_INFO, "driver"), (FIRMWARE_INFO, "firmware")):
        info = _info_file(ctx, path)
        if info is None:
            continue
        found = True
        keep = {"version": info.get("version") or info.get("package_version"),
                "package_version": info.get("package_version"),
                "innerversion": info.get("innerversion"),
                "compatible_version": info.get("compatible_version"),
                "compatible_version_fw": info.get("compatible_version_fw"),
                "compatible_version_drv": info.get("compatible_version_drv")}
        ctx.facts.set(f"ascend.{key}", {k: v for k, v in keep.items() if v}, path)
    kv = _info_file(ctx, INSTALL_INFO) or {}
    p = kv.get("driver_install_path_param") or kv.get("driver_install_path")
    if p:
        ctx.facts.set("ascend.driver.install_path", p, INSTALL_INFO)
    for path in _toolkit_infos(ctx):
        info = _info_file(ctx, path)
        if not info or not info.get("version"):
            continue
        found = True
        cann = {"version": info["version"], "innerversion": info.get("innerversion"),
                "compatible_version": info.get("compatible_version"),
                "package": info.get("package_name"),
                "path": posixpath.dirname(path)}
        ctx.facts.set("sdks.cann", {k: v for k, v in cann.items() if v}, path)
        break
    if not found:
        raise NoData("no Ascend driver, firmware or CANN version files")


@collector("ascend_log_env")
def collect_log_env(ctx: ProbeContext) -> None:
    """The environment the seed write-ups warn about: the debug level set but printing nowhere
    visible, or a log directory this user cannot write (then nothing is logged at all)."""
    try:
        env = ctx.host.environ()
    except HostError:
        env = {}
    level = env.get("ASCEND_GLOBAL_LOG_LEVEL")
    log_path = env.get("ASCEND_PROCESS_LOG_PATH")
    if level is None and log_path is None and env.get("ASCEND_SLOG_PRINT_TO_STDOUT") is None:
        raise NoData("no Ascend log settings in the environment")
    src = "environment"
    problems = P.log_env_problems(env)
    if level is not None:
        ctx.facts.set("ascend.log_env.log_level", level, src)
    to_stdout = env.get("ASCEND_SLOG_PRINT_TO_STDOUT")
    if to_stdout is not None:
        ctx.facts.set("ascend.log_env.print_to_stdout", to_stdout, src)
    log_dir = log_path or (posixpath.join(env["HOME"], "ascend", "log") if env.get("HOME") else None)
    if log_dir:
        ctx.facts.set("ascend.log_env.log_dir", log_dir, src)
        target = log_dir
        # the directory, or the nearest existing parent it would be created in
        while target and target != "/" and not ctx.host.exists(target):
            target = posixpath.dirname(target)
        if target and ctx.host.exists(target):
            try:
                ok = ctx.host.can_open(target, write=True)
            except (HostError, NotImplementedError):
                ok = None
            if ok is False:
                problems.append({"problem": "log-dir-not-writable",
                                 "detail": f"{target} is not writable by this user, so the runtime "
                                           f"cannot write its logs under {log_dir}"})
    ctx.facts.set("ascend.log_env.problems", problems, src)
    ctx.facts.set("ascend.log_env.problem_count", len(problems), src)


# -- derived compatibility verdicts ---------------------------------------------------------
def _known(entry: Dict[str, Any]) -> Dict[str, Any]:
    """A compat record without its unknown (None) fields."""
    return {k: v for k, v in entry.items() if v is not None}


def _ranges(text: Optional[str]):
    if not text:
        return None
    try:
        return P.parse_range_list(text)
    except ValueError:
        return None


@deriver(after=("derive_catalog_facts",))
def derive_ascend_compat(facts: Facts, host) -> None:
    """compat.ascend-fw-drv, compat.ascend-cann-drv, compat.ascend-cann-hdk.

    Order of evidence: the on-device verdict first (npu-smi board `Compatibility`), then the
    ranges the driver and firmware packages carry (`compatible_version_fw`,
    `compatible_version_drv`, CANN `compatible_version` vs the driver's Innerversion family),
    then the published CANN <-> HDK table (rules/ascend.toml, matrix `ascend-cann-hdk`).
    """
    accels = [a for a in facts.get("accelerators", []) or [] if a.get("vendor") == "ascend"]
    drv = facts.get("ascend.driver") or {}
    fw = facts.get("ascend.firmware") or {}
    drv_version = drv.get("version") or next(
        (a.get("driver", {}).get("version") for a in accels if a.get("driver", {}).get("version")), None)
    fw_version = fw.get("version") or next(
        (a.get("firmware", {}).get("version") for a in accels if a.get("firmware", {}).get("version")), None)
    # 1) on-device verdict
    nok = [a for a in accels if str(a.get("firmware", {}).get("compatibility", "")).upper() == "NOK"]
    if nok:
        a = nok[0]
        set_compat(facts, "ascend-fw-drv", _known({
            "status": "mismatch", "subject": f"NPU {a.get('npu_id')}", "what": "firmware",
            "matrix": "npu-smi", "driver_version": drv_version,
            "firmware_version": a.get("firmware", {}).get("version"),
            "detail": f"npu-smi info -t board reports Compatibility : NOK for NPU {a.get('npu_id')} "
                      f"(driver {drv_version or '?'}, firmware {a.get('firmware', {}).get('version', '?')})",
        }), "$ npu-smi info -t board -i " + str(a.get("npu_id")))
    elif drv_version and fw_version:
        # 2) ranges carried by the packages
        bad = []
        rng = _ranges(drv.get("compatible_version_fw"))
        if rng:
            ok = P.in_range_list(fw_version, rng)
            if ok is False:
                bad.append(f"firmware {fw_version} is outside the driver's compatible_version_fw="
                           f"{drv['compatible_version_fw']}")
        rng = _ranges(fw.get("compatible_version_drv"))
        if rng:
            ok = P.in_range_list(drv_version, rng)
            if ok is False:
                bad.append(f"driver {drv_version} is outside the firmware's compatible_version_drv="
                           f"{fw['compatible_version_drv']}")
        if bad:
            set_compat(facts, "ascend-fw-drv", _known({
                "status": "mismatch", "subject": "Ascend driver/firmware", "what": "firmware",
                "matrix": "version.info", "driver_version": drv_version,
                "firmware_version": fw_version, "detail": "; ".join(bad)}), DRIVER_INFO)
        elif drv.get("compatible_version_fw") or fw.get("compatible_version_drv"):
            set_compat(facts, "ascend-fw-drv", _known({"status": "ok", "subject": "Ascend driver/firmware",
                                                 "matrix": "version.info"}), DRIVER_INFO)
    cann = facts.get("sdks.cann") or {}
    cann_v = cann.get("version")
    fam = P.vrc_family(drv.get("innerversion"))
    if cann_v and fam and cann.get("compatible_version"):
        rng = _ranges(cann["compatible_version"])
        ok = P.in_range_list(fam, rng) if rng else None
        if ok is not None:
            set_compat(facts, "ascend-cann-drv", _known({
                "status": "ok" if ok else "mismatch", "subject": f"CANN {cann_v}",
                "what": f"CANN {cann_v}", "matrix": "compatible_version",
                "cann_version": cann_v, "driver_version": drv_version, "driver_family": fam,
                "detail": (f"the driver's family {fam} (Innerversion {drv.get('innerversion')}) is not "
                           f"in CANN {cann_v} compatible_version={cann['compatible_version']}")
                if not ok else None}), facts.source_of("sdks.cann.version"))
            return
    if cann_v and drv_version:
        rows = [r for r in matrix_rows("ascend-cann-hdk")
                if versions.prefix_match(cann_v, str(r.get("cann", "")))]
        if not rows:
            set_compat(facts, "ascend-cann-hdk", _known({
                "status": "not-in-matrix", "subject": f"CANN {cann_v}", "what": f"CANN {cann_v}",
                "matrix": "ascend-cann-hdk",
                "detail": f"driver {drv_version}; see the CANN release notes for its HDK pairing"}),
                facts.source_of("sdks.cann.version"))
            return
        hdks = [str(h) for r in rows for h in r.get("hdk", [])]
        if any(versions.prefix_match(drv_version, h) for h in hdks):
            set_compat(facts, "ascend-cann-hdk", _known({"status": "ok", "subject": f"CANN {cann_v}",
                                                   "matrix": "ascend-cann-hdk",
                                                   "source": rows[0].get("source")}), None)
            return
        lowest = min(hdks, key=lambda h: versions.normalize(h) or versions.normalize("0"))
        highest = max(hdks, key=lambda h: versions.normalize(h) or versions.normalize("0"))
        c_hi = versions.compare(drv_version, highest)
        c_lo = versions.compare(drv_version, lowest)
        if c_hi is not None and c_hi > 0:
            # a driver newer than every listed HDK: unknown, never a false mismatch
            set_compat(facts, "ascend-cann-hdk", _known({
                "status": "not-in-matrix", "subject": f"Ascend driver {drv_version}",
                "what": f"driver {drv_version}", "matrix": "ascend-cann-hdk",
                "detail": f"CANN {cann_v} is listed with HDK {', '.join(hdks)}; "
                          f"source {rows[0].get('source')}"}), None)
        elif c_lo is not None:
            set_compat(facts, "ascend-cann-hdk", _known({
                "status": "mismatch", "subject": f"CANN {cann_v}", "what": f"CANN {cann_v}",
                "matrix": "ascend-cann-hdk", "cann_version": cann_v, "driver_version": drv_version,
                "detail": f"CANN {cann_v} is published with Ascend HDK {', '.join(hdks)}, the driver "
                          f"is {drv_version} (source {rows[0].get('source')}, {rows[0].get('date', '')})",
                "source": rows[0].get("source")}), None)
