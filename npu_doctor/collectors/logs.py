"""Kernel log and runtime logs, matched against `[[signature]]` tables.

The kernel log comes from `dmesg` (canonical argv, so snapshots replay it), falling back to
`journalctl -k -b` when dmesg is restricted (kernel.dmesg_restrict=1). Runtime logs are the
snapshot's `logs/` and the files given with `--log`. Every signature match becomes one
`log_events[]` fact; rules read those.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .. import truncation
from ..catalog import eventcache
from ..catalog.logtext import blocks
from ..errors import CommandNotFound
from ..probes import NoData, ProbeContext, Signature
from ..registry import collector
from .logscan import (  # noqa: F401  (MAX_* kept importable from here)
    MAX_EVENTS_PER_SIGNATURE,
    MAX_LINE,
    MAX_SCAN_LINE,
    SignatureMatcher,
    scan_logs,
)

DMESG = ["dmesg"]
JOURNAL_K = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]


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
    """log_events for every line of text that a signature of this scope matches (a literal
    prefilter first: collectors.logscan.SignatureMatcher)."""
    m = SignatureMatcher(signatures, scope, source)
    for start, block in blocks(text.splitlines()):
        m.feed(block, start)
    return m.events


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
    if catalogs is None:
        return
    # the same log under the same configuration: its events from the last run (eventcache)
    config = str(ctx.options.get("config_digest") or "")
    events = eventcache.lookup(config, text, source, scopes, log_scope)
    if events is None:
        events = catalogs.match_text(text, source, scopes, log_scope)
        eventcache.store(config, text, source, scopes, log_scope, events)
    _add_events(ctx, events)


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
    # one streamed pass per log, shared with the fallback and RKNN probes
    scans = scan_logs(ctx.host, ctx.options.get("signatures", []), ctx.options.get("catalogs"))
    if not scans:
        raise NoData("no runtime logs given (--log FILE)")
    ctx.facts.set("runtime_logs.files", [s.name for s in scans])
    for s in scans:
        _add_events(ctx, s.signature_events)
        _add_events(ctx, s.catalog_events)
        truncation.add(ctx.facts, [truncation.for_line(s.name, c) for c in s.cut_lines], s.name)
    # logs that `capture` copied only in part (snapshot.toml [[snapshot.truncated]])
    names = {s.name for s in scans}
    base = ctx.host
    while getattr(base, "inner", None) is not None:  # capture.RecordingHost
        base = base.inner  # type: ignore[attr-defined]
    truncation.add(ctx.facts, [r for r in truncation.from_snapshot(base.snapshot_meta())
                               if r["source"] in names], "snapshot.toml")
