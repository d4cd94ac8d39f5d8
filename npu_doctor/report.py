"""Reports of a check: text a person reads in five seconds, and the JSON contract.

Text layout (flutter doctor style): one line per area with a mark, then each finding with its
evidence and fixes. Colour only when asked (the CLI decides: a TTY and no NO_COLOR).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import __version__
from .check import CheckResult
from .rules import SEVERITY_RANK, Finding
from .textsafe import escape_controls

# Area name -> fact path prefixes whose findings belong to it.
AREAS: List[Tuple[str, Tuple[str, ...]]] = [
    ("System", ("os", "kernel", "arch", "libc", "cpu", "user", "limits", "access")),
    ("Accelerators", ("accelerators", "drivers", "pci")),
    ("Software", ("sdks", "libraries", "python", "frameworks")),
    ("Thermal", ("thermal",)),
    ("Power & clocks", ("devfreq", "cpufreq")),
    ("Logs", ("kernel_log", "log_events", "fallback")),
    ("Inference runs", ("deep",)),   # only with check --deep
]

_MARKS = {"ok": ("✓", "green"), "info": ("i", "blue"), "warning": ("!", "yellow"),
          "error": ("✗", "red"), "unknown": ("?", "bright_black")}
_ASCII_MARKS = {"ok": "ok", "info": "i", "warning": "!", "error": "x", "unknown": "?"}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}".rstrip("0").rstrip(".")
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    return str(v)


def _area_of(f: Finding) -> str:
    if f.area:   # the rule's `area` key (rules/*.toml)
        return f.area
    for ev in f.evidence:
        head = ev["fact"].split(".")[0].split("[")[0]
        for name, prefixes in AREAS:
            if head in prefixes:
                return name
    if f.id in ("probe-failed", "insufficient-privileges"):
        return "System"
    if f.id in ("no-accelerator-found", "driver-not-loaded"):
        return "Accelerators"
    return "System"


_PROBE_AREAS = {"thermal": "Thermal", "devfreq": "Power & clocks", "cpufreq": "Power & clocks",
                "libraries": "Software", "logs": "Logs", "system": "System"}


def _probe_area(p: Any) -> str:
    """The report line a probe's result belongs to (its spec `area`, or its id)."""
    return _PROBE_AREAS.get(p.id) or _PROBE_AREAS.get(getattr(p, "area", ""), "Accelerators")


def _summary(area: str, facts: Dict[str, Any]) -> str:
    g = facts.get
    if area == "System":
        os_ = g("os", {}).get("pretty_name") or g("os", {}).get("id") or "unknown OS"
        parts = [os_]
        if g("kernel", {}).get("release"):
            parts.append("kernel " + g("kernel", {})["release"])
        if g("arch"):
            parts.append(g("arch"))
        libc = g("libc", {})
        if libc.get("name"):
            parts.append(f"{libc['name']} {libc.get('version', '?')}")
        cpu = g("cpu", {})
        if cpu.get("count"):
            parts.append(f"{cpu['count']} CPUs")
        return ", ".join(parts)
    if area == "Accelerators":
        accels = g("accelerators", [])
        inv = g("inventory", {}) or {}
        unknown = (inv.get("unknown") or []) + (inv.get("incomplete") or [])
        if not accels:
            if unknown:
                vendors = ", ".join(sorted({str(u.get("vendor", "?")) for u in unknown}))
                return f"count unknown: the {vendors} tool failed"
            return "none found"
        names = []
        for a in accels[:4]:
            drv = a.get("driver", {})
            label = a.get("name") or a.get("vendor", "?")
            extra = drv.get("name") or ""
            if drv.get("version"):
                extra += f" {drv['version']}"
            names.append(f"{a.get('vendor', '?')} {label}" + (f" ({extra.strip()})" if extra.strip() else ""))
        more = f" and {len(accels) - 4} more" if len(accels) > 4 else ""
        return f"{len(accels)} found: " + "; ".join(names) + more
    if area == "Software":
        sdks = g("sdks", {})
        libs = g("libraries", [])
        parts = [f"{k} {v.get('version', '?')}" for k, v in sorted(sdks.items()) if isinstance(v, dict)]
        parts += [f"{k} {v.get('version', '?')}" for k, v in sorted(g("frameworks", {}).items())
                  if isinstance(v, dict) and k not in sdks]  # openvino is both: say it once
        if libs:
            parts.append(f"{len(libs)} SDK libraries checked")
        return ", ".join(parts) if parts else "no SDK version found"
    if area == "Thermal":
        zones = g("thermal", {}).get("zones", [])
        temps = [z for z in zones if isinstance(z.get("temp_c"), (int, float))
                 and not z.get("reading_invalid")]
        if not zones:
            # an accelerator's own sensor (nvidia-smi, npu-smi, hailortcli) still gives a reading
            hot_acc = [a for a in g("accelerators", []) if isinstance(a.get("temperature_c"), (int, float))]
            if hot_acc:
                a = max(hot_acc, key=lambda x: x["temperature_c"])
                return (f"no thermal zones exposed; hottest accelerator {a.get('name') or a.get('vendor', '?')} "
                        f"{_fmt(a['temperature_c'])} °C")
            return "no thermal zones exposed"
        if temps:
            hot = max(temps, key=lambda z: z["temp_c"])
            return f"{len(zones)} zones, hottest {hot.get('type', '?')} {_fmt(hot['temp_c'])} °C"
        return f"{len(zones)} zones"
    if area == "Power & clocks":
        devs = g("devfreq", {}).get("devices", [])
        # what holds clocks down outside devfreq, so that the line agrees with a power or
        # thermal finding raised from it: a GPU's active clock event reasons (Idle is not a
        # hold-down), the Raspberry Pi firmware's throttle word
        held = [f"GPU {a.get('pci_address') or a.get('index', '?')} clocks held: "
                + ", ".join(r for r in a["clocks_event_reasons"] if r != "Idle")
                for a in g("accelerators", []) if isinstance(a.get("clocks_event_reasons"), list)
                and [r for r in a["clocks_event_reasons"] if r != "Idle"]]
        if g("power", {}).get("rpi_throttled"):
            held.append(f"Raspberry Pi get_throttled {g('power', {})['rpi_throttled']}")
        if not devs:
            return "; ".join(held[:4]) if held else "no devfreq devices"
        def one(d: Dict[str, Any]) -> str:
            text = f"{d.get('name', '?')} {d.get('governor', '?')}"
            cur, top = d.get("cur_hz"), d.get("max_hz")
            if isinstance(cur, (int, float)) and isinstance(top, (int, float)) and top:
                text += f" {cur / 1e6:.0f}/{top / 1e6:.0f} MHz"
            return text
        return "; ".join([one(d) for d in devs[:4]] + held[:2])
    if area == "Inference runs":
        from .deep.report import summary

        return summary(facts)
    if area == "Logs":
        fb = g("fallback", {})
        parts = []
        if fb.get("ops"):
            parts.append(f"CPU fallback logged: {', '.join(fb['ops'][:6])}")
        elif isinstance(fb.get("count"), int):
            # a delegate/EP summary counts the nodes it left out without naming them
            parts.append(f"CPU fallback logged: {fb['count']} operators, not named")
        events = [e for e in g("log_events", []) or [] if isinstance(e, dict) and e.get("rule")]
        if events:
            where = sorted({str(e.get("source")) for e in events})
            lines = sum(int(e.get("count") or 1) for e in events)
            parts.append(f"{lines} problem line{'s' if lines != 1 else ''} in {', '.join(where[:3])}"
                         + (f" (+{len(where) - 3} more)" if len(where) > 3 else ""))
        return "; ".join(parts) if parts else "nothing notable"
    return ""


def render_text(result: CheckResult, verbose: bool = False, color: bool = False,
                unicode: bool = True) -> str:
    """The human report of `check`: one line per area with a mark, then each finding with its
    evidence and fixes; `verbose` adds every fact with its source, the probes and the
    libraries as `ld.so --list` shows them. `color` adds ANSI styles; `unicode=False` uses
    ASCII marks. Ends in a newline."""
    import click

    def style(text: str, fg: Optional[str] = None, bold: bool = False) -> str:
        return click.style(text, fg=fg, bold=bold) if color else text

    def clean(text: str) -> str:  # machine text: one record per line, no terminal escapes
        return escape_controls(text)

    def mark(kind: str) -> str:
        sym, fg = _MARKS[kind]
        if not unicode:
            sym = _ASCII_MARKS[kind]
        return style(f"[{sym}]", fg=fg, bold=True)

    facts = result.facts.data
    lines = [style(f"npu-doctor {__version__}", bold=True) + " — " +
             ("this host" if result.host.source == "live" else f"snapshot {result.host.path}"), ""]
    by_area: Dict[str, List[Finding]] = {}
    for f in result.findings:
        by_area.setdefault(_area_of(f), []).append(f)
    width = max(len(a) for a, _ in AREAS)
    for area, _prefixes in AREAS:
        fs = by_area.get(area, [])
        if area == "Inference runs" and "deep" not in facts and not fs:
            continue
        worst = max((SEVERITY_RANK[f.severity] for f in fs), default=0)
        kind = {0: "ok", 1: "info", 2: "warning", 3: "error"}[worst]
        summary = clean(_summary(area, facts))
        if kind == "ok" and "unknown" in summary:
            kind = "unknown"
        failed = [p.id for p in result.probes if p.status == "error" and _probe_area(p) == area]
        if kind == "ok" and failed:
            # a probe that failed is never summarised as fine: its part is unknown
            kind = "unknown"
            summary += f"; unknown: probe {', '.join(failed[:3])} failed"
        if fs:
            summary += f"  ({len(fs)} finding{'s' if len(fs) != 1 else ''})"
        lines.append(f"{mark(kind)} {area.ljust(width)}  {summary}")
    lines.append("")
    if not result.findings:
        lines.append(style("No issues found.", fg="green"))
    else:
        counts = {s: sum(1 for f in result.findings if f.severity == s) for s in ("error", "warning", "info")}
        lines.append(style(", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n), bold=True))
        order = sorted(result.findings, key=lambda f: -SEVERITY_RANK[f.severity])
        for f in order:
            kind = f.severity
            head = f"{mark(kind)} {style(f.id, bold=True)}"
            if f.subject:
                head += f" [{clean(f.subject)}]"
            lines.append("")
            lines.append(head + f": {clean(f.title)}")
            lines.append(f"    {clean(f.message)}")
            for ev in f.evidence:
                src = f"  ({clean(str(ev['source']))})" if ev.get("source") else ""
                lines.append(style(f"    evidence: {ev['fact']} = {clean(_fmt(ev['value']))}{src}",
                                   fg="bright_black"))
            for fx in f.fixes:
                label = {"now": "fix now", "persist": "make it stay", "doc": "read"}[fx["kind"]]
                text = escape_controls(fx["text"].rstrip(), keep_newlines=True).replace("\n", "\n" + " " * (6 + len(label)))
                lines.append(f"    {style(label + ':', fg='cyan')} {text}")
    errors = [p for p in result.probes if p.status == "error"]
    if errors and verbose:
        lines.append("")
        lines.append("Probes that failed:")
        for p in errors:
            lines.append(f"    {p.id}: {clean(str(p.error))}")
    libs = facts.get("libraries") or []
    if verbose and libs:
        lines.append("")
        lines.append("Libraries (resolved as ld.so would, `ld.so --list` style):")
        for lib in libs:
            lines.append(f"    {lib.get('path')}" + (f" [{lib['sdk']}]" if lib.get("sdk") else ""))
            for entry in lib.get("resolved") or []:
                lines.append(f"        {entry}")
            for name in lib.get("missing") or []:
                lines.append(style(f"        {name} => not found", fg="red"))
    if verbose:
        lines.append("")
        lines.append("Facts:")
        for path, value in result.facts.flat():
            origin = result.facts.sources.get(path)
            lines.append(f"    {path} = {clean(_fmt(value))}"
                         + (style(f"  ({clean(str(origin))})", fg="bright_black") if origin else ""))
    elif not result.findings or errors:
        lines.append("")
        lines.append(style("Run with -v for every fact and probe, or --format json for tools.", fg="bright_black"))
    return "\n".join(lines) + "\n"


def render_json(result: CheckResult, ensure_ascii: bool = False) -> str:
    """The `check --format json` document (schema npu-doctor/report/v1, docs/architecture.md)
    as indented text ending in a newline; `ensure_ascii` escapes non-ASCII as \\uXXXX (for a
    stdout that cannot encode Unicode)."""
    return json.dumps(result.to_json(), indent=2, ensure_ascii=ensure_ascii, default=str) + "\n"


def stdout_is_unicode() -> bool:
    """Whether sys.stdout encodes Unicode (UTF-8/16/32): else text reports use ASCII marks."""
    enc = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    return enc in ("utf8", "utf16", "utf32")
