"""Google Coral (PCIe/M.2 Edge TPU on gasket/apex, USB Edge TPU): driver and runtime versions,
and what the kernel log, the DKMS build log and the runtime log say about them.

Device detection from /sys/class/apex (temperature and trip points) belongs to the inventory
probes; this module adds:
- drivers.gasket.version, drivers.apex.version (/sys/module/<m>/version, else the apex class
  attribute driver_version); drivers.gasket.package (dpkg gasket-dkms)
- sdks.libedgetpu.{version, package, path} (dpkg libedgetpu1-std/-max, the library file)
- sdks.edgetpu_compiler.{version, release} (`edgetpu_compiler --version`, dpkg, compiler logs)
- accelerators[] (vendor "coral", pci_address) for an apex device the kernel log names
- coral.dkms_failures[] {source, line_no, line, module, module_version, kernel, file,
  error, cause, fixed_by, matrix_source}: the gasket/apex module failing to build
- compat.edgetpu-* and compat.gasket-kernel verdicts, and inventory.unknown when the driver
  is missing for this kernel (a PCIe Edge TPU could not be seen even if fitted).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .. import versions
from ..errors import CommandNotFound, HostError
from ..facts import Facts
from ..matrices import matrix_rows
from ..parsers import coral as P
from ..probes import NoData, ProbeContext
from ..registry import collector, deriver
from ..sysfs import module_version
from .packages import installed_packages

LIB_GLOBS = ("/usr/lib/*-linux-gnu/libedgetpu.so.1*", "/usr/lib/libedgetpu.so.1*",
             "/usr/local/lib/libedgetpu.so.1*")
_DPKG_RUNTIME = ("libedgetpu1-std", "libedgetpu1-max", "libedgetpu1-legacy-std",
                 "libedgetpu1-legacy-max")


def _upstream(deb: str) -> Optional[str]:
    """`16.0` -> `16.0`; `16.0tf2.17.0-1` / `16.0TF2.17.0-1` -> `16.0`; `1.0-18` -> `1.0-18`."""
    m = re.match(r"^(?:\d+:)?(\d+\.\d+)", deb.strip())
    return m.group(1) if m else None


@collector("coral")
def collect_coral(ctx: ProbeContext) -> None:
    found = False
    for mod in ("gasket", "apex"):
        v, vpath = module_version(ctx.read, mod)
        if v:
            found = True
            ctx.facts.set(f"drivers.{mod}", {"version": v, "loaded": True, "source": vpath}, vpath)
    if ctx.facts.get("drivers.apex.version") is None:
        for d in ctx.host.glob("/sys/class/apex/apex_*"):
            v = ctx.read(f"{d}/driver_version")
            if v:
                found = True
                ctx.facts.set("drivers.apex", {"version": v, "source": f"{d}/driver_version"},
                              f"{d}/driver_version")
                break
    pkgs = installed_packages(ctx)
    if "gasket-dkms" in pkgs:
        found = True
        ctx.facts.set("drivers.gasket.package", {"name": "gasket-dkms", "version": pkgs["gasket-dkms"]},
                      "$ dpkg-query -W")
    for name in _DPKG_RUNTIME:
        if name in pkgs and _upstream(pkgs[name]):
            found = True
            ctx.facts.set("sdks.libedgetpu", {"version": _upstream(pkgs[name]), "package": name,
                                              "package_version": pkgs[name]}, "$ dpkg-query -W")
            break
    for pat in LIB_GLOBS:
        hits = ctx.host.glob(pat)
        if hits:
            found = True
            ctx.facts.set("sdks.libedgetpu.path", hits[0], hits[0])
            break
    if "edgetpu-compiler" in pkgs:
        v = _upstream(pkgs["edgetpu-compiler"])
        if v:
            found = True
            ctx.facts.set("sdks.edgetpu_compiler", {"version": pkgs["edgetpu-compiler"].split("-")[0],
                                                    "release": v}, "$ dpkg-query -W")
    try:
        res = ctx.run(["edgetpu_compiler", "--version"])
        try:
            parsed = P.parse_compiler_version(res.stdout + "\n" + res.stderr)
            found = True
            ctx.facts.set("sdks.edgetpu_compiler", {"version": parsed["version"],
                                                    "release": parsed["release"]}, res.source)
        except ValueError:
            pass
    except (CommandNotFound, HostError):
        pass
    if not found:
        raise NoData("no gasket/apex driver, libedgetpu or edgetpu_compiler")


# -- derived facts ---------------------------------------------------------------------------
def _events(facts: Facts, *signatures: str) -> List[Dict[str, Any]]:
    return [e for e in facts.get("log_events", []) or [] if e.get("signature") in signatures]


def _level(rows: List[Dict[str, Any]], key: str, version: Optional[str]) -> Optional[Dict[str, Any]]:
    if not version:
        return None
    for r in rows:
        ref = str(r.get(key, ""))
        # `16.0` (dpkg) and `16.0.384591198` (--version) name the same compiler release
        if ref and (versions.prefix_match(version, ref) or versions.prefix_match(ref, version)):
            return r
    return None


@deriver(after=("derive_catalog_facts",))
def derive_coral(facts: Facts, host) -> None:
    """Accelerators named by the apex kernel log, DKMS build failures with their known cause,
    and the compiler/runtime/kernel verdicts from the matrices in rules/coral.toml."""
    accels = facts.get("accelerators", []) or []
    # 1) an apex device the kernel log names (it exists even when it stopped answering)
    for e in _events(facts, "catalog:coral-gasket/ram-enable-timeout", "catalog:coral-gasket/open-timeout",
                     "catalog:coral-gasket/reset-timeout"):
        pci = (e.get("device") or "").lower()
        if pci and not any(a.get("pci_address") == pci for a in facts.get("accelerators", []) or []):
            facts.add_accelerator({"vendor": "coral", "name": "Edge TPU (apex)", "pci_address": pci,
                                   "driver": {"name": "apex"}},
                                  source=f"{e['source']}:{e['line_no']}")
    # the runtime only checks a model's runtime version against an opened Edge TPU
    if not any(a.get("vendor") == "coral" for a in facts.get("accelerators", []) or []):
        for e in _events(facts, "catalog:edgetpu/package-runtime-newer"):
            facts.add_accelerator({"vendor": "coral", "name": "Edge TPU"},
                                  source=f"{e['source']}:{e['line_no']}")
            break
    # 2) DKMS build failures, one per log, with the matrix's known cause
    headers = {e["source"]: e for e in _events(facts, "dkms-make-header")}
    known = matrix_rows("gasket-kernel")
    failures: List[Dict[str, Any]] = []
    # one failure per log: the first error a matrix row explains (a log can open with a
    # follow-on error, e.g. a broken version guard before the API change it guards), else the first
    def explained(line: str) -> bool:
        return any(r.get("symptom") and str(r["symptom"]) in line for r in known)

    per_log: Dict[str, Dict[str, Any]] = {}
    for e in _events(facts, "gasket-build-error"):
        kept = per_log.setdefault(e["source"], e)
        if kept is not e and not explained(kept["line"]) and explained(e["line"]):
            per_log[e["source"]] = e
    for e in per_log.values():
        h = headers.get(e["source"], {})
        f: Dict[str, Any] = {"source": e["source"], "line_no": e["line_no"], "line": e["line"],
                             "file": e.get("file"), "error": e.get("error"),
                             "module": h.get("module") or "gasket",
                             "module_version": h.get("version"), "kernel": h.get("kernel")}
        for row in known:
            if row.get("symptom") and str(row["symptom"]) in e["line"]:
                f.update(cause=row.get("cause"), kernel_min=row.get("kernel_min"),
                         fixed_by=row.get("fixed_by"), matrix_source=row.get("source"))
                break
        failures.append({k: v for k, v in f.items() if v is not None})
    if failures:
        facts.set("coral.dkms_failures", failures, failures[0]["source"])
        if not any(a.get("vendor") == "coral" for a in accels):
            lst = facts.data.setdefault("inventory", {}).setdefault("unknown", [])
            lst.append({"vendor": "coral", "tool": "gasket/apex DKMS",
                        "reason": "the apex driver did not build for this kernel, so a PCIe Edge "
                                  "TPU cannot be seen"})
    # 3) gasket-dkms package vs the running kernel (no build log needed)
    pkg = facts.get("drivers.gasket.package.version")
    kmm = P.kernel_major_minor(facts.get("kernel.release"))
    if pkg and kmm and facts.get("drivers.apex.loaded") is None and not failures:
        for row in known:
            kmin = P.kernel_major_minor(str(row.get("kernel_min", "")))
            broken = [str(x) for x in row.get("broken_packages", [])]
            if kmin and kmm >= kmin and pkg in broken:
                facts.set("compat.gasket-kernel", {
                    "status": "mismatch", "matrix": "gasket-kernel", "subject": "gasket-dkms",
                    "detail": f"gasket-dkms {pkg} does not build on kernel {facts.get('kernel.release')} "
                              f"({row.get('cause')}); source {row.get('source')}",
                    "kernel": facts.get("kernel.release"), "package_version": pkg}, None)
                break
    # 4) compiler default runtime level vs the installed runtime's level
    comp = facts.get("sdks.edgetpu_compiler.version")
    rt = facts.get("sdks.libedgetpu.version")
    if comp and rt:
        c_rows = matrix_rows("edgetpu-compiler-runtime")
        c_row = _level(c_rows, "compiler", comp)
        r_row = _level(matrix_rows("libedgetpu-runtime"), "libedgetpu", rt)
        if c_row is None and r_row is not None:
            # a compiler between two rows (e.g. 2.1.302470888, released before 14.1 although
            # 2 < 14 numerically) targets at most the runtime of the next newer row; ordered
            # by changelist number, never numerically. Newer than every row stays unknown.
            newer = [r for r in c_rows if P.compiler_order(str(r["compiler"])) > P.compiler_order(comp)
                     and P.compiler_order(str(r["compiler"]))[0] > 0]
            if newer and P.compiler_order(comp)[0] > 0:
                nxt = min(newer, key=lambda r: P.compiler_order(str(r["compiler"])))
                if int(nxt["runtime"]) <= int(r_row["runtime"]):
                    c_row = dict(nxt, runtime=nxt["runtime"])
        if c_row is None or r_row is None:
            what = f"edgetpu_compiler {comp}" if c_row is None else f"libedgetpu {rt}"
            facts.set("compat.edgetpu-compiler-runtime", {
                "status": "not-in-matrix", "matrix": "edgetpu-compiler-runtime", "subject": what,
                "what": what, "detail": f"compiler {comp}, runtime {rt}"}, None)
        else:
            need, have = int(c_row["runtime"]), int(r_row["runtime"])
            entry = {"status": "ok" if need <= have else "mismatch",
                     "matrix": "edgetpu-compiler-runtime", "subject": f"edgetpu_compiler {comp}",
                     "compiler_version": comp, "runtime_version": rt,
                     "package_runtime": need, "host_runtime": have,
                     "source": c_row.get("source")}
            if need > have:
                entry["detail"] = (f"edgetpu_compiler {comp} emits models for runtime {need} by "
                                   f"default; libedgetpu {rt} implements runtime {have}")
            facts.set("compat.edgetpu-compiler-runtime", entry, None)
