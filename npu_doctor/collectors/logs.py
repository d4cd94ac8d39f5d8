"""Kernel log and runtime logs, matched against `[[signature]]` tables.

The kernel log comes from `dmesg` (canonical argv, so snapshots replay it), falling back to
`journalctl -k -b` when dmesg is restricted (kernel.dmesg_restrict=1). Runtime logs are the
snapshot's `logs/` and the files given with `--log`. Every signature match becomes one
`log_events[]` fact; rules read those.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import CommandNotFound
from ..probes import NoData, ProbeContext, Signature
from ..registry import collector

DMESG = ["dmesg"]
JOURNAL_K = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]
MAX_LINE = 400
#: Characters of one log line that signatures look at.
MAX_SCAN_LINE = 4096
MAX_EVENTS_PER_SIGNATURE = 50


def kernel_log(ctx: ProbeContext) -> Optional[Tuple[str, str]]:
    """(source, text) of the kernel log, or None when no way to read it worked.

    Records an insufficient-privileges entry when dmesg is refused and nothing else works.
    """
    refused = False
    for argv in (DMESG, JOURNAL_K):
        try:
            res = ctx.run(argv)
        except CommandNotFound:
            continue
        if res.ok and res.stdout.strip():
            return res.source, res.stdout
        if "not permitted" in res.stderr.lower() or "permission denied" in res.stderr.lower():
            refused = True
    if refused:
        ctx.denied("/dev/kmsg", "kernel log (driver probe errors, firmware loads)")
    return None


def match_signatures(text: str, source: str, signatures: List[Signature],
                     scope: str) -> List[Dict[str, Any]]:
    """log_events for every line of text that a signature of this scope matches."""
    sigs = [s for s in signatures if s.scope in (scope, "any")]
    events: List[Dict[str, Any]] = []
    counts: Dict[str, int] = {}
    if not sigs:
        return events
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_SCAN_LINE:
            # a minified-JSON or base64 line: what a signature matches sits near the start,
            # and a regex over 100 kB of one line holds the GIL for seconds
            line = line[:MAX_SCAN_LINE]
        for sig in sigs:
            m = sig.regex.search(line)
            if not m:
                continue
            if counts.get(sig.id, 0) >= MAX_EVENTS_PER_SIGNATURE:
                continue
            counts[sig.id] = counts.get(sig.id, 0) + 1
            ev: Dict[str, Any] = {"signature": sig.id, "scope": scope, "source": source,
                                  "line_no": n, "line": line.strip()[:MAX_LINE]}
            ev.update(sig.fields)
            ev.update({k: v for k, v in m.groupdict().items() if v is not None})
            events.append(ev)
    return events


def _add_events(ctx: ProbeContext, events: List[Dict[str, Any]]) -> None:
    if not events:
        return
    lst = ctx.facts.data.setdefault("log_events", [])
    for ev in events:
        lst.append(ev)
        ctx.facts.sources[f"log_events[{len(lst) - 1}]"] = f"{ev['source']}:{ev['line_no']}"


def _add_catalog_events(ctx: ProbeContext, text: str, source: str, scopes: Tuple[str, ...],
                        log_scope: str) -> None:
    catalogs = ctx.options.get("catalogs")
    if catalogs is not None:
        _add_events(ctx, catalogs.match_text(text, source, scopes, log_scope))


@collector("kernel_log")
def collect_kernel_log(ctx: ProbeContext) -> None:
    got = kernel_log(ctx)
    if got is None:
        if ctx.facts.data.get("access"):
            return
        raise NoData("no kernel log available (dmesg/journalctl missing)")
    source, text = got
    ctx.facts.set("kernel_log.source", source.lstrip("$ "), source)
    ctx.facts.set("kernel_log.lines", len(text.splitlines()), source)
    _add_events(ctx, match_signatures(text, source.lstrip("$ "), ctx.options.get("signatures", []),
                                      "kernel"))
    _add_catalog_events(ctx, text, source.lstrip("$ "), ("kernel",), "kernel")


@collector("runtime_logs")
def collect_runtime_logs(ctx: ProbeContext) -> None:
    logs = ctx.host.logs()
    if not logs:
        raise NoData("no runtime logs given (--log FILE)")
    ctx.facts.set("runtime_logs.files", [name for name, _ in logs])
    for name, text in logs:
        _add_events(ctx, match_signatures(text, name, ctx.options.get("signatures", []), "runtime"))
        # a saved syslog or kern.log carries kernel messages too
        _add_catalog_events(ctx, text, name, ("kernel", "runtime"), "runtime")
