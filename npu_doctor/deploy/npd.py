"""Kubernetes Node Problem Detector (NPD): `check --format npd` and the NPD configs.

Custom-plugin protocol (kubernetes/node-problem-detector docs/custom_plugin_monitor.md,
pkg/custompluginmonitor/plugin/plugin.go): exit 0 OK, 1 problem (NonOK), anything else
Unknown; stdout trimmed and cut to `max_output_length` bytes (default 80) is the condition
message. `status()` gives the exit code and one line of at most 80 bytes naming the worst
finding.

`python -m npu_doctor.deploy.npd [--check] [OUTDIR]` writes (or, with --check, compares)
  npu-doctor-plugin-monitor.json   a custom plugin monitor: one permanent condition per area
  npu-doctor-kernel-monitor.json   a system-log monitor (kmsg) whose rules are the kernel-log
                                   signatures of probes/*.toml (scope = "kernel") and the
                                   pattern entries of the vendor catalogs (catalogs/*.toml)
NPD matches a rule's pattern against the message with `pattern + "\\z"` (Go RE2,
pkg/systemlogmonitor/logwatchers/.../log_buffer.go), so patterns get a trailing `.*`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

MAX_OUTPUT = 80
EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN = 0, 1, 2
#: Findings that say a check could not be made, not that something is wrong.
UNKNOWN_IDS = {"probe-failed", "insufficient-privileges", "sensor-unavailable"}

#: (condition type, area, rule ids). One NPD condition per area.
AREAS: List[Tuple[str, str, Tuple[str, ...]]] = [
    ("NPUDriverProblem", "driver and device access",
     ("driver-not-loaded", "driver-probe-failed", "kernel-driver-incompatible", "runtime-init-failed",
      "device-node-permission", "device-busy", "device-unresponsive", "device-unhealthy", "memlock-limit-low")),
    ("NPUVersionProblem", "firmware, driver, runtime and library versions",
     ("firmware-missing", "firmware-driver-mismatch", "runtime-driver-mismatch", "toolkit-runtime-mismatch",
      "missing-shared-library", "symbol-version-unsatisfied", "framework-backend-mismatch")),
    ("NPUThermalProblem", "temperature and throttling",
     ("thermal-throttling", "thermal-headroom-low", "sensor-unavailable", "sensor-reading-invalid")),
    ("NPUPowerProblem", "runtime PM, clocks and PCIe link",
     ("runtime-autosuspend", "governor-not-performance", "pcie-link-degraded", "gpu-persistence-mode-off",
      "power-throttling", "power-transition-failed")),
    ("NPUCPUFallback", "models running on the CPU",
     ("cpu-fallback-logged", "silent-cpu-fallback-suspected", "runtime-log-hidden", "inference-on-cpu",
      "accelerator-counter-idle", "first-inference-slow", "accelerator-slower-than-cpu")),
]
#: Rule ids that are no node condition (inventory, the lockfile, the tool's own limits).
NOT_A_CONDITION = {"no-accelerator-found", "probe-failed", "insufficient-privileges", "lock-drift", "input-truncated",
                   "version-not-in-matrix"}
#: ... and the rules of `npu-doctor model` (about a model file, not the node).
NOT_A_CONDITION_PREFIXES = ("model-",)
#: Kernel-log signatures that announce a version (read as facts), not a problem.
INFORMATIONAL_SIGNATURES = {"hailo-driver-init", "nvidia-module-version-line"}
#: Signatures whose `rule` field is one of these set the permanent kernel condition.
PERMANENT_RULES = {"driver-probe-failed", "kernel-driver-incompatible", "device-unresponsive",
                   "firmware-missing", "firmware-driver-mismatch"}
DEFAULT_COMMAND = "/opt/npu-doctor/bin/npu-doctor"


def _cut(text: str, limit: int = MAX_OUTPUT) -> str:
    """`text` on one line, at most `limit` UTF-8 bytes (NPD cuts bytes), '...' when cut."""
    text = " ".join(text.split())
    if len(text.encode("utf-8")) <= limit:
        return text
    out = text.encode("utf-8")[:limit - 3].decode("utf-8", "ignore").rstrip()
    return out + "..."


def status(findings: Sequence[Any], fail_on: str = "error") -> Tuple[int, str]:
    """(exit code, line) for NPD from a check's findings (objects with id, severity, subject,
    title). `fail_on` is a severity or "never"."""
    from ..rules import SEVERITY_RANK

    threshold = SEVERITY_RANK.get(fail_on, 99)
    over = [f for f in findings if SEVERITY_RANK[f.severity] >= threshold]
    if not over:
        below = len(findings)
        return EXIT_OK, _cut("ok: no problem found" + (f" ({below} below {fail_on})" if below else ""))
    real = [f for f in over if f.id not in UNKNOWN_IDS]
    pick = real or over
    worst = sorted(pick, key=lambda f: -SEVERITY_RANK[f.severity])[0]
    more = len(over) - 1
    tail = f" (+{more} more)" if more else ""
    head = f"{worst.id}" + (f" [{worst.subject}]" if worst.subject else "")
    body = _cut(f"{head}: {worst.title}", MAX_OUTPUT - len(tail.encode()))
    return (EXIT_PROBLEM if real else EXIT_UNKNOWN), body + tail


# -- configs ---------------------------------------------------------------------------------
def _camel(ident: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", ident) if p)


_PY_ONLY = re.compile(r"\(\?(?:=|!|<=|<!|P=)|\\[1-9]|\(\?#")


def go_pattern(regex: "re.Pattern[str]") -> str:
    """The NPD (Go RE2) pattern for a Python signature regex. Raises ValueError for syntax RE2
    lacks (look-around, back-references)."""
    src = regex.pattern
    if _PY_ONLY.search(src):
        raise ValueError("uses look-around or back-references, which RE2 (Go) lacks")
    src = src.replace(r"\Z", r"\z")
    if regex.flags & re.IGNORECASE:
        src = "(?i)" + src
    # NPD appends \z: the pattern must reach the end of the message
    return src if src.endswith(("$", r"\z", ".*")) else src + ".*"


def _kernel_sources(signatures: Sequence[Any], catalogs: Sequence[Any]):
    """(where, reason id, regex, rule id or None, permanent ok) of every kernel-log problem
    pattern: the `[[signature]]` tables with scope kernel, and the catalog entries that raise
    a rule and can be kernel lines (not the `by_device` ones: a line at a time cannot tell
    whose device a bus line names). A generic class (keyed by the driver named in the line)
    gets its driver group narrowed to the accelerator drivers; a code entry (Xid 79) gets its
    catalog's code pattern with the code written in. An entry a later line can clear (a
    firmware name tried before the one that loads) never sets the permanent condition."""
    import re as _re

    drivers = sorted({d for c in catalogs for d in getattr(c, "drivers", {})})
    narrow = "(?:" + "|".join(_re.escape(d) for d in drivers) + ")"
    for sig in signatures:
        if sig.scope == "kernel" and sig.id not in INFORMATIONAL_SIGNATURES and not sig.fields.get("benign"):
            yield f"{sig.file}: signature {sig.id}", sig.id, sig.regex, sig.fields.get("rule"), True
    for cat in catalogs:
        if cat.scope not in ("kernel", "any"):
            continue
        for e in cat.entries:
            if e.benign or not e.rule or e.scope not in ("kernel", "any"):
                continue
            where, ident = f"{cat.file}: entry {e.key}", f"{cat.id}-{e.key}"
            if e.pattern is not None:
                text = e.pattern.pattern
                if getattr(e, "by_device", False):
                    continue  # the bus's line about a device: only the whole log tells whose it is
                if cat.generic:
                    text = _re.sub(r"\(\?P<(module|driver)>[^()]*\)", lambda m: f"(?P<{m.group(1)}>{narrow})",
                                   text, count=1)
                yield where, ident, _re.compile(text, e.pattern.flags), e.rule, not e.cleared_by
            elif e.code is not None:
                for cp in cat.code_patterns:
                    if "code" in cp.groupindex:
                        text = _re.sub(r"\(\?P<code>[^()]*\)", _re.escape(e.code), cp.pattern, count=1)
                        yield where, ident, _re.compile(text, cp.flags), e.rule, True


def kernel_monitor(signatures: Sequence[Any], catalogs: Sequence[Any] = ()) -> Tuple[Dict[str, Any], List[str]]:
    """The system-log monitor config and the notes on patterns left out."""
    rules, notes, seen = [], [], set()
    for where, ident, regex, rule_id, permanent_ok in _kernel_sources(signatures, catalogs):
        try:
            pattern = go_pattern(regex)
        except ValueError as e:
            notes.append(f"{where}: left out ({e})")
            continue
        if pattern in seen:
            continue
        seen.add(pattern)
        rule = {"type": "temporary", "reason": _camel(ident), "pattern": pattern}
        if rule_id in PERMANENT_RULES and permanent_ok:
            rules.append(dict(rule, type="permanent", condition="NPUKernelProblem"))
        rules.append(rule)
    cfg = {
        "plugin": "kmsg",
        "logPath": "/dev/kmsg",
        "lookback": "5m",
        "bufferSize": 10,
        "source": "npu-doctor-kernel-monitor",
        "metricsReporting": True,
        "conditions": [{"type": "NPUKernelProblem", "reason": "NoNPUKernelProblem",
                        "message": "no accelerator driver failure in the kernel log"}],
        "rules": rules,
    }
    return cfg, notes


def plugin_monitor(command: str = DEFAULT_COMMAND) -> Dict[str, Any]:
    """The custom plugin monitor config: one permanent condition per area, each a
    `check --format npd --fail-on warning --select ...` run."""
    conditions, rules = [], []
    for ctype, area, ids in AREAS:
        conditions.append({"type": ctype, "reason": "No" + ctype,
                           "message": f"npu-doctor: no problem with {area}"})
        args = ["check", "--format", "npd", "--fail-on", "warning"]
        for rid in ids:
            args += ["--select", rid]
        rules.append({"type": "permanent", "condition": ctype, "reason": ctype, "path": command,
                      "args": args, "timeout": "60s"})
    return {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": "300s", "timeout": "60s", "max_output_length": MAX_OUTPUT,
                         "concurrency": 1, "enable_message_change_based_condition_update": False},
        "source": "npu-doctor-custom-plugin-monitor",
        "metricsReporting": True,
        "conditions": conditions,
        "rules": rules,
    }


def render(cfg: Dict[str, Any]) -> str:
    return json.dumps(cfg, indent=2, ensure_ascii=False) + "\n"


def generated(probe_dirs: Sequence[str] = (), command: str = DEFAULT_COMMAND) -> Tuple[Dict[str, str], List[str]]:
    """{file name: content} of both configs, and notes. Raises ConfigError for bad probes."""
    from .. import registry
    from ..catalog import load_catalogs
    from ..probes import load_signatures

    registry.load_all()
    kmon, notes = kernel_monitor(load_signatures(probe_dirs), load_catalogs().catalogs)
    return {"npu-doctor-plugin-monitor.json": render(plugin_monitor(command)),
            "npu-doctor-kernel-monitor.json": render(kmon)}, notes


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m npu_doctor.deploy.npd",
                                 description="Write Node Problem Detector configs generated from npu-doctor's data.")
    ap.add_argument("outdir", nargs="?", default="deploy/node-problem-detector")
    ap.add_argument("--check", action="store_true", help="exit 1 when a file differs from what would be written")
    ap.add_argument("--probes", action="append", default=[], metavar="DIR", help="extra probe specs")
    ap.add_argument("--command", default=DEFAULT_COMMAND, help="npu-doctor's path inside the NPD image")
    args = ap.parse_args(argv)
    from ..errors import ConfigError
    from ..watch.metrics import write_atomic

    try:
        files, notes = generated(args.probes, args.command)
    except ConfigError as e:
        print(f"npu-doctor: error: {e}", file=sys.stderr)
        return 2
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    stale = []
    for name, text in files.items():
        path = os.path.join(args.outdir, name)
        try:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            os.makedirs(args.outdir, exist_ok=True)
            write_atomic(path, text.encode("utf-8"))
            print(f"wrote {path}")
    for path in stale:
        print(f"{path} is not current: run python -m npu_doctor.deploy.npd", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
