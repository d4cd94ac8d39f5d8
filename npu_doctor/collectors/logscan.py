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

from ..catalog.logtext import literal_needles
from ..catalog.needles import LineFilter, LineNeedles
from ..errors import HostError
from ..host.logstream import iter_log_chunks
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
        self.needles = sorted({n.lower() for n in needles})
        self._needle_set = frozenset(self.needles)
        self.filter = LineFilter(needles)
        self.events: List[Dict[str, Any]] = []
        self.counts: Dict[str, int] = {}

    def feed(self, block: List[str], start: int) -> None:
        """Lines block[i] with line numbers start + i."""
        if self.sigs:
            self._feed(block, start, range(len(block)) if self.always else self.filter.hits(block))

    def feed_scanned(self, block: List[str], start: int, hits: Dict[int, List[str]]) -> None:
        """feed, with the needles of each line known (LineNeedles.scan with at least
        `self.needles`): the lines that hold one of ours are tried."""
        if not self.sigs:
            return
        if self.always:
            self._feed(block, start, range(len(block)))
            return
        ours = self._needle_set
        self._feed(block, start, sorted(i for i, got in hits.items() if not ours.isdisjoint(got)))

    def _feed(self, block: List[str], start: int, idx: Iterable[int]) -> None:
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
    """The whole-text parsers over windows of the log, line numbers made absolute. A window
    closes after the line that brings it to WINDOW_CHARS characters (newlines counted)."""

    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.parts: List[str] = []  # "\n"-joined runs of lines
        self.count = 0  # lines in the window
        self.chars = 0
        self.start = 1
        self.windows = 0

    def feed(self, lines: List[str], text: Optional[str] = None) -> None:
        """Consecutive lines, and their "\n"-joined text when the caller has it."""
        while lines:
            n = (len(text) if text is not None else sum(map(len, lines)) + len(lines) - 1) + 1
            if self.chars + n < WINDOW_CHARS:  # no line of these closes the window
                self.parts.append(text if text is not None else "\n".join(lines))
                self.count += len(lines)
                self.chars += n
                return
            acc = self.chars
            for i, line in enumerate(lines):
                acc += len(line) + 1
                if acc >= WINDOW_CHARS:
                    break
            self.parts.append("\n".join(lines[:i + 1]))
            self.count += i + 1
            self.chars = acc
            self.flush()
            lines, text = lines[i + 1:], None

    def flush(self) -> None:
        if not self.count:
            return
        text = "\n".join(self.parts)
        self.parts = []
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
        self.start += self.count
        self.count, self.chars = 0, 0


_SCANNERS: Dict[Tuple[str, ...], LineNeedles] = {}


def scan_one(name: str, chunks: Iterable[List[str]], signatures: Iterable[Any],
             catalogs: Optional[Any]) -> LogScan:
    """One pass over one log given as lists of consecutive lines (host.logstream chunks),
    every consumer fed from it: one needle scan of each chunk serves the signatures and the
    catalogs (catalog.chunkmatch)."""
    scan = LogScan(name)
    sig = SignatureMatcher(signatures, "runtime", name)
    win = _Windowed(scan)
    run = None
    needles = set(sig.needles)
    if catalogs is not None:
        from ..catalog.chunkmatch import LogClassifier

        # a saved syslog or kern.log carries kernel messages too
        run = LogClassifier(catalogs, name, ("kernel", "runtime"), "runtime")
        needles.update(run.needles.needles)
    key = tuple(sorted(needles))
    scanner = _SCANNERS.get(key)
    if scanner is None:
        scanner = _SCANNERS[key] = LineNeedles(key)
    for lines in chunks:
        if not lines:
            continue
        text = "\n".join(lines)
        hits = scanner.scan(text.lower())
        sig.feed_scanned(lines, scan.lines + 1, hits)
        win.feed(lines, text)
        if run is not None:
            run.feed(lines, text, hits)
        scan.lines += len(lines)
    if run is not None:
        scan.catalog_events = run.finish()
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
                scans.append(scan_one(name, [text.splitlines()], signatures, catalogs))
        else:
            for name, path, strict in files:
                try:
                    scans.append(scan_one(name, _checked(iter_log_chunks(path, strict)), signatures,
                                          catalogs))
                except HostError:
                    if strict:
                        continue  # an unreadable or refused file in a snapshot's logs/ is skipped
                    raise
        _CACHE[host] = (key, scans)
    return copy.deepcopy(scans)  # each probe gets its own events to put in its facts


def _checked(chunks: Iterator[List[str]]) -> Iterator[List[str]]:
    """Chunks of a log; an OSError while reading becomes HostError (a probe error)."""
    try:
        yield from chunks
    except OSError as e:
        raise HostError(getattr(e, "filename", None) or "log", e.strerror or str(e)) from None
