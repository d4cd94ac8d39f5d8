"""Rockchip RKNN user space: runtime library versions, Python toolkits, runtime-log banners,
and the runtime <-> rknpu driver check against `rules/rockchip.toml` matrices.

Facts:
- `sdks.librknnrt` / `sdks.librknnmrt` / `sdks.rknn_server`: {version, build, path} read from
  the version string inside the binary (bytes are scanned; nothing is loaded), or from the
  runtime's init banner in a runtime log (then `path` is absent and the source is the log).
- `sdks.rknn_toolkit_lite2`, `sdks.rknn_toolkit2`, `sdks.rkllm_toolkit`: {version, path} from
  Python distribution metadata (live) or from what a runtime log prints; `sdks.rkllm`
  {version, platform} from the RKLLM runtime's banner (`rkllm-runtime version: 1.1.2, ...`).
- `rknn.runtime_log`: {source, driver_version, model_version, model_toolkit_version,
  invalid_model_version, driver_required, driver_recommended, rkllm_driver_min} as the log states.
- `drivers.rknpu.version` from the runtime's `RKNN Driver Information` line when no better source
  (debugfs, set by the accelerators probe) gave one (deriver, after all probes).
- `compat.rknn-driver-<runtime>`, `compat.rknn-toolkit-runtime`, `compat.rknn-server-runtime`:
  one record per pair checked {matrix, subject, what, status (ok | mismatch | not-in-matrix),
  detail, ...} (see `check_runtime_driver`).
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional, Tuple

from .. import versions
from ..errors import HostError
from ..facts import Facts
from ..host import Host
from ..matrices import set_compat, shipped_matrices
from ..parsers.rknn import parse_dist_version, parse_lib_version
from ..probes import NoData, ProbeContext
from ..registry import collector, deriver
from .logscan import scan_logs

#: Where the board images and the rknpu2 / rknn-toolkit2 install docs put the runtimes.
LIB_PATHS = (
    "/usr/lib/librknnrt.so", "/usr/lib64/librknnrt.so", "/usr/lib/aarch64-linux-gnu/librknnrt.so",
    "/usr/lib/arm-linux-gnueabihf/librknnrt.so", "/usr/local/lib/librknnrt.so",
    "/usr/lib/librknnmrt.so", "/oem/usr/lib/librknnmrt.so", "/usr/local/lib/librknnmrt.so",
    "/usr/bin/rknn_server", "/usr/local/bin/rknn_server",
)
SITE_GLOBS = (
    "/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
    "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
    "/home/*/.local/lib/python3*/site-packages", "/root/.local/lib/python3*/site-packages",
    "/home/*/miniconda3/envs/*/lib/python3*/site-packages",
    "/home/*/*/lib/python3*/site-packages",
)
#: Python distributions (normalised name -> sdks key). The RKLLM *runtime* is a C library
#: whose version is known only from its log banner; rkllm-toolkit is the PC-side converter.
DISTS = {"rknn_toolkit_lite2": "rknn_toolkit_lite2", "rknn_toolkit2": "rknn_toolkit2",
         "rkllm_toolkit": "rkllm_toolkit"}
MAX_LIB_BYTES = 64 * 1024 * 1024


def _scan_lib(ctx: ProbeContext, path: str) -> Optional[Dict[str, str]]:
    try:
        data = ctx.host.read_bytes(path, MAX_LIB_BYTES)
    except HostError as e:
        if e.__class__.__name__ == "AccessDenied":
            ctx.denied(path, "RKNN runtime version")
        return None
    return parse_lib_version(data)


def python_dists(host: Host, prefixes: Tuple[str, ...], site_globs=SITE_GLOBS,
                 run=None) -> Dict[str, Tuple[str, str]]:
    """{dist name: (version, dist-info path)} of installed Python distributions named exactly
    one of `prefixes` (`openvino`, not openvino_genai), in the application environments
    (npu_doctor.pyenv), then the system-wide and `site_globs` directories; first found wins.
    The version is METADATA's `Version:` (else the folder name's). Pass a probe's `ctx.run`
    as `run`, so one check asks each interpreter once."""
    from ..pyenv import find_dists, site_dirs

    found: Dict[str, Tuple[str, str]] = {}
    dists = find_dists(host, list(prefixes), site_dirs(host, extra_globs=site_globs, run=run))
    for pre in prefixes:
        dist = dists.get(pre.replace("_", "-").lower())
        if dist is None:
            continue
        meta = dist.read(host, "METADATA", 65536) or dist.read(host, "PKG-INFO", 65536)
        ver = parse_dist_version(posixpath.basename(dist.path), meta)
        if ver:
            found[pre] = (ver, dist.path)
    return found


@collector("rknn_runtime")
def collect_rknn_runtime(ctx: ProbeContext) -> None:
    libs = list(ctx.args.get("libs", LIB_PATHS))
    for path in libs:
        if not ctx.host.exists(path):
            continue
        got = _scan_lib(ctx, path)
        if not got:
            continue
        key = f"sdks.{got['library']}"
        if ctx.facts.get(key) is not None:
            continue
        ctx.facts.set(f"{key}.version", got["version"], path)
        ctx.facts.set(f"{key}.build", got.get("build"), path)
        ctx.facts.set(f"{key}.path", ctx.host.realpath(path), path)

    for pre, (ver, where) in python_dists(ctx.host, tuple(DISTS), run=ctx.run).items():
        ctx.facts.set(f"sdks.{DISTS[pre]}.version", ver, where)
        ctx.facts.set(f"sdks.{DISTS[pre]}.path", where, where)

    # the shared streamed pass over the logs (collectors.logscan) ran parse_runtime_log
    for scan in scan_logs(ctx.host, ctx.options.get("signatures", []), ctx.options.get("catalogs")):
        source, parsed = scan.name, scan.rknn
        if not parsed:
            continue
        _facts_from_log(ctx.facts, parsed, source)
    if not ctx.facts.data:
        raise NoData("no RKNN runtime, toolkit or runtime log on this host")


def _facts_from_log(facts: Facts, parsed: Dict[str, Any], source: str) -> None:
    rt = parsed.get("runtime")
    if rt and facts.get(f"sdks.{rt['library']}") is None:
        facts.set(f"sdks.{rt['library']}.version", rt["version"], source)
        facts.set(f"sdks.{rt['library']}.build", rt.get("build"), source)
    for key, sdk in (("toolkit_lite2_version", "rknn_toolkit_lite2"),
                     ("toolkit2_version", "rknn_toolkit2")):
        if parsed.get(key) and facts.get(f"sdks.{sdk}") is None:
            # the toolkits print a local version `2.0.0b0+9bab5682`: the token is the version,
            # the commit after '+' its build (contract: no build hashes in a version fact)
            ver, _, build = str(parsed[key]).partition("+")
            facts.set(f"sdks.{sdk}.version", ver, source)
            facts.set(f"sdks.{sdk}.build", build or None, source)
    rk = parsed.get("rkllm")
    if rk and facts.get("sdks.rkllm") is None:
        facts.set("sdks.rkllm.version", rk["version"], source)
        facts.set("sdks.rkllm.platform", rk.get("platform"), source)
    if facts.get("rknn.runtime_log") is None:
        rec = {k: v for k, v in parsed.items() if k not in ("runtime", "rkllm")}
        rec["source"] = source
        facts.set("rknn.runtime_log", rec, source)


# -- the matrix check (after all probes) ---------------------------------------------------


def _in_range(v: str, lo: Optional[str], below: Optional[str]) -> bool:
    if lo and (versions.compare(v, lo) or 0) < 0:
        return False
    if below and (versions.compare(v, below) or 0) >= 0:
        return False
    return versions.normalize(v) is not None


def check_runtime_driver(component: str, runtime_version: str, driver_version: str,
                         rows: List[Dict[str, Any]], known_driver_max: Optional[str]) -> Dict[str, Any]:
    """One compat record for a runtime component against the rknpu driver.

    status: `mismatch` (driver below the row's minimum; `kind` says whether the runtime
    refuses it or only recommends more), `ok`, or `not-in-matrix` (no row covers this runtime
    version, or the driver is newer than every driver the matrix knows: never a mismatch).
    """
    rec: Dict[str, Any] = {
        "matrix": "rknn-runtime-driver", "subject": component,
        "what": f"{component} {runtime_version} with rknpu driver {driver_version}",
        "runtime": component, "runtime_version": runtime_version,
        "driver_version": driver_version,
    }
    cover = [r for r in rows if r.get("runtime") == component
             and _in_range(runtime_version, r.get("runtime_min"), r.get("runtime_below"))]
    if not cover:
        known = sorted({f"{r.get('runtime_min')} to before {r.get('runtime_below')}" for r in rows
                        if r.get("runtime") == component})
        rec.update(status="not-in-matrix",
                   detail=(f"the matrix covers {component} {', '.join(known)}" if known else
                           f"the matrix has no rows for {component}"))
        return rec
    # the strictest row that covers this runtime decides
    cover.sort(key=lambda r: versions.normalize(r["driver_min"]) or versions.normalize("0"))
    row = cover[-1]
    rec.update(driver_min=row["driver_min"], kind=row.get("kind", "required"),
               row_source=row.get("source"), row_date=row.get("date"), note=row.get("note", ""))
    c = versions.compare(driver_version, row["driver_min"])
    if c is None:
        rec.update(status="not-in-matrix", detail=f"driver version {driver_version!r} unreadable")
    elif c < 0 and rec["kind"] == "observed":
        # below_observed lets derive_rknn_compat join this with NPU job failures in the logs
        rec.update(status="not-in-matrix", below_observed=True,
                   detail=f"rknpu {driver_version} is older than any driver seen working with "
                          f"{component} {runtime_version} (oldest seen {row['driver_min']})")
    elif c < 0:
        rec.update(status="mismatch",
                   detail=f"{component} {runtime_version} {'needs' if rec['kind'] == 'required' else 'recommends'} "
                          f"rknpu >= {row['driver_min']} ({row.get('source')})")
    elif known_driver_max and (versions.compare(driver_version, known_driver_max) or 0) > 0:
        rec.update(status="not-in-matrix",
                   detail=f"rknpu {driver_version} is newer than every driver in the matrix "
                          f"(newest known {known_driver_max})")
    else:
        rec.update(status="ok", detail=f"rknpu {driver_version} >= {row['driver_min']}")
    return rec


def check_driver_defect(rec: Dict[str, Any], defects: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Turn an `ok` runtime/driver record into a mismatch when a `rknpu-driver-defects` row says
    this driver release fails jobs of this runtime (a driver bug fixed in `driver_below`).

    A row: runtime, runtime_min, runtime_below (the runtimes seen failing), driver_min,
    driver_below (the defective driver range), note, source. Other records pass unchanged.
    """
    if rec.get("status") != "ok":
        return rec
    for row in defects:
        if row.get("runtime") != rec["runtime"] or not _in_range(
                rec["runtime_version"], row.get("runtime_min"), row.get("runtime_below")):
            continue
        if not _in_range(rec["driver_version"], row.get("driver_min"), row.get("driver_below")):
            continue
        rec = dict(rec, status="mismatch", kind="required", driver_min=row["driver_below"],
                   row_source=row.get("source"), row_date=row.get("date"), note=row.get("note", ""),
                   detail=f"rknpu {row['driver_min']} to before {row['driver_below']} fails jobs of "
                          f"{rec['runtime']} {rec['runtime_version']} ({row.get('source')})")
        break
    return rec


# Log lines that say the NPU accepted a job and never completed it (runtime side and rknpu
# kernel side). Alone they name no cause; beside a driver older than any seen working with the
# runtime they are the evidence that the pairing fails (airockchip/rknn-toolkit2#447:
# librknnrt 2.3.2 on rknpu 0.7.2, every rknn_run 'failed to submit!').
NPU_JOB_FAILED = frozenset({
    "catalog:rknn/submit-failed", "catalog:rknn/-2", "catalog:rknpu-driver/job-timeout",
})


def check_failing_below_observed(rec: Dict[str, Any], events: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Turn a `not-in-matrix` record whose driver is below every driver seen working with the
    runtime (an `observed` row) into a mismatch when the logs show NPU jobs failing; without
    failing jobs it stays not-in-matrix (an old driver alone is not known to fail)."""
    if rec.get("status") != "not-in-matrix" or not rec.get("below_observed"):
        return rec
    failed = next((e for e in events if e.get("signature") in NPU_JOB_FAILED), None)
    if failed is None:
        return rec
    return dict(rec, status="mismatch", kind="observed-failing",
                failed_line=failed.get("line"),
                failed_at=f"{failed.get('source')}:{failed.get('line_no')}",
                detail=f"NPU jobs fail ({failed.get('source')}:{failed.get('line_no')}) and rknpu "
                       f"{rec['driver_version']} is older than any driver seen working with "
                       f"{rec['runtime']} {rec['runtime_version']} (oldest seen {rec['driver_min']})")


def _major_minor(v: str) -> Optional[Tuple[int, int]]:
    n = versions.normalize(v)
    if n is None:
        return None
    rel = list(n.release) + [0, 0]
    return rel[0], rel[1]


@deriver(after=("derive_catalog_facts",))
def derive_rknn_compat(facts: Facts, host: Host) -> None:
    """drivers.rknpu.version from the runtime log when nothing better set it; then `compat.*`
    records for librknnrt/librknnmrt/rkllm vs the rknpu driver, toolkit and rknn_server vs runtime."""
    log = facts.get("rknn.runtime_log") or {}
    if facts.get("drivers.rknpu.version") is None and log.get("driver_version"):
        src = facts.source_of("rknn.runtime_log.driver_version") or log.get("source")
        facts.set("drivers.rknpu.version", log["driver_version"], src)
        facts.set("drivers.rknpu.source", src, src)
    driver = facts.get("drivers.rknpu.version")
    mats = shipped_matrices()
    rows = mats.get("rknn-runtime-driver", [])
    known = mats.get("rknpu-driver-known", [])
    known_max = None
    for r in known:
        if r.get("newest") and (known_max is None or (versions.compare(r["newest"], known_max) or 0) > 0):
            known_max = r["newest"]
    out: List[Dict[str, Any]] = []
    if driver:
        for comp in ("librknnrt", "librknnmrt", "rkllm"):
            ver = facts.get(f"sdks.{comp}.version")
            if ver:
                rec = check_driver_defect(check_runtime_driver(comp, ver, driver, rows, known_max),
                                          mats.get("rknpu-driver-defects", []))
                out.append((check_failing_below_observed(rec, facts.get("log_events") or []),
                            f"sdks.{comp}.version"))
    # toolkit (what built or runs the model) newer than the runtime by major.minor
    runtime = facts.get("sdks.librknnrt.version") or facts.get("sdks.librknnmrt.version")
    invalid_logged = log.get("invalid_model_version") is not None
    for tk_key in ("model_toolkit", "rknn_toolkit_lite2", "rknn_toolkit2"):
        # the toolkit that compiled the loaded model (runtime banner) decides first
        tk = log.get("model_toolkit_version") if tk_key == "model_toolkit" else facts.get(f"sdks.{tk_key}.version")
        if not (runtime and tk) or invalid_logged:
            continue
        a, b = _major_minor(tk), _major_minor(runtime)
        if a is None or b is None:
            continue
        rec = {"matrix": "rknn-toolkit-runtime", "subject": tk_key.replace("_", "-"),
               "what": f"{tk_key.replace('_', '-')} {tk} with RKNN runtime {runtime}",
               "toolkit": tk_key, "toolkit_version": tk, "runtime_version": runtime}
        if a > b:
            rec.update(status="mismatch", kind="required",
                       detail=f"models from toolkit {tk} need a runtime >= {a[0]}.{a[1]} "
                              "(rknn-toolkit-lite2 CHANGELOG: each release pairs with the runtime of its version)")
        else:
            rec.update(status="ok", detail=f"runtime {runtime} >= toolkit {a[0]}.{a[1]}")
        out.append((rec, "rknn.runtime_log.model_toolkit_version" if tk_key == "model_toolkit"
                    else f"sdks.{tk_key}.version"))
        break
    # rknn_server (board side of the PC toolkit's connection) and the runtime it loads
    server = facts.get("sdks.rknn_server.version")
    rt = facts.get("sdks.librknnrt.version")
    if server and rt:
        a, b = _major_minor(server), _major_minor(rt)
        if a is not None and b is not None:
            rec = {"matrix": "rknn-server-runtime", "subject": "rknn_server",
                   "what": f"rknn_server {server} with librknnrt {rt}",
                   "server_version": server, "runtime_version": rt}
            if a != b:
                rec.update(status="mismatch", kind="recommended",
                           detail="rknn_server and librknnrt come from different rknpu2 releases; "
                                  "install both from the same release (airockchip/rknn-toolkit2#175)")
            else:
                rec.update(status="ok", detail="same release series")
            out.append((rec, "sdks.rknn_server.version"))
    for rec, src_path in out:
        # compat is a table keyed by check (the convention of every vendor's compat facts)
        key = rec["matrix"] if rec["matrix"] != "rknn-runtime-driver" else f"rknn-driver-{rec['runtime']}"
        set_compat(facts, key, rec, facts.source_of(src_path))
