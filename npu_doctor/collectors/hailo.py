"""Hailo-8/8L/8R and Hailo-10H/15: device identity, hailo_pci driver, HailoRT and TAPPAS.

Facts written:
- accelerators[] (vendor "hailo"): pci_address, name (the Device Architecture, e.g. HAILO8L,
  trusted over Board Name), architecture, board_name, product_name, part_number,
  firmware.version, driver.{name, version}, dev (/dev/hailoN; /dev/h1x-N from hailo1x_pci 5.3)
- drivers.hailo_pci.version / drivers.hailo1x_pci.version (/sys/module/<m>/version, or the
  version HailoRT reports when it refuses the driver)
- sdks.hailort.{version, path|source} (libhailort.so.X.Y.Z, `hailortcli --version`, dpkg, or
  the library version HailoRT prints in its mismatch error)
- sdks.tappas.version (dpkg hailo-tappas-core, pkg-config, or a `TAPPAS_VERSION is X` log line)
- hailo.identify.{status: ok|driver-mismatch|failed, returncode, error, status_name}
- compat.hailo-* verdicts (deriver) for the rules in rules/hailo.toml.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Dict, List, Optional

from ..errors import CommandNotFound, HostError
from ..facts import Facts
from ..parsers import hailo as P
from ..parsers.timeouts import says_only_timed_out
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector, deriver
from ..sysfs import module_version
from .packages import installed_packages

IDENTIFY = ["hailortcli", "fw-control", "identify"]
CLI_VERSION = ["hailortcli", "--version"]
MODULES = ("hailo_pci", "hailo1x_pci")
LIB_GLOBS = ("/usr/lib/libhailort.so.*", "/usr/lib/*-linux-gnu/libhailort.so.*",
             "/usr/local/lib/libhailort.so.*", "/lib/*-linux-gnu/libhailort.so.*")
TAPPAS_PC_GLOBS = ("/usr/lib/*-linux-gnu/pkgconfig/hailo-tappas-core.pc",
                   "/usr/lib/pkgconfig/hailo-tappas-core.pc",
                   "/usr/local/lib/pkgconfig/hailo-tappas-core.pc")
_DPKG_HAILORT = ("hailort", "h10-hailort", "python3-hailort", "hailort-pcie-driver")
_DPKG_TAPPAS = ("hailo-tappas-core", "hailo-tappas", "hailo-tappas-core-python-binding")


def _upstream(deb_version: str) -> Optional[str]:
    m = re.match(r"^(?:\d+:)?(\d+(?:\.\d+)+)", deb_version.strip())
    return m.group(1) if m else None


@collector("hailo")
def collect_hailo(ctx: ProbeContext) -> None:
    found = False
    # kernel driver
    for mod in MODULES:
        v, vpath = module_version(ctx.read, mod)
        if v:
            found = True
            ctx.facts.set(f"drivers.{mod}", {"version": v, "loaded": True, "source": vpath}, vpath)
    # device nodes and their PCI functions: hailo_pci and hailo1x_pci up to 5.2 register class
    # hailo_chardev with nodes hailoN; hailo1x_pci 5.3+ registers class hailo1x with nodes h1x-N
    # (hailort-drivers linux/pcie/src/pcie.c: class_create_compat, HAILO_DEV_NAME "%s-%d")
    for path in ctx.host.glob("/sys/class/hailo_chardev/hailo*") + ctx.host.glob("/sys/class/hailo1x/h1x-*"):
        name = posixpath.basename(path)
        try:
            dev_dir = ctx.host.realpath(posixpath.join(path, "device"))
        except HostError:
            dev_dir = None
        rec: Dict[str, Any] = {"vendor": "hailo", "dev": f"/dev/{name}"}
        if dev_dir:
            base = posixpath.basename(dev_dir).lower()
            if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", base):
                rec["pci_address"] = base
                rec["sysfs"] = dev_dir
        ctx.facts.add_accelerator(rec, source=path)
        found = True
    # user-space library
    lib_version = None
    for pat in LIB_GLOBS:
        for p in ctx.host.glob(pat):
            v = P.library_version_from_name(p)
            if v:
                lib_version = v
                ctx.facts.set("sdks.hailort", {"version": v, "path": p}, p)
                found = True
                break
        if lib_version:
            break
    pkgs = installed_packages(ctx)
    for name in _DPKG_HAILORT:
        if name in pkgs and not lib_version:
            v = _upstream(pkgs[name])
            if v:
                lib_version = v
                ctx.facts.set("sdks.hailort", {"version": v, "package": name}, "$ dpkg-query -W")
                found = True
    for name in _DPKG_TAPPAS:
        if name in pkgs:
            v = _upstream(pkgs[name])
            if v:
                ctx.facts.set("sdks.tappas", {"version": v, "package": name}, "$ dpkg-query -W")
                found = True
                break
    for pat in TAPPAS_PC_GLOBS:
        for p in ctx.host.glob(pat):
            text = ctx.read(p) or ""
            m = re.search(r"^Version:\s*(\S+)", text, re.M)
            if m:
                ctx.facts.set("sdks.tappas.version", m.group(1), p)
                found = True
    # the tool: library version, then the device itself
    try:
        cv = ctx.run(CLI_VERSION)
        v = P.parse_cli_version(cv.stdout + cv.stderr)
        if v:
            ctx.facts.set("sdks.hailort.cli_version", v, cv.source)
            if not lib_version:
                ctx.facts.set("sdks.hailort.version", v, cv.source)
                lib_version = v
            found = True
    except (CommandNotFound, HostError):
        pass
    try:
        res = ctx.run(IDENTIFY)
    except CommandNotFound:
        res = None
    if res is not None:
        found = True
        _identify(ctx, res)
    if not found:
        raise NoData("no Hailo driver, library or hailortcli")


def _identify(ctx: ProbeContext, res) -> None:
    src = res.source
    text = (res.stdout or "") + "\n" + (res.stderr or "")
    err = P.parse_runtime_error(text)
    ident: Optional[Dict[str, Any]] = None
    if res.ok:
        try:
            ident = P.parse_identify(res.stdout)
        except ValueError:
            ident = None
    if ident is not None:
        ctx.facts.set("hailo.identify", {"status": "ok", "returncode": res.returncode}, src)
        rec: Dict[str, Any] = {"vendor": "hailo", "index": 0,
                               "name": ident.get("architecture") or ident.get("board_name"),
                               "architecture": ident.get("architecture"),
                               "board_name": ident.get("board_name"),
                               "product_name": ident.get("product_name"),
                               "part_number": ident.get("part_number"),
                               "pci_address": ident.get("pci_address"),
                               "control_protocol_version": ident.get("control_protocol_version")}
        if ident.get("firmware_version"):
            rec["firmware"] = {"version": ident["firmware_version"]}
            if ident.get("firmware_flags"):
                rec["firmware"]["flags"] = ident["firmware_flags"]
        if not rec.get("pci_address"):
            rec.pop("pci_address", None)
        ctx.facts.add_accelerator({k: v for k, v in rec.items() if v is not None}, source=src)
        return
    if res.ok and not err:
        raise ProbeError("hailortcli fw-control identify exited 0 but printed nothing npu-doctor can read")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    error = next((ln for ln in lines if "[error]" in ln), lines[-1] if lines else
                 f"exit status {res.returncode}")
    status = "failed"
    if err.get("driver_version") or res.returncode == P.HAILO_INVALID_DRIVER_VERSION:
        status = "driver-mismatch"
    ident_facts = {"status": status, "returncode": res.returncode, "error": error[:300],
                   "status_name": err.get("status_name"), "status_code": err.get("status_code")}
    if res.timed_out:
        ident_facts.update(status="timeout", error="hailortcli fw-control identify timed out")
    elif status == "failed" and not err.get("status_name") and says_only_timed_out(text):
        ident_facts.update(status="timeout")  # it says it timed out: not an init failure
    ctx.facts.set("hailo.identify", {k: v for k, v in ident_facts.items() if v is not None}, src)
    if err.get("driver_version"):
        # HailoRT read the version from the driver of an opened device: a device and its
        # driver are there, only the library refuses it
        drv = err["driver_version"]
        mod = "hailo1x_pci" if P.family_of(drv) == "hailo1x" else "hailo_pci"
        ctx.facts.set(f"drivers.{mod}", {"version": drv, "loaded": True, "source": src}, src)
        ctx.facts.set("sdks.hailort.version", err["library_version"], src)
        ctx.facts.add_accelerator({"vendor": "hailo", "index": 0,
                                   "driver": {"name": mod, "version": drv}}, source=src)


# -- derived verdicts ------------------------------------------------------------------------
def _events(facts: Facts, signature: str) -> List[Dict[str, Any]]:
    return [e for e in facts.get("log_events", []) or [] if e.get("signature") == signature]


@deriver(after=("derive_catalog_facts",))
def derive_hailo(facts: Facts, host) -> None:
    """compat.hailo-runtime-driver (HailoRT's exact driver == library rule),
    compat.hailo-fw-drv (firmware major.minor vs driver/library), compat.hailo-family
    (a 4.x hailo_pci stack on a Hailo-10/15 or the reverse), and sdks.tappas from logs."""
    if facts.get("sdks.tappas.version") is None:
        for e in _events(facts, "hailo-tappas-version"):
            if e.get("version"):
                facts.set("sdks.tappas.version", e["version"], f"{e['source']}:{e['line_no']}")
                break
    if not any(a.get("vendor") == "hailo" for a in facts.get("accelerators", []) or []):
        # HailoRT only compares a HEF with the architecture of a device it has opened
        for e in _events(facts, "catalog:hailo-driver/hef-arch-mismatch"):
            facts.add_accelerator({"vendor": "hailo", "index": 0, "name": e.get("device_arch"),
                                   "architecture": e.get("device_arch")},
                                  source=f"{e['source']}:{e['line_no']}")
            break
    if not facts.get("drivers.hailo_pci.version") and not facts.get("drivers.hailo1x_pci.version"):
        # `hailo: Init module. driver version 4.23.0` in the kernel log (module not in sysfs view)
        for e in _events(facts, "hailo-driver-init"):
            mod = "hailo1x_pci" if "hailo1x:" in e["line"] or P.family_of(e.get("version")) == "hailo1x" \
                else "hailo_pci"
            facts.set(f"drivers.{mod}", {"version": e["version"], "loaded": True,
                                         "source": f"{e['source']}:{e['line_no']}"},
                      f"{e['source']}:{e['line_no']}")
    if not facts.get("drivers.hailo_pci.version") and not facts.get("drivers.hailo1x_pci.version"):
        # HailoRT names the loaded driver's version when it refuses it (log or app output only)
        for e in _events(facts, "catalog:hailo-driver/driver-library-mismatch"):
            if e.get("driver"):
                mod = "hailo1x_pci" if P.family_of(e["driver"]) == "hailo1x" else "hailo_pci"
                facts.set(f"drivers.{mod}", {"version": e["driver"],
                                             "source": f"{e['source']}:{e['line_no']}"},
                          f"{e['source']}:{e['line_no']}")
                break
    drv_key = "hailo_pci" if facts.get("drivers.hailo_pci.version") else "hailo1x_pci"
    drv = facts.get(f"drivers.{drv_key}.version")
    lib = facts.get("sdks.hailort.version")
    drv_src = facts.source_of(f"drivers.{drv_key}.version")
    for a in facts.get("accelerators", []) or []:
        if a.get("vendor") == "hailo" and drv and not (a.get("driver") or {}).get("version"):
            i = facts.data["accelerators"].index(a)
            facts.set(f"accelerators[{i}].driver", {"name": drv_key, "version": drv}, drv_src)
    if drv and lib:
        same = drv == lib
        entry = {"status": "ok" if same else "mismatch", "matrix": "hailort-exact-match",
                 "subject": "HailoRT", "driver_version": drv, "library_version": lib,
                 "driver_module": drv_key}
        if not same:
            entry["detail"] = (f"the {drv_key} kernel driver is {drv} but the HailoRT library is "
                               f"{lib}; HailoRT requires the exact same version (status "
                               "HAILO_INVALID_DRIVER_VERSION, 76)")
        facts.set("compat.hailo-runtime-driver", entry, drv_src)
    # firmware vs driver / library (major.minor must match; revision is ignored)
    for a in facts.get("accelerators", []) or []:
        if a.get("vendor") != "hailo":
            continue
        fw = (a.get("firmware") or {}).get("version")
        for what, other in (("driver", drv), ("library", lib)):
            if fw and other and P.same_minor(fw, other) is False:
                facts.set("compat.hailo-fw-drv", {
                    "status": "mismatch", "matrix": "hailort-firmware", "subject": a.get("name") or "Hailo",
                    "firmware_version": fw, "other_version": other, "what": what,
                    "detail": f"device firmware {fw} vs HailoRT {what} {other}: major.minor differ, so "
                              "HailoRT disables firmware control operations (\"Unsupported firmware "
                              "operation\")"}, None)
                break
        fam_dev = P.arch_family(a.get("architecture"))
        fam_sw = P.family_of(drv or lib)
        if fam_dev and fam_sw and fam_dev != fam_sw:
            facts.set("compat.hailo-family", {
                "status": "mismatch", "matrix": "hailo-family", "subject": a.get("name") or "Hailo",
                "architecture": a.get("architecture"), "software_version": drv or lib,
                "detail": f"a {a.get('architecture')} needs the {fam_dev} stack "
                          f"({'HailoRT 4.x, hailo_pci' if fam_dev == 'hailo8' else 'HailoRT 5.x, hailo1x_pci'}),"
                          f" but {drv or lib} is installed"}, None)
