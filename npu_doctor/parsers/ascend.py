"""Huawei Ascend formats: `npu-smi info`, `npu-smi info -t board -i N`, the driver and firmware
`version.info` files, CANN `ascend_toolkit_install.info`, and the compatibility range lists
they carry.

Sources (real outputs the tests replay, see tests/data/ascend/SOURCE):
- `npu-smi info` tables: vllm-project/vllm-ascend issues #4621 (910B2C, 25.0.rc1.1, one chip per
  NPU), #2035 / #2534 (Ascend910 A3, 24.1.rc3.7, two chips per NPU with a `Phy-ID` column),
  #12980 (26.0.rc2, the wide layout), ollama/ollama #5315 (310P3, `Device` column, no HBM),
  1Panel-dev/1Panel #9472 (910B4, `26838/ 32768` with no space before the slash).
- `-t board`, driver/firmware version.info, CANN 8.5 layout: Ascend/mind-cluster
  docs/zh/faultdiag/user_guide.md.
- DCMI failures: vllm-project/vllm-ascend #632 (`ret is -8020`).
- Range lists: docs/matrices.md (`[7.0.0,7.5.99]`, `[24.1,24.1.]`).

All functions are pure (text in, dict out). A table that cannot be read raises ValueError.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .. import versions
from ..lazyregex import lazy
from ..registry import parser

_VERSION_LINE = lazy(r"npu-smi\s+(?P<tool>\S+)\s+Version:\s*(?P<drv>\S+)", re.I)
_DCMI_RET = lazy(r"ret(?:\s+is|\s*code)?\s*[:=]?\s*(?P<code>-\d{4,5})", re.I)
# glibc's loader when npu-smi's driver libraries (libc_sec.so, libdrvdsmi_host.so, libdcmi.so in
# /usr/local/Ascend/driver/lib64 and /usr/local/dcmi) are not there: Project-HAMi/HAMi#615
_LOADER_FAIL = lazy(r"error while loading shared libraries: (?P<library>[\w.+-]+\.so[\w.]*): "
                    r"(?P<error>cannot open shared object file[^\n]*|wrong ELF class: \w+|"
                    r"file too short|invalid ELF header)")
_BUS_ID = lazy(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")

#: DCMI return codes seen in npu-smi / device-plugin failures, and what they mean for us.
#: kind: busy -> device-busy; init -> runtime-init-failed.
DCMI_CODES: Dict[str, Dict[str, str]] = {
    "-8020": {"kind": "busy", "meaning": "the device is already used by another process or container"},
    "-8005": {"kind": "init", "meaning": "DCMI inner error: the device is not usable from here "
                                         "(not mounted into the container, driver not loaded, or no access)"},
    "-8007": {"kind": "init", "meaning": "invalid device id"},
    "-8008": {"kind": "init", "meaning": "the device does not exist"},
    "-8012": {"kind": "init", "meaning": "the device is not ready"},
    "-8010": {"kind": "init", "meaning": "sending a message to the device failed"},
}


def _num(tok: Optional[str]) -> Optional[float]:
    if tok is None:
        return None
    tok = tok.strip()
    if tok in ("", "-", "NA", "N/A", "--"):
        return None
    try:
        v = float(tok)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in tok else v


def _cells(line: str) -> List[str]:
    s = line.strip()
    if not s.startswith("|"):
        return []
    return [c.strip() for c in s.strip("|").split("|")]


def _tokens(cell: str) -> List[str]:
    """Split a value cell into tokens, keeping `used / total` pairs as one `used/total` token."""
    cell = re.sub(r"\s*/\s*", "/", cell.strip())
    return cell.split()


def _pair(tok: Optional[str]) -> Tuple[Optional[float], Optional[float]]:
    if tok is None or "/" not in tok:
        return _num(tok), None
    a, _, b = tok.partition("/")
    return _num(a), _num(b)


_HDR_KEYS = {
    "power(w)": "power_w", "temp(c)": "temperature_c", "hugepages-usage(page)": "hugepages",
    "aicore(%)": "aicore_percent", "memory-usage(mb)": "memory_mb", "hbm-usage(mb)": "hbm_mb",
}


@parser("npu_smi_info")
def parse_npu_smi_info(text: str) -> Dict[str, Any]:
    """The device table of `npu-smi info`.

    Returns {"tool_version": "25.0.rc1.1", "driver_version": "25.0.rc1.1",
    "chips": [{"npu_id": 0, "name": "910B2C", "health": "OK", "power_w": 88.3,
    "temperature_c": 34, "chip_id": 0, "phy_id": 1 (A3/910 two-chip layout) or
    "device_id": 1 (310P layout), "bus_id": "0000:5A:00.0", "aicore_percent": 0,
    "memory_used_mb", "memory_total_mb", "hbm_used_mb", "hbm_total_mb",
    "hugepages_used", "hugepages_total"}], "processes": [{npu_id, chip_id, pid, name,
    memory_mb}]}. Power printed as `-`/`NA` (the second chip of a card) is absent.

    Handles the one-chip (910B: `Chip | Bus-Id`), two-chip (910/A3: `Chip Phy-ID`), 310P
    (`Chip Device`, no HBM column) and wide (26.x) layouts; columns are located by header name.
    Raises ValueError when there is no device table (e.g. a DCMI failure).
    """
    out: Dict[str, Any] = {"chips": [], "processes": []}
    m = _VERSION_LINE.search(text)
    if m:
        out["tool_version"], out["driver_version"] = m.group("tool"), m.group("drv")
    head1: List[str] = []
    head2: List[str] = []
    col1_second = ""
    pending: Optional[Dict[str, Any]] = None
    in_proc = False
    for line in text.splitlines():
        cells = _cells(line)
        if not cells:
            continue
        first = cells[0]
        if re.match(r"^NPU\s+Name\b", first):
            head1 = [h.lower() for h in cells[2].split()] if len(cells) > 2 else []
            in_proc = False
            continue
        if re.match(r"^Chip\b", first) and len(cells) > 2 and "bus-id" in cells[1].lower():
            head2 = [h.lower() for h in cells[2].split()]
            col1_second = first.split()[1].lower() if len(first.split()) > 1 else ""
            continue
        if len(cells) >= 3 and "process id" in cells[1].lower():
            in_proc = True
            continue
        if in_proc:
            if len(cells) >= 4:
                ids = cells[0].split()
                row = {"npu_id": _num(ids[0]) if ids else None,
                       "chip_id": _num(ids[1]) if len(ids) > 1 else None,
                       "pid": _num(cells[1]), "name": cells[2],
                       "memory_mb": _num(cells[3]) if len(cells) > 3 else None}
                if row["pid"] is not None:
                    out["processes"].append({k: v for k, v in row.items() if v is not None})
            continue
        if len(cells) < 3 or not head1:
            continue
        ids = first.split()
        if pending is None:
            # first row of a chip: "NPU Name | Health | Power Temp Hugepages"
            if not ids or not ids[0].isdigit() or len(ids) < 2:
                continue
            pending = {"npu_id": int(ids[0]), "name": " ".join(ids[1:]), "health": cells[1]}
            for key, tok in zip(head1, _tokens(cells[2])):
                name = _HDR_KEYS.get(key)
                if name == "hugepages":
                    pending["hugepages_used"], pending["hugepages_total"] = _pair(tok)
                elif name:
                    pending[name] = _num(tok)
            continue
        # second row: "Chip [Phy-ID|Device] | Bus-Id | AICore Memory HBM"
        if not ids or not ids[0].isdigit() or not _BUS_ID.match(cells[1]):
            pending = None
            continue
        chip = pending
        pending = None
        chip["chip_id"] = int(ids[0])
        if len(ids) > 1 and ids[1].isdigit():
            chip["device_id" if col1_second == "device" else "phy_id"] = int(ids[1])
        chip["bus_id"] = cells[1]
        for key, tok in zip(head2, _tokens(cells[2])):
            name = _HDR_KEYS.get(key)
            if name == "aicore_percent":
                chip[name] = _num(tok)
            elif name in ("memory_mb", "hbm_mb"):
                base = name[:-3]
                chip[f"{base}_used_mb"], chip[f"{base}_total_mb"] = _pair(tok)
        out["chips"].append({k: v for k, v in chip.items() if v is not None})
    if not out["chips"]:
        raise ValueError("no npu-smi device table found")
    return out


def parse_npu_smi_failure(text: str) -> Optional[Dict[str, Any]]:
    """A DCMI failure printed by npu-smi instead of its table, or None.

    `dcmi model initialized failed, because the device is used. ret is -8020` ->
    {"code": "-8020", "kind": "busy", "meaning": ..., "line": ...}. kind is `busy` (device held
    elsewhere) or `init` (DCMI could not initialise). When this is returned the NPU count is
    unknown, not 0.
    """
    for line in text.splitlines():
        low = line.lower()
        if "dcmi" not in low and "ret is" not in low:
            continue
        m = _DCMI_RET.search(line)
        if not m and "dcmi" not in low:
            continue
        code = m.group("code") if m else None
        info = DCMI_CODES.get(code or "", {})
        kind = info.get("kind")
        if "device is used" in low or "in use" in low or "occupied" in low:
            kind = "busy"
        if kind is None:
            kind = "init"
        res = {"code": code, "kind": kind, "line": line.strip(),
               "meaning": info.get("meaning") or ("the device is used by another process or container"
                                                  if kind == "busy" else "DCMI initialisation failed")}
        return {k: v for k, v in res.items() if v is not None}
    return None


def parse_loader_failure(text: str) -> Optional[Dict[str, str]]:
    """The dynamic loader's refusal to start npu-smi, or None.

    `npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file:
    No such file or directory` -> {"library": "libc_sec.so", "error": "cannot open shared object
    file: No such file or directory", "line": ...}. npu-smi never ran, so nothing is known of DCMI
    or the device: the driver's user-space libraries are not on the loader path (a container or
    pod given the binary without /usr/local/Ascend/driver/lib64 and /usr/local/dcmi).
    """
    for line in text.splitlines():
        m = _LOADER_FAIL.search(line)
        if m:
            return {"library": m.group("library"), "error": m.group("error").strip(),
                    "line": line.strip()}
    return None


@parser("npu_smi_board")
def parse_key_value_colon(text: str) -> Dict[str, str]:
    """`Key   : Value` lines (npu-smi info -t board / -t health / -t common) -> {key: value}.

    Keys are kept as printed (`Software Version`, `Firmware Version`, `Compatibility`,
    `PCIe Bus Info`, `Chip Count`, `Health Status`). Raises ValueError when no line matches.
    """
    out: Dict[str, str] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if not key or not re.match(r"^[A-Za-z][\w ()%/.-]*$", key):
            continue
        out.setdefault(key, value.strip())
    if not out:
        raise ValueError("no `Key : Value` lines")
    return out


def parse_board(text: str) -> Dict[str, Any]:
    """`npu-smi info -t board -i N` -> {npu_id, software_version, firmware_version,
    compatibility ("OK"/"NOK"/"UNKNOWN"), bus_id, chip_count, pci_device_id}."""
    kv = parse_key_value_colon(text)
    keys = {"NPU ID": "npu_id", "Software Version": "software_version",
            "Firmware Version": "firmware_version", "Compatibility": "compatibility",
            "PCIe Bus Info": "bus_id", "Chip Count": "chip_count", "PCI Device ID": "pci_device_id",
            "Board ID": "board_id"}
    out: Dict[str, Any] = {}
    for k, name in keys.items():
        v = kv.get(k)
        if v is None or v in ("NA", "N/A", ""):
            continue
        out[name] = _num(v) if name in ("npu_id", "chip_count") else v
    if not out:
        raise ValueError("not an npu-smi board listing")
    return out


def parse_common(text: str) -> Dict[str, Any]:
    """`npu-smi info -t common -i N` (one-chip NPUs) -> {npu_id, chip_count, temperature_c,
    power_w, aicore_percent, hbm_percent, rated_mhz (`Aicore Freq(MHZ)`), cur_mhz
    (`Aicore curFreq(MHZ)`)}. Source: Ascend/mind-cluster docs/zh/faultdiag/user_guide.md.
    Raises ValueError when no field is found."""
    kv = parse_key_value_colon(text)
    keys = {"NPU ID": "npu_id", "Chip Count": "chip_count", "Temperature(C)": "temperature_c",
            "NPU Real-time Power(W)": "power_w", "Aicore Usage Rate(%)": "aicore_percent",
            "HBM Usage Rate(%)": "hbm_percent", "Aicore Freq(MHZ)": "rated_mhz",
            "Aicore curFreq(MHZ)": "cur_mhz"}
    out = {name: _num(kv[k]) for k, name in keys.items() if k in kv and _num(kv[k]) is not None}
    if not out:
        raise ValueError("not an npu-smi common listing")
    return out


@parser("ascend_info_file")
def parse_info_file(text: str) -> Dict[str, str]:
    """`key=value` files: driver/firmware `version.info`, `ascend_toolkit_install.info`,
    `/etc/ascend_install.info`. Keys are lower-cased (`Version` -> `version`,
    `Innerversion` -> `innerversion`). Raises ValueError when no key=value line is found."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        out[k.strip().lower()] = v.strip().strip('"')
    if not out:
        raise ValueError("no key=value lines")
    return out


# -- compatibility range lists -------------------------------------------------------------
def parse_range_list(text: str) -> List[Tuple[str, Optional[str]]]:
    """`[7.0.0,7.5.99],[24.1,24.1.],[V100R001C15]` -> [(lo, hi), ...]; a singleton has hi None.

    Raises ValueError on text that is not a bracket list.
    """
    groups = re.findall(r"\[([^\]]*)\]", text or "")
    if not groups:
        raise ValueError(f"not a range list: {text!r}")
    out: List[Tuple[str, Optional[str]]] = []
    for g in groups:
        parts = [p.strip() for p in g.split(",")]
        if len(parts) == 1:
            out.append((parts[0], None))
        elif len(parts) == 2:
            out.append((parts[0], parts[1]))
        else:
            raise ValueError(f"bad range [{g}]")
    return out


_VRC = lazy(r"^(V\d+R\d+C\d+)", re.I)


def in_range_list(version: str, ranges: List[Tuple[str, Optional[str]]]) -> Optional[bool]:
    """Whether a version is inside one of the ranges, or None when it cannot be decided.

    - `[lo,hi]` numeric: lo <= version <= hi through npu_doctor.versions.
    - `[24.1,24.1.]`: an upper bound with a trailing dot means "any 24.1.*" (prefix match).
    - `[V100R001C15]` / `[V100R001C13,V100R001C19]`: Huawei VRC family codes, compared on the
      `C` number of the version's own `V...R...C..` family.
    """
    decided = False
    vrc = _VRC.match(version or "")
    for lo, hi in ranges:
        if _VRC.match(lo):
            if not vrc:
                continue
            decided = True
            fam = vrc.group(1).upper()
            if hi is None:
                if fam == _VRC.match(lo).group(1).upper():  # type: ignore[union-attr]
                    return True
                continue
            m_hi = _VRC.match(hi)
            if not m_hi:
                continue
            c = int(re.search(r"C(\d+)$", fam).group(1))  # type: ignore[union-attr]
            c_lo = int(re.search(r"C(\d+)", lo.upper()).group(1))  # type: ignore[union-attr]
            c_hi = int(re.search(r"C(\d+)", hi.upper()).group(1))  # type: ignore[union-attr]
            if fam[: fam.rfind("C")] == lo.upper()[: lo.upper().rfind("C")] and c_lo <= c <= c_hi:
                return True
            continue
        if vrc:
            continue
        if hi is None:
            c = versions.compare(version, lo)
            if c is None:
                continue
            decided = True
            if c == 0 or versions.prefix_match(version, lo):
                return True
            continue
        if hi.endswith("."):
            decided = True
            if versions.prefix_match(version, hi.rstrip(".")):
                return True
            if versions.compare(version, lo) == 0:
                return True
            continue
        c_lo, c_hi = versions.compare(version, lo), versions.compare(version, hi)
        if c_lo is None or c_hi is None:
            continue
        decided = True
        if c_lo >= 0 and c_hi <= 0:
            return True
    return False if decided else None


def vrc_family(innerversion: Optional[str]) -> Optional[str]:
    """`V100R001C21SPC002B220` -> `V100R001C21` (the family CANN lists), or None."""
    m = _VRC.match(innerversion or "")
    return m.group(1).upper() if m else None


# -- debug-log environment -----------------------------------------------------------------
def log_env_problems(env: Dict[str, str]) -> List[Dict[str, str]]:
    """Pitfalls of the Ascend debug-log environment (the seed write-ups: the log level alone
    prints nothing to the console).

    Returns [{"problem": "level-without-stdout", "detail": ...}] when ASCEND_GLOBAL_LOG_LEVEL
    is set to DEBUG/INFO (0/1) while ASCEND_SLOG_PRINT_TO_STDOUT is unset or 0: the operator
    placement lines then go only to $ASCEND_PROCESS_LOG_PATH (default ~/ascend/log/) and a
    search of the console output for AICPU/fallback finds nothing.
    """
    out: List[Dict[str, str]] = []
    level = (env.get("ASCEND_GLOBAL_LOG_LEVEL") or "").strip()
    to_stdout = (env.get("ASCEND_SLOG_PRINT_TO_STDOUT") or "").strip()
    if level in ("0", "1") and to_stdout != "1":
        out.append({"problem": "level-without-stdout",
                    "detail": f"ASCEND_GLOBAL_LOG_LEVEL={level} but ASCEND_SLOG_PRINT_TO_STDOUT="
                              f"{to_stdout or '(unset)'}: the debug lines go to the log directory, "
                              "not to the console"})
    return out
