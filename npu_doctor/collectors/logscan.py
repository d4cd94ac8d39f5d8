"""One streaming pass over each runtime log, shared by every probe that reads logs.

`--log FILE` and a snapshot's `logs/` were read whole (at most 8 MiB, the rest dropped
without a word) and decoded once per consumer: the `[[signature]]` matcher and the catalogs
(collectors.logs), the CPU-fallback parsers (collectors.fallback, parsers.fallback) and the
RKNN runtime-log parser (collectors.rknn_runtime). Here each log is read once per check, in
chunks (host.logstream: any size, compressed logs too), and every line goes to every
consumer; the first probe that asks runs the pass and the others wait for its result.

Memory stays bounded: the signature and catalog matchers stream, and the fallback and RKNN
parsers (functions of a whole text) see the log in windows of WINDOW_CHARS characters with
line numbers kept; a log larger than one window says so in `LogScan.notes` (a statement that
spans a window boundary could be read in two halves).
"""

from __future__ import annotations

import copy
import os
import threading
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..catalog.logtext import blocks, literal_needles
from ..catalog.needles import LineFilter
from ..errors import HostError
from ..host.logstream import iter_log_lines
from ..parsers.fallback import parse_fallback_logs
from ..parsers.rknn import parse_runtime_log

#: Characters of log text the whole-text parsers (CPU fallback, RKNN) see at a time.
WINDOW_CHARS = 2 << 20
MAX_LINE = 400
#: Characters of one log line that signatures look at.
MAX_SCAN_LINE = 4096
MAX_EVENTS_PER_SIGNATURE = 50


class LogScan:
    """What one pass over one log found: signature and catalog events, CPU-fallback entries
    (parsers.fallback shape), the RKNN runtime-log facts (parsers.rknn shape), line count."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines = 0
        self.signature_events: List[Dict[str, Any]] = []
        self.catalog_events: List[Dict[str, Any]] = []
        self.fallback_entries: List[Dict[str, Any]] = []
        self.rknn: Dict[str, Any] = {}
        self.notes: List[str] = []


class SignatureMatcher:
    """`[[signature]]` regexes of one scope over a stream of lines: a literal prefilter per
    block (catalog.needles), the regexes only on lines holding a needle; events as
    collectors.logs.match_signatures makes them."""

    def __init__(self, signatures: Iterable[Any], scope: str, source: str) -> None:
        self.sigs = [s for s in signatures if s.scope in (scope, "any")]
        self.scope, self.source = scope, source
        needles: List[str] = []
        self.always = False
        for s in self.sigs:
            got = literal_needles(s.regex.pattern, s.regex.flags)
            if not got:
                self.always = True
            needles += got or []
        self.filter = LineFilter(needles)
        self.events: List[Dict[str, Any]] = []
        self.counts: Dict[str, int] = {}

    def feed(self, block: List[str], start: int) -> None:
        """Lines block[i] with line numbers start + i."""
        if not self.sigs:
            return
        idx = range(len(block)) if self.always else self.filter.hits(block)
        for i in idx:
            line = block[i]
            if len(line) > MAX_SCAN_LINE:
                # a minified-JSON or base64 line: what a signature matches sits near the
                # start, and a regex over 100 kB of one line holds the GIL for seconds
                line = line[:MAX_SCAN_LINE]
            for sig in self.sigs:
                m = sig.regex.search(line)
                if not m or self.counts.get(sig.id, 0) >= MAX_EVENTS_PER_SIGNATURE:
                    continue
                self.counts[sig.id] = self.counts.get(sig.id, 0) + 1
                ev: Dict[str, Any] = {"signature": sig.id, "scope": self.scope,
                                      "source": self.source, "line_no": start + i,
                                      "line": line.strip()[:MAX_LINE]}
                ev.update(sig.fields)
                ev.update({k: v for k, v in m.groupdict().items() if v is not None})
                self.events.append(ev)


class _Windowed:
    """The whole-text parsers over windows of the log, line numbers made absolute."""

    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.lines: List[str] = []
        self.chars = 0
        self.start = 1
        self.windows = 0

    def feed(self, block: List[str], start: int) -> None:
        for line in block:
            self.lines.append(line)
            self.chars += len(line) + 1
            if self.chars >= WINDOW_CHARS:
                self.flush()

    def flush(self) -> None:
        if not self.lines:
            return
        text = "\n".join(self.lines)
        off = self.start - 1
        self.windows += 1
        for e in parse_fallback_logs(text):
            e["line_no"] += off
            if isinstance(e.get("group"), int):
                e["group"] += off
            self.scan.fallback_entries.append(e)
        got = parse_runtime_log(text)
        for k, v in got.items():
            if k in self.scan.rknn:
                continue
            if isinstance(v, dict) and "line_no" in v:
                v = dict(v, line_no=v["line_no"] + off)
            self.scan.rknn[k] = v
        self.start += len(self.lines)
        self.lines, self.chars = [], 0


def scan_one(name: str, lines: Iterable[str], signatures: Iterable[Any],
             catalogs: Optional[Any]) -> LogScan:
    """One pass over the lines of one log, every consumer fed from it."""
    scan = LogScan(name)
    sig = SignatureMatcher(signatures, "runtime", name)
    win = _Windowed(scan)

    def fan_out() -> Iterator[str]:
        for start, block in blocks(lines):
            sig.feed(block, start)
            win.feed(block, start)
            scan.lines += len(block)
            yield from block

    if catalogs is not None:
        # a saved syslog or kern.log carries kernel messages too
        scan.catalog_events = catalogs.match_lines(fan_out(), name, ("kernel", "runtime"), "runtime")
    else:
        for _ in fan_out():
            pass
    win.flush()
    scan.fallback_entries.sort(key=lambda e: (e["line_no"], e["runtime"]))
    scan.signature_events = sig.events
    if win.windows > 1:
        scan.notes.append(f"{name}: {scan.lines} lines read in {win.windows} windows of "
                          f"{WINDOW_CHARS >> 20} MiB for the CPU-fallback and RKNN parsers")
    return scan


_CACHE: "weakref.WeakKeyDictionary[Any, Tuple[Any, List[LogScan]]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_HOST_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()


def _identity(files: List[Tuple[str, str, bool]]) -> Tuple[Any, ...]:
    out: List[Tuple[Any, ...]] = []
    for name, path, _strict in files:
        try:
            st = os.stat(path)
            out.append((name, path, st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append((name, path, None, None, None))
    return tuple(out)


def scan_logs(host: Any, signatures: Iterable[Any], catalogs: Optional[Any]) -> List[LogScan]:
    """The scans of every runtime log of this host, in `logs()` order. Computed once per
    set of files (name, size, mtime) and kept while the host lives; probes running at the
    same time share one pass. Raises HostError when a `--log` file cannot be read."""
    signatures = list(signatures)
    files = host.log_files()
    with _LOCK:
        lock = _HOST_LOCKS.setdefault(host, threading.Lock())
    with lock:
        key = (_identity(files) if files is not None else None, tuple(map(id, signatures)),
               id(catalogs))
        hit = _CACHE.get(host)
        if hit is not None and hit[0] == key and files is not None:
            return copy.deepcopy(hit[1])
        scans: List[LogScan] = []
        if files is None:  # a host that only hands over texts
            for name, text in host.logs():
                scans.append(scan_one(name, text.splitlines(), signatures, catalogs))
        else:
            for name, path, strict in files:
                try:
                    scans.append(scan_one(name, _checked(iter_log_lines(path, strict)), signatures,
                                          catalogs))
                except HostError:
                    if strict:
                        continue  # an unreadable or refused file in a snapshot's logs/ is skipped
                    raise
        _CACHE[host] = (key, scans)
    return copy.deepcopy(scans)  # each probe gets its own events to put in its facts


def _checked(lines: Iterator[str]) -> Iterator[str]:
    """Lines of a log; an OSError while reading becomes HostError (a probe error)."""
    try:
        yield from lines
    except OSError as e:
        raise HostError(getattr(e, "filename", None) or "log", e.strerror or str(e)) from None
