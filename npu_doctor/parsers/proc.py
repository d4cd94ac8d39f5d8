"""Pure parsers for procfs/sysfs text and the core system commands.

Each function takes the text (or bytes) of one file or command and returns plain values; none
touches the machine. Formats and sources:

- `/proc/loadavg`, `/proc/stat`, `/proc/self/limits`, `/proc/modules`, `/proc/cpuinfo`:
  proc(5), https://man7.org/linux/man-pages/man5/proc.5.html
- CPU lists (`/sys/devices/system/cpu/online`): "0-3,5,7-8",
  https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-devices-system-cpu
- `ldd --version`: glibc prints `ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35` or
  `ldd (GNU libc) 2.25`; musl's ldd prints `musl libc (x86_64)` / `Version 1.1.15` on stderr
  and exits 1 (https://github.com/sgerrand/alpine-pkg-glibc/issues/46,
  https://github.com/scoutapp/scout_apm_elixir/issues/99).
- libc.so.6 banner: `GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version
  2.36.`; glibc <= 2.2x: `... stable release version 2.17, by Roland McGrath et al.`
- `uname -a` (coreutils, busybox): uname(1), https://man7.org/linux/man-pages/man1/uname.1.html
- ELF header: e_ident and e_machine, https://refspecs.linuxfoundation.org/elf/gabi4+/ch4.eheader.html
"""

from __future__ import annotations

import re
import struct
from typing import Any, Dict, List, Optional, Tuple

from ..lazyregex import lazy
from ..linker.arch import E_MACHINE_NAMES, arch_of
from ..registry import parser


# -- /proc/loadavg ------------------------------------------------------------------------
@parser("loadavg")
def parse_loadavg(text: str) -> Dict[str, Any]:
    """`0.42 0.51 0.48 2/310 4242` -> {"loadavg": [0.42, 0.51, 0.48], "running": 2,
    "tasks": 310}. Raises ValueError on anything else."""
    parts = text.split()
    if len(parts) < 3:
        raise ValueError(f"expected three load averages, got {text.strip()[:60]!r}")
    try:
        loads = [float(p) for p in parts[:3]]
    except ValueError:
        raise ValueError(f"load averages are not numbers: {text.strip()[:60]!r}") from None
    if any(x < 0 or x != x for x in loads):
        raise ValueError(f"negative or NaN load average: {text.strip()[:60]!r}")
    out: Dict[str, Any] = {"loadavg": loads}
    if len(parts) >= 4 and "/" in parts[3]:
        run, _, total = parts[3].partition("/")
        if run.isdigit() and total.isdigit():
            out["running"], out["tasks"] = int(run), int(total)
    return out


# -- CPU lists ----------------------------------------------------------------------------
def parse_cpu_list(text: str) -> List[int]:
    """`0-3,5,7-8` -> [0, 1, 2, 3, 5, 7, 8]. Empty text -> []. Raises ValueError."""
    cpus: List[int] = []
    text = text.strip()
    if not text:
        return cpus
    for item in text.split(","):
        item = item.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not m:
            raise ValueError(f"bad CPU list item {item!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"bad CPU range {item!r}")
        cpus.extend(range(lo, hi + 1))
    return cpus


# -- /proc/cpuinfo ------------------------------------------------------------------------
#: ARM Ltd (implementer 0x41) and NVIDIA (0x4e) core part numbers, from the Arm Technical
#: Reference Manuals' MIDR_EL1 tables (also Linux arch/arm64/include/asm/cputype.h).
ARM_PARTS = {
    (0x41, 0xb76): "ARM1176", (0x41, 0xc07): "Cortex-A7", (0x41, 0xc08): "Cortex-A8",
    (0x41, 0xc09): "Cortex-A9", (0x41, 0xc0f): "Cortex-A15", (0x41, 0xd03): "Cortex-A53",
    (0x41, 0xd04): "Cortex-A35", (0x41, 0xd05): "Cortex-A55", (0x41, 0xd07): "Cortex-A57",
    (0x41, 0xd08): "Cortex-A72", (0x41, 0xd09): "Cortex-A73", (0x41, 0xd0a): "Cortex-A75",
    (0x41, 0xd0b): "Cortex-A76", (0x41, 0xd0c): "Neoverse-N1", (0x41, 0xd0d): "Cortex-A77",
    (0x41, 0xd40): "Neoverse-V1", (0x41, 0xd41): "Cortex-A78", (0x41, 0xd42): "Cortex-A78AE",
    (0x41, 0xd44): "Cortex-X1", (0x41, 0xd46): "Cortex-A510", (0x41, 0xd47): "Cortex-A710",
    (0x41, 0xd48): "Cortex-X2", (0x41, 0xd49): "Neoverse-N2", (0x41, 0xd4f): "Neoverse-V2",
    (0x41, 0xd80): "Cortex-A520", (0x41, 0xd81): "Cortex-A720", (0x41, 0xd82): "Cortex-X4",
    (0x41, 0xd87): "Cortex-A725", (0x4e, 0x004): "NVIDIA Carmel",
}


def _int0(s: str) -> Optional[int]:
    try:
        return int(s, 0)
    except (TypeError, ValueError):
        return None


@parser("cpuinfo")
def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """Summary of /proc/cpuinfo (x86 and ARM layouts).

    Returns {"count": processors listed, "model": ..., "hardware": ..., "board": ...}; keys
    that the file does not give are absent. The model is, in order: x86 `model name`; on ARM
    the cores named from `CPU implementer`/`CPU part` ("4x Cortex-A55 + 4x Cortex-A76"),
    else `model name`/`Processor`; else the `Hardware` line. Raises ValueError when no
    `processor` entry is found.
    """
    blocks: List[Dict[str, str]] = []
    extra: Dict[str, str] = {}
    cur: Dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor" and cur.get("processor") is not None:
            blocks.append(cur)
            cur = {}
        cur[key] = value
    if cur:
        blocks.append(cur)
    cpus = [b for b in blocks if "processor" in b and b["processor"].isdigit()]
    for b in blocks:
        if b not in cpus:
            extra.update(b)
    # old ARM kernels put "Processor : AArch64 Processor rev 12 (aarch64)" before the CPUs
    for b in cpus:
        for k in ("Hardware", "Revision", "Serial", "Model"):
            if k in b:
                extra.setdefault(k, b[k])
    if not cpus:
        raise ValueError("no `processor : N` entries")
    out: Dict[str, Any] = {"count": len(cpus)}
    model = None
    first = cpus[0]
    if "model name" in first and "CPU implementer" not in first:
        model = first["model name"]
    else:
        counts: Dict[str, int] = {}
        order: List[str] = []
        known = True
        for b in cpus:
            impl, part = _int0(b.get("CPU implementer", "")), _int0(b.get("CPU part", ""))
            name = ARM_PARTS.get((impl, part)) if impl is not None and part is not None else None
            if name is None:
                known = False
                break
            if name not in counts:
                order.append(name)
            counts[name] = counts.get(name, 0) + 1
        if known and order:
            model = " + ".join(f"{counts[n]}x {n}" for n in order)
        else:
            model = first.get("model name") or extra.get("Processor") or first.get("Processor")
    if model is None and extra.get("Hardware"):
        model = extra["Hardware"]
    if model:
        out["model"] = " ".join(model.split())
    if extra.get("Hardware"):
        out["hardware"] = extra["Hardware"]
    if extra.get("Model"):
        out["board"] = extra["Model"]
    return out


# -- /proc/stat ---------------------------------------------------------------------------
def parse_proc_stat_cpu(text: str) -> Tuple[int, int]:
    """(busy jiffies, total jiffies) of the aggregate `cpu` line of /proc/stat.

    Idle is idle + iowait; guest time is already counted in user/nice, so it is not added
    again. Raises ValueError when the `cpu` line is missing or not numeric.
    """
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                vals = [int(v) for v in parts[1:]]
            except ValueError:
                raise ValueError(f"non-numeric /proc/stat cpu line: {line[:80]!r}") from None
            if len(vals) < 4:
                raise ValueError("short /proc/stat cpu line")
            vals = vals[:8]  # user nice system idle iowait irq softirq steal
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            total = sum(vals)
            return total - idle, total
    raise ValueError("no aggregate `cpu` line in /proc/stat")


def cpu_busy_percent(first: str, second: str) -> float:
    """Percent of all CPUs busy between two /proc/stat readings (0-100).

    Raises ValueError when a reading is unparsable or the counters did not advance (same
    reading twice, or the second is older).
    """
    b1, t1 = parse_proc_stat_cpu(first)
    b2, t2 = parse_proc_stat_cpu(second)
    dt = t2 - t1
    if dt <= 0:
        raise ValueError("the second /proc/stat reading is not later than the first")
    return round(max(0.0, min(100.0, (b2 - b1) * 100.0 / dt)), 1)


# -- /proc/self/limits --------------------------------------------------------------------
_LIMIT_RE = lazy(r"^(?P<name>\S.*?)\s{2,}(?P<soft>\S+)\s+(?P<hard>\S+)(?:\s+(?P<units>\S+))?\s*$")


@parser("proc_limits")
def parse_limits(text: str) -> Dict[str, Dict[str, Any]]:
    """/proc/PID/limits -> {"Max locked memory": {"soft": 8388608 | "unlimited",
    "hard": ..., "units": "bytes"}, ...}. Raises ValueError without a `Limit` header."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Limit"):
        raise ValueError("not a /proc/PID/limits table (no `Limit` header)")
    out: Dict[str, Dict[str, Any]] = {}
    for line in lines[1:]:
        m = _LIMIT_RE.match(line)
        if not m:
            continue
        vals: Dict[str, Any] = {}
        for k in ("soft", "hard"):
            v = m.group(k)
            vals[k] = "unlimited" if v == "unlimited" else (int(v) if v.isdigit() else None)
        vals["units"] = m.group("units")
        out[m.group("name").strip()] = vals
    return out


# -- /proc/modules ------------------------------------------------------------------------
@parser("proc_modules")
def parse_modules(text: str) -> List[str]:
    """Names of the loaded modules in /proc/modules (`name size refcount deps state addr`).

    Lines that are not in that shape are skipped; raises ValueError when none is."""
    names = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].isdigit() and re.fullmatch(r"[\w-]+", parts[0]):
            names.append(parts[0])
    if not names and text.strip():
        raise ValueError("no `name size refcount ...` lines")
    return names


# -- libc ---------------------------------------------------------------------------------
_LDD_GLIBC_RE = lazy(r"^ldd \((?P<build>[^)]*)\) (?P<version>\d+\.\d+(?:\.\d+)?)", re.M)
_MUSL_RE = lazy(r"musl libc(?: \((?P<arch>[^)]+)\))?\s*(?:Version (?P<version>[\w.]+))?")
_GLIBC_BANNER_RE = lazy(
    rb"GNU C Library \((?P<build>[^)\n]{0,80})\) (?:stable |development |release )*"
    rb"release version (?P<version>\d+\.\d+(?:\.\d+)?)")


def _build_token(build: str, version: str) -> Optional[str]:
    """`Ubuntu GLIBC 2.35-0ubuntu3.8` -> `2.35-0ubuntu3.8`; `GNU libc` -> None."""
    m = re.search(r"GLIBC\s+(\S+)", build)
    if m and m.group(1) != version:
        return m.group(1)
    return None


@parser("ldd_version")
def parse_ldd_version(text: str) -> Dict[str, str]:
    """`ldd --version` (stdout and stderr together) -> {"name": "glibc"|"musl",
    "version": ..., "build"?: distribution build}. Raises ValueError for other output."""
    m = _LDD_GLIBC_RE.search(text)
    if m:
        out = {"name": "glibc", "version": m.group("version")}
        b = _build_token(m.group("build"), m.group("version"))
        if b:
            out["build"] = b
        return out
    m = _MUSL_RE.search(text)
    if m:
        out = {"name": "musl"}
        if m.group("version"):
            out["version"] = m.group("version")
        return out
    if "ld-musl-" in text:  # musl's ldd refusing --version still names its loader
        return {"name": "musl"}
    raise ValueError("neither a glibc nor a musl `ldd --version` banner")


def parse_libc_banner(data: bytes) -> Optional[Dict[str, str]]:
    """The glibc version string embedded in libc.so.6 -> {"name": "glibc", "version",
    "build"?}; None when the bytes hold no such string."""
    # the literal the pattern starts with, found by bytes.find (memchr) first: the regex engine
    # alone walks libc's ~2 MB byte by byte to reach the banner near its end
    start = data.find(b"GNU C Library (")
    m = _GLIBC_BANNER_RE.search(data, start) if start >= 0 else None
    if not m:
        return None
    version = m.group("version").decode("ascii")
    out = {"name": "glibc", "version": version}
    b = _build_token(m.group("build").decode("ascii", "replace"), version)
    if b:
        out["build"] = b
    return out


def parse_confstr_libc(value: Optional[str]) -> Optional[Dict[str, str]]:
    """os.confstr("CS_GNU_LIBC_VERSION") (`glibc 2.36`) -> {"name", "version"} or None."""
    if not value:
        return None
    m = re.fullmatch(r"\s*(\w+)\s+(\d+\.\d+(?:\.\d+)?)\s*", value)
    if not m:
        return None
    return {"name": m.group(1).lower(), "version": m.group(2)}


# -- uname -a ------------------------------------------------------------------------------
# `uname -a` (coreutils, busybox): kernel-name nodename kernel-release kernel-version(with spaces)
# machine [processor] [hardware-platform] operating-system; the unknown fields are left out.
_OS_NAMES = ("GNU/Linux", "Linux", "Android", "Toybox")
_MACHINES = ("x86_64", "aarch64", "arm64", "armv7l", "armv6l", "armv8l", "i686", "i386",
             "riscv64", "ppc64le", "s390x", "loongarch64", "mips64")


def parse_uname_a(line: str) -> Dict[str, str]:
    """{release, machine?} from a `uname -a` line; {} when it is not one."""
    parts = line.split()
    if len(parts) < 4 or parts[0] != "Linux":
        return {}
    out = {"release": parts[2]}
    tail = parts[3:]
    if tail and tail[-1] in _OS_NAMES:
        tail = tail[:-1]
    for tok in reversed(tail):
        if tok in _MACHINES:
            out["machine"] = tok
            break
    return out


# -- ELF header -> architecture -----------------------------------------------------------
def elf_arch(header: bytes) -> Optional[str]:
    """`uname -m`-style machine of an ELF file from its first 20 bytes, or None.

    PowerPC distinguishes ppc64/ppc64le by byte order. Returns None for a non-ELF file or an
    unknown machine.
    """
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    ei_class, ei_data = header[4], header[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        return None
    machine = struct.unpack("<H" if ei_data == 1 else ">H", header[18:20])[0]
    name = E_MACHINE_NAMES.get(machine)
    return arch_of(name, 32 if ei_class == 1 else 64, ei_data == 1) if name else None
