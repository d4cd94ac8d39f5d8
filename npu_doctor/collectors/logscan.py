"""One streaming pass over each runtime log, shared by every probe that reads logs.

`--log FILE` and a snapshot's `logs/` were read whole (at most 8 MiB, the rest dropped
without a word) and decoded once per consumer: the `[[signature]]` matcher and the catalogs
(collectors.logs), the CPU-fallback parsers (collectors.fallback, parsers.fallback) and the
RKNN runtime-log parser (collectors.rknn_runtime). Here each log is read once per check, in
chunks (host.logstream: any size, compressed logs too), and every line goes to every
consumer; the first probe that asks runs the pass and the others wait for its result.

The needle scan of each chunk (catalog.needles.LineNeedles, one Aho-Corasick pass when
pyahocorasick is installed) serves the signatures, the catalogs and the whole-text parsers: a
window is given only to the parsers whose trigger literals it holds
(parsers.fallback.TRIGGERS, parse_runtime_log's "version").

Memory stays bounded: the signature and catalog matchers stream, and the fallback and RKNN
parsers (functions of a whole text) see the log in windows of WINDOW_CHARS characters with
line numbers kept; consecutive windows overlap (_Windowed), so a statement or block that
spans a window seam is read whole. What a parser concludes from the log as a whole (ONNX
Runtime: "another execution provider is mentioned", an RKNN node counted once) is judged per
window with its overlap; a log larger than one window says so in `LogScan.notes`. A line
longer than host.logstream.MAX_LINE_CHARS is cut (the rest of the log read on) and listed
in `LogScan.cut_lines`.
"""

from __future__ import annotations

import copy
import os
import threading
import weakref
from itertools import chain
from typing import AbstractSet, Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..catalog.needles import LineFilter, LineNeedles
from ..errors import HostError
from ..host.logstream import iter_log_chunks
from ..parsers.fallback import TRIGGER_NEEDLES, parse_fallback_logs
from ..parsers.rknn import parse_runtime_log
from .pastes import PastedProcVersion, PastedQuery, PastedReport, PastedTable

#: Characters of log text the whole-text parsers (CPU fallback, RKNN) see at a time.
WINDOW_CHARS = 2 << 20
#: Lines of a window read again at the start of the next (seam context), at most OVERLAP_CHARS.
OVERLAP_LINES = 2048
OVERLAP_CHARS = WINDOW_CHARS // 8
#: Entries stated on a window's last TAIL_LINES lines are taken from the next window.
TAIL_LINES = 64
MAX_LINE = 400
#: what every pattern of parsers.rknn.parse_runtime_log holds
RKNN_TRIGGER = "version"
#: needles of the whole-text parsers: a window holding none of a parser's is not given to it
PARSER_NEEDLES = frozenset(TRIGGER_NEEDLES + (RKNN_TRIGGER,))
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
        #: lines cut at host.logstream.MAX_LINE_CHARS: {line_no, chars, kept_chars}
        self.cut_lines: List[Dict[str, int]] = []
        #: the last `nvidia-smi -q` report pasted into the log (from its banner line on, at
        #: most NVSMI_REPORT_CHARS characters), for a snapshot of a report without the command
        self.nvsmi_report: Optional[str] = None
        #: the `|`-lines of nvidia-smi's default table pasted into the log (from its last
        #: "NVIDIA-SMI ... Driver Version" header on, at most NVSMI_REPORT_CHARS characters)
        self.nvsmi_table: Optional[str] = None
        #: the last "NVRM version: ..." line pasted into the log (/proc/driver/nvidia/version)
        self.nvrm_version_line: Optional[str] = None
        #: the last `--query-gpu` CSV asking for clock reasons pasted into the log (pastes.PastedQuery)
        self.nvsmi_query: Optional[str] = None


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
            got = s.needles
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
                if sig.unless is not None and sig.unless.search(line):
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
    closes after the line that brings it to WINDOW_CHARS characters (newlines counted).

    Seams are safe for a statement shorter than the overlap: each window after the first
    starts with the last OVERLAP_LINES lines (at most OVERLAP_CHARS characters) of the one
    before, so a block header (ONNX Runtime's `Node(s) placed on [...]`, an RKNN layer table
    header) is read again with the rows after the seam. The entries are split between
    windows by absolute line number: a window keeps those stated before the last TAIL_LINES
    lines of its new text, the next window the rest (a statement on the lines just before
    the seam is read with the lines after it: a wrapped warning, a table's next rows)."""

    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.parts: List[str] = []  # "\n"-joined runs of lines
        self.count = 0  # lines in the window
        self.chars = 0
        self.start = 1  # line number of the window's first line
        self.keep_from = 1  # entries stated before this line were kept from the window before
        self.windows = 0
        # PARSER_NEEDLES the window holds (lower-cased): those of the lines fed into it, and
        # those of the window before (its overlap); None: not known, every parser runs
        self.own: Optional[Set[str]] = set()
        self.inherited: Optional[Set[str]] = set()
        self.own_lines = 0

    def feed(self, lines: List[str], text: Optional[str] = None,
             present: Optional[AbstractSet[str]] = None) -> None:
        """Consecutive lines, and their "\n"-joined text when the caller has it; `present`:
        the PARSER_NEEDLES the lower-cased lines hold (logscan's shared needle scan)."""
        while lines:
            if present is None or self.own is None:
                self.own = None
            else:
                self.own |= present
            n = (len(text) if text is not None else sum(map(len, lines)) + len(lines) - 1) + 1
            if self.chars + n < WINDOW_CHARS:  # no line of these closes the window
                self.parts.append(text if text is not None else "\n".join(lines))
                self.count += len(lines)
                self.own_lines += len(lines)
                self.chars += n
                return
            acc = self.chars
            for i, line in enumerate(lines):
                acc += len(line) + 1
                if acc >= WINDOW_CHARS:
                    break
            self.parts.append("\n".join(lines[:i + 1]))
            self.count += i + 1
            self.own_lines += i + 1
            self.chars = acc
            self.flush(final=False)
            lines, text = lines[i + 1:], None

    def flush(self, final: bool = True) -> None:
        """Parse the window; `final`: the log ends here (keep every entry left)."""
        if not self.count:
            return
        text = "\n".join(self.parts)
        end = self.start + self.count  # line number after the window
        over, n_over = ("", 0) if final else _tail(text, OVERLAP_LINES, OVERLAP_CHARS)
        keep_to = end if final else max(self.keep_from, end - min(TAIL_LINES, n_over))
        off = self.start - 1
        self.windows += 1
        present = None if self.own is None or self.inherited is None else self.own | self.inherited
        for e in parse_fallback_logs(text, present):
            e["line_no"] += off
            if not self.keep_from <= e["line_no"] < keep_to:
                continue  # the window before or after states it, with more of its context
            if isinstance(e.get("group"), int) and e["group"] > 0:
                e["group"] += off  # a header's line (0 and below: markers, not lines)
            self.scan.fallback_entries.append(e)
        got = parse_runtime_log(text) if present is None or RKNN_TRIGGER in present else {}
        for k, v in got.items():
            if k in self.scan.rknn:
                continue
            if isinstance(v, dict) and "line_no" in v:
                v = dict(v, line_no=v["line_no"] + off)
            self.scan.rknn[k] = v
        self.parts = [over] if n_over else []
        self.start, self.count, self.chars = end - n_over, n_over, (len(over) + 1 if n_over else 0)
        self.keep_from = keep_to
        # the overlap lies in the lines fed into this window unless it is longer than them
        self.inherited = self.own if n_over <= self.own_lines else present
        self.own, self.own_lines = set(), 0


def _tail(text: str, max_lines: int, max_chars: int) -> Tuple[str, int]:
    """The last lines of a "\n"-joined text, and how many: at most max_lines lines, at most
    max_chars characters, never the first line (a window always moves on)."""
    n, q = 0, len(text)
    while n < max_lines:
        p = text.rfind("\n", 0, q)
        if p < 0 or len(text) - p - 1 > max_chars:
            break
        n, q = n + 1, p
    return (text[q + 1:] if n else ""), n


_SCANNERS: Dict[Tuple[str, ...], LineNeedles] = {}


def scan_one(name: str, chunks: Iterable[List[str]], signatures: Iterable[Any],
             catalogs: Optional[Any]) -> LogScan:
    """One pass over one log given as lists of consecutive lines (host.logstream chunks),
    every consumer fed from it: one needle scan of each chunk serves the signatures and the
    catalogs (catalog.chunkmatch)."""
    scan = LogScan(name)
    sig = SignatureMatcher(signatures, "runtime", name)
    win = _Windowed(scan)
    pasted = PastedReport()
    table = PastedTable()
    nvrm = PastedProcVersion()
    query = PastedQuery()
    run = None
    needles = set(sig.needles) | PARSER_NEEDLES
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
        win.feed(lines, text, PARSER_NEEDLES.intersection(chain.from_iterable(hits.values())))
        pasted.feed(lines, text)
        table.feed(lines, text)
        nvrm.feed(lines, text)
        query.feed(lines, text)
        if run is not None:
            run.feed(lines, text, hits)
        scan.lines += len(lines)
    if run is not None:
        scan.catalog_events = run.finish()
    win.flush()
    scan.nvsmi_report = pasted.text()
    scan.nvsmi_table = table.text()
    scan.nvrm_version_line = nvrm.line
    scan.nvsmi_query = query.text()
    scan.fallback_entries.sort(key=lambda e: (e["line_no"], e["runtime"]))
    scan.signature_events = sig.events
    if win.windows > 1:
        scan.notes.append(f"{name}: {scan.lines} lines read in {win.windows} windows of "
                          f"{WINDOW_CHARS >> 20} MiB (each overlapping the one before by up to "
                          f"{OVERLAP_LINES} lines) for the CPU-fallback and RKNN parsers")
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
                    cut: List[Dict[str, int]] = []
                    scan = scan_one(name, _checked(iter_log_chunks(path, strict, cut)), signatures,
                                    catalogs)
                    scan.cut_lines = cut
                    scans.append(scan)
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
