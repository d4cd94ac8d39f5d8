"""Log text as the catalogs read it: prefixes stripped, wrapped lines joined, needles found.

Kernel and runtime messages reach us in many wrappings (dmesg with and without timestamps,
`dmesg -T`, syslog and kern.log, journalctl short/short-iso/short-monotonic, rsyslog `#012`
escapes). `strip_prefix` leaves the message; `iter_lines` streams a log's lines;
`literal_needles` finds the literals a regex needs, and `blocks` cuts a log into the blocks that
contain one, so the regexes run only on lines that can match.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Iterator, List, Optional, Tuple

from ..lazyregex import lazy
from .needles import minimal_needles

try:  # Python 3.11+ keeps the regex parser private; 3.8-3.10 have sre_parse
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse as _sre_parse  # type: ignore[no-redef]

#: Log prefixes stripped before matching and counting: dmesg `[  12.345678]`, `dmesg -T`
#: `[Mon Mar  4 10:00:00 2024]`, syslog `Mar  4 10:00:00 host kernel:` (any locale's month), ISO/journal
#: short-iso `2024-03-04T10:00:00+0100 host kernel:`, journalctl short-monotonic.
_PREFIX_RES = [  # patterns, compiled only as _ANY_PREFIX (one regex: start-up compiles none)
    r"^<\d>",
    # the month is the locale's abbreviation (journalctl and rsyslog follow LC_TIME): `Mar`,
    # `nov`, `mär`, `déc.`
    r"^[^\W\d_]{3,4}\.? +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S+ (?:kernel|[\w.\-/]+(?:\[\d+\])?): ",
    (r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? \S+ "
     r"(?:kernel|[\w.\-/]+(?:\[\d+\])?): "),
    # dmesg `[  12.345678]`; with CONFIG_PRINTK_CALLER (Android GKI kernels) `[  12.345678][  T123]`
    # (kernel/printk/printk.c info_print_prefix); journalctl short-delta `[  12.345678 <    0.000123>]`
    r"^\[ *\d+\.\d+(?: < *\d+\.\d+>)?\](?:\[ *[TC]\d+\])? (?:\S+ kernel: )?",
    r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\] ",
    # `dmesg -H` / `--reltime` (util-linux dmesg.c, reltime): `[Jan18 08:23]` when the minute
    # changes, else the delta `[  +0.000031]`; `dmesg --time-format iso`:
    # `2024-01-18T08:23:45,123456+01:00 ` (a comma before the microseconds, no host)
    r"^\[(?:[^\W\d_]{3,4} ?\d{1,2} \d\d:\d\d| *[+-]\d+\.\d+)\] ",
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:?\d\d ",
    r"^kernel: ",
    # journalctl -o short-full `Mon 2024-03-04 10:00:00 CET host kernel: ` and -o short-unix
    # `1709546400.123456 host kernel: ` (man journalctl, --output)
    (r"^(?:[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+|\d{9,}\.\d+) \S+ "
     r"(?:kernel|[\w.\-/]+(?:\[\d+\])?): "),
    # Android logcat (liblog logprint.cpp android_log_formatLogLine; `logcat -v`, developer.android.com/tools/logcat):
    # threadtime `11-30 10:00:00.123  1234  1234 E RKNN    : ` ("%s %5d %5d %c %-8s: "; `-v year`,
    # `-v zone`, `-v uid` (a uid name before the pid), `-v epoch`/`monotonic` seconds), the tag
    # taken with it. A kernel line in logcat (`logcat -b kernel`, logd LogKlog) has the driver and
    # device as its tag (`W RKNPU fde40000.npu: swiotlb ...`): a tag with a space stays.
    (r"^(?:(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [+-]\d{4})?|\d+\.\d{3,9})"
     r" +(?:[a-z_]\w* +)?\d+ +\d+ [VDIWEFS] (?:[^\s:]+ *: )?"),
    # brief/time `E/RKNN    ( 1234): ` ("%c/%-8s(%5d): "), tag `E/RKNN    : `, thread `E( 1234: 1234) `
    (r"^(?:(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? +)?"
     r"(?:[VDIWEFS]/[^\s:(]+ *(?:\( *\d+\))?: |[VDIWEFS]\( *\d+(?:: *\d+)?\) )"),
    # Android Studio's Logcat window: `2023-01-01 10:00:00.123  1234-1240  RKNN  com.example.app  E  `
    # (date time pid-tid tag package priority; developer.android.com/studio/debug/logcat)
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ +\d+-\d+ +\S+(?: +\S+)? +[VDIWEFA] +",
    # before Dolphin (2022.1): `2022-02-28 15:00:36.365 31407-31507/com.example.app I/tflite: `
    # (date time pid-tid/package priority/tag; `?` for a package it could not name)
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ +\d+-\d+/[\w.:$?\-]+ [VDIWEFA]/[^\s:]+ *(?:\( *\d+\))?: ",
    # Kubernetes CRI log files (/var/log/pods, `crictl logs`): `2024-03-04T10:00:00.123456789Z stdout F `
    # (RFC3339Nano, stream, P(artial)/F(ull); kubernetes/design-proposals-archive node/kubelet-cri-logging.md);
    # `kubectl logs --timestamps` and `docker logs -t`: the timestamp alone
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:(?:stdout|stderr) [FP] )?",
]
#: docker's json-file log driver writes `{"log":"<line>\n","stream":"stderr","time":"..."}` per
#: line (docs.docker.com/engine/logging/drivers/json-file/): the message is the JSON string `log`.
_DOCKER_JSON = lazy(r'^\{ ?"log": ?"((?:[^"\\]|\\.)*)"')


#: The prefixes as one regex, alternative k+1 being _PREFIX_RES[k] (none has a capturing
#: group): where several could match (an ISO timestamp: journal short-iso, CRI, kubectl), the
#: first in list order wins, as in the ordered rounds; one call says which one, or that none does.
#: (compiled on first use: start-up stays free of it)
_ANY_PREFIX: "Optional[re.Pattern[str]]" = None


def strip_prefix(line: str) -> str:
    """The message of a log line without its dmesg/syslog/journald prefix(es): up to three
    rounds over the prefixes in order (syslog around dmesg: `Mar 4 ... kernel: [  1.2] msg`),
    each cut where it matches."""
    global _ANY_PREFIX
    s = line.strip()
    if s.startswith('{"log":'):
        m = _DOCKER_JSON.match(s)
        if m:
            try:
                s = json.loads('"' + m.group(1) + '"').strip()
            except ValueError:
                pass
    if _ANY_PREFIX is None:
        _ANY_PREFIX = re.compile("|".join("(" + p[1:] + ")" for p in _PREFIX_RES))
    match = _ANY_PREFIX.match
    m = match(s)
    if m is None:
        return s
    rounds, nxt = 1, 0  # the round, and the first prefix it may still cut
    while m is not None:
        k = m.lastindex - 1  # type: ignore[operator]
        if k < nxt:  # tried earlier in this round: the next round starts here
            if rounds == 3:
                break
            rounds += 1
        s, nxt = s[m.end():], k + 1
        m = match(s)
    return s.strip()


def split_lines(text: str) -> List[str]:
    """Log lines of a text (see `iter_lines`)."""
    return list(iter_lines(text.splitlines()))


def iter_lines(lines: Iterable[str]) -> Iterator[str]:
    """Log lines with rsyslog's `#012` (newline) escapes split and `#011` (tab) undone, and a
    message that a paste wrapped after a colon joined with its lower-case continuation (the
    continuation's own line stays, empty, so line numbers hold). Streams: one line held."""
    prev: Optional[str] = None
    for raw in lines:
        raw = raw.rstrip("\r\n")
        parts = raw.replace("#012", "\n").replace("#011", "\t").split("\n") if "#01" in raw else [raw]
        for line in parts:
            if prev is not None and prev.rstrip().endswith(":") and line[:1].islower() \
                    and strip_prefix(line) == line.strip():
                yield prev.rstrip() + " " + line.strip()
                prev = ""
                continue
            if prev is not None:
                yield prev
            prev = line
    if prev is not None:
        yield prev


def literal_needles(pattern: str, flags: int = 0) -> Optional[List[str]]:
    """Literal strings (lower-cased) of which every match of `pattern` contains at least one,
    or None when no such set of 4+ character strings is found. Used to skip lines that
    cannot match: a run of literals, or one literal per branch of an alternation. Remembered
    between runs (npu_doctor.regexmemo)."""
    from ..regexmemo import remembered

    return remembered("needles-v4", pattern, flags, lambda: _literal_needles(pattern, flags))


def _literal_needles(pattern: str, flags: int) -> Optional[List[str]]:
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except Exception:
        return None
    got = _literal_needles_parsed(parsed)
    if not got or min(map(len, got)) < 4:
        return None
    return _without_supersets({n.lower() for n in got})


#: Words of nearly every log line (kernel and runtime messages alike): a needle that is one of
#: them, or a piece of one ('evice' of `[Dd]evice`), lets most lines through the prefilter, so a
#: pattern's other literals make the better needle (`zeDeviceGet (hDevice=0x0` is found by
#: '=0x0', not by 'evice').
_COMMON_WORDS = ("device", "driver", "error", "failed", "failure", "status", "config", "access",
                 "alloc", "context", "result", "version", "code", "match", "backend", "cuda",
                 "torch", "display", "memory", "support", "unable", "could", "cannot", "invalid",
                 "load", "open", "init", "found", "return", "value", "buffer", "attribute",
                 # the tags and words of the runtimes' own logs: in a log of that runtime, the
                 # one a user brings, nearly every line holds them (`I RKNN: rknn_run ...`,
                 # `[HailoRT] [info] Configured network group ...`)
                 "rknn_", "rknpu", "hailo", "nvidia", "network")


def _needle_weight(needle: str) -> int:
    """How well a needle singles out lines: its length, less 3 for a common log word or a
    piece of one."""
    core = needle.strip().lower()
    common = any(core in w for w in _COMMON_WORDS) if core else True
    return len(needle) - (3 if common else 0)


def _set_score(needles: List[str]) -> Tuple[int, int]:
    """A needle set is as good as its weakest needle: by weight, then by length."""
    return min(map(_needle_weight, needles)), min(map(len, needles))


def _without_supersets(needles: Iterable[str]) -> List[str]:
    """The needles of a set that contain no other needle of it, sorted: a line holding
    'status: ' holds 'status:', so the shorter alone lets the same lines through."""
    return sorted(minimal_needles(needles))


#: Most strings a literal-only piece of a pattern may stand for (`_exact`): beyond it the
#: piece ends the needle instead of multiplying it.
_MAX_ALTS = 64


def _class_chars(items) -> Optional[List[str]]:
    """The characters of a parsed character class made only of literals (`[Dd]`), else None."""
    out = []
    for op, av in items:
        if str(op) != "LITERAL":
            return None
        out.append(chr(av))
    return out


def _exact(seq) -> Optional[List[str]]:
    """Every string a parsed (sub)pattern of literals, alternations, classes of literals and
    optional pieces of them matches (`(?:hailo|rknpu) ` -> ['hailo ', 'rknpu ']); None for any other construct or
    more than _MAX_ALTS strings."""
    alts = [""]
    for op, av in seq:
        sub = _piece(op, av)
        if sub is None or len(alts) * len(sub) > _MAX_ALTS:
            return None
        alts = [a + b for a in alts for b in sub]
    return alts


def _piece(op, av) -> Optional[List[str]]:
    """The strings one parsed item stands for when it is literal-only, else None."""
    name = str(op)
    if name == "LITERAL":
        return [chr(av)]
    if name == "SUBPATTERN":
        return _exact(av[-1])
    if name == "IN":
        return _class_chars(av)
    if name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] == 0 and av[1] == 1:  # `x?`
        sub = _exact(av[2])
        return None if sub is None else [""] + sub
    if name == "BRANCH":
        subs = [_exact(branch) for branch in av[1]]
        if any(sub is None for sub in subs):
            return None
        got = [x for sub in subs for x in sub]  # type: ignore[union-attr]
        return got if len(got) <= _MAX_ALTS else None
    return None


def _literal_needles_parsed(seq) -> Optional[List[str]]:
    """The best needle set of a parsed (sub)pattern: the one whose weakest needle singles out
    lines best (_needle_weight: the longest, common log words counting less). A literal-only
    piece (an alternation of words, `[Dd]`) joins the literals around it, one needle per
    string it stands for: `(?:hailo|rknpu) 0000` gives 'hailo 0000' and 'rknpu 0000', which a
    `[HailoRT]` line does not hold."""
    best: Optional[List[str]] = None
    alts = [""]

    def offer(cand: Optional[List[str]]) -> None:
        nonlocal best
        # a needle under 4 characters is no prefilter (literal_needles refuses it)
        if cand and min(map(len, cand)) >= 4 and (best is None or _set_score(cand) > _set_score(best)):
            best = cand

    for op, av in seq:
        sub = _piece(op, av)
        if sub is not None and len(alts) * len(sub) <= _MAX_ALTS:
            alts = [a + b for a in alts for b in sub]
            continue
        offer(sorted(set(alts)))
        alts = [""]
        name = str(op)
        if name == "SUBPATTERN":
            offer(_literal_needles_parsed(av[-1]))
        elif name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] >= 1:
            offer(_literal_needles_parsed(av[2]))
        elif name == "BRANCH":
            subs = [_literal_needles_parsed(branch) for branch in av[1]]
            if all(subs):
                offer(sorted({n for sub in subs for n in sub}))  # type: ignore[union-attr]
    offer(sorted(set(alts)))
    return best


def literal_needle_sets(pattern: str, flags: int = 0) -> List[List[str]]:
    """Every set of literal strings (lower-cased, 4+ characters) of which each match of
    `pattern` contains at least one: the literal runs the pattern always passes through, and
    one needle per branch of the alternations it always passes through. `[a-z]+ failed: -(\\d+)`
    gives [["failed: -"]]; `rknn_\\w+ (?:fail|error)` gives [["rknn_"], ["error", "fail"]].
    A line must hold one needle of every set to be worth the regex; [] when none is known.
    Remembered between runs (npu_doctor.regexmemo)."""
    from ..regexmemo import remembered

    return remembered("needle-sets-v3", pattern, flags, lambda: _needle_sets(pattern, flags))


def _needle_sets(pattern: str, flags: int) -> List[List[str]]:
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except Exception:
        return []
    sets: List[List[str]] = []

    def walk(seq) -> None:
        alts = [""]  # the strings the literal-only run so far stands for (_piece)
        for op, av in seq:
            sub = _piece(op, av)
            if sub is not None and len(alts) * len(sub) <= _MAX_ALTS:
                alts = [a + b for a in alts for b in sub]
                continue
            sets.append(alts)
            alts = [""]
            name = str(op)
            if name == "SUBPATTERN":
                walk(av[-1])
            elif name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] >= 1:
                walk(av[2])
            elif name == "BRANCH":
                subs = [_literal_needles_parsed(branch) for branch in av[1]]
                if all(subs):
                    sets.append(sorted({n for sub in subs for n in sub}))  # type: ignore[union-attr]
        sets.append(alts)

    walk(parsed)
    out: List[List[str]] = []
    for got in sets:
        low = _without_supersets({n.lower() for n in got})
        if low and min(map(len, low)) >= 4 and low not in out:
            out.append(low)
    return out


#: Lines searched together for needles.
BLOCK_LINES = 4096


def blocks(lines: Iterable[str]) -> Iterator[Tuple[int, List[str]]]:
    """(number of the first line, lines) in blocks of BLOCK_LINES: what the needle search and
    the log consumers work on, holding one block at a time."""
    block: List[str] = []
    start = 1
    for line in lines:
        block.append(line)
        if len(block) >= BLOCK_LINES:
            yield start, block
            start += len(block)
            block = []
    if block:
        yield start, block
