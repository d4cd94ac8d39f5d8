"""The catalogs over a log in chunks of lines: what `CatalogSet.match_lines` does, at the cost
of one needle pass per chunk for the common line.

A log reaches the catalogs as `iter_lines` makes it (rsyslog `#012`/`#011` escapes undone,
a message wrapped after a colon joined with its continuation) and line by line
(`strip_prefix`, `CatalogSet.match_line`). Here the same happens to a chunk of lines at once:
the needles of every line come from one pass over the lower-cased chunk (needles.LineNeedles,
possibly shared with the `[[signature]]` matcher), a line is worth a look only when it holds
one needle of every needle set of some pattern (logtext.literal_needle_sets), and only the
chunks and lines that need it take the slow ways: a chunk holding `#01` is unescaped line by
line, a line ending with a colon is checked for a continuation (one regex over the chunk),
and a line that ends a chunk with a colon waits for the next chunk's first line.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .events import apply_cleared, group_by_subject
from .logtext import strip_prefix
from .needles import LineNeedles
from .schema import MAX_EVENTS_PER_ENTRY, MAX_SCAN_LINE

#: A line ending with a colon (and blanks): iter_lines may join the next line to it.
_COLON_END = re.compile(r":[^\S\n]*$", re.MULTILINE)


def unescape(lines: Iterable[str]) -> List[str]:
    """rsyslog's `#012` (newline) escapes split and `#011` (tab) undone, as iter_lines does."""
    out: List[str] = []
    for raw in lines:
        if "#01" in raw:
            out.extend(raw.replace("#012", "\n").replace("#011", "\t").split("\n"))
        else:
            out.append(raw)
    return out


def continues(prev: str, line: str) -> bool:
    """Whether iter_lines joins `line` to `prev`: prev ends with a colon, line starts in
    lower case and carries no log prefix of its own."""
    return prev.rstrip().endswith(":") and line[:1].islower() and strip_prefix(line) == line.strip()


def _holds(low: str, extra: List[List[str]]) -> bool:
    """Whether the lower-cased line holds one needle of every set."""
    for alts in extra:  # loops, not all(any(...)): this runs for every candidate line
        for x in alts:
            if x in low:
                break
        else:
            return False
    return True


def _any_held(low: str, checked: List[Tuple[int, Any, List[List[str]]]]) -> bool:
    """Whether the lower-cased line holds one needle of every further set of some pattern."""
    for _order, _m, extra in checked:
        if _holds(low, extra):
            return True
    return False


#: The scopes a check's logs are matched with: the kernel log (collectors.logs) and runtime
#: logs (collectors.logscan). Their indexes are kept in the configuration cache.
STANDARD_SCOPES = (("kernel",), ("kernel", "runtime"))


class _Index:
    """Per needle, the patterns (of the scopes asked for) it is the prefilter of, with the
    needle sets beyond it that the line must also satisfy; built once per CatalogSet and
    scopes, and pickled with it (CatalogSet.__getstate__)."""

    def __init__(self, cs: Any, scopes: Sequence[str]) -> None:
        allowed = set(scopes) | {"any"}
        self.by_needle: Dict[str, List[Tuple[int, Any, List[List[str]]]]] = {}
        self.always: List[Tuple[int, Any]] = []
        for order, m in enumerate(cs.matchers):
            if m.scope not in allowed:
                continue
            if not m.needles:
                self.always.append((order, m))
                continue
            for n in m.needles:
                self.by_needle.setdefault(n, []).append((order, m, m.extra))
        self.needles = LineNeedles(self.by_needle)
        self._matchers: List[Any] = cs.matchers
        self.orders = {id(m): (order, m) for order, m in enumerate(cs.matchers)}
        #: needles of a line -> (patterns to run, patterns to run if their other needle sets
        #: are in the line too)
        self.plans: Dict[Tuple[str, ...], Tuple[List[Any], List[Tuple[int, Any, List[List[str]]]]]] = {}

    def __getstate__(self) -> Dict[str, Any]:
        # pickled on its own (CatalogSet keeps it as a blob until a log of these scopes is
        # matched): the matchers are named by position, and `attach` puts them back; plans
        # is a cache
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("orders", "plans", "_matchers", "by_needle", "always")}
        state["_by_needle_orders"] = {n: [(order, extra) for order, _m, extra in lst]
                                      for n, lst in self.by_needle.items()}
        state["_always_orders"] = [order for order, _m in self.always]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.plans = {}

    def attach(self, matchers: List[Any]) -> "_Index":
        """This index read back (`__getstate__`), with the matchers of its CatalogSet."""
        self._matchers = matchers
        got: Dict[str, List[Tuple[int, List[List[str]]]]] = self.__dict__.pop("_by_needle_orders")
        self.by_needle = {n: [(order, matchers[order], extra) for order, extra in lst] for n, lst in got.items()}
        self.always = [(order, matchers[order]) for order in self.__dict__.pop("_always_orders")]
        self.orders = {id(m): (order, m) for order, m in enumerate(matchers)}
        return self

    def lookup(self, needles: Tuple[str, ...]) -> Tuple[List[Any], List[Tuple[int, Any, List[List[str]]]]]:
        """The plan of a line holding these needles (cached per needle tuple)."""
        got = self.plans.get(needles)
        return got if got is not None else self.plan(needles)

    def plan(self, needles: Tuple[str, ...]) -> Tuple[List[Any], List[Tuple[int, Any, List[List[str]]]]]:
        fixed: Dict[int, Any] = dict(self.always)
        checked: Dict[int, Tuple[int, Any, List[List[str]]]] = {}
        for n in needles:
            for order, m, extra in self.by_needle.get(n, ()):
                if extra:
                    checked[order] = (order, m, extra)
                else:
                    fixed[order] = m
        got = ([fixed[k] for k in sorted(fixed)], [checked[k] for k in sorted(checked) if k not in fixed])
        if len(self.plans) >= 4096:  # a log of ever new needle combinations: start afresh
            self.plans.clear()
        self.plans[needles] = got
        return got


class LogClassifier:
    """`feed(lines)` chunk after chunk, then `finish()`: the log_events `match_lines` gives.

    `feed` takes consecutive raw lines of one log (no line break inside a line) and, when the
    caller has them, their "\\n"-joined text and its scan (`LineNeedles.scan` of the lower-cased
    text by a scanner that holds at least `needles.needles`): a caller that also scans for
    other needles (logscan: the `[[signature]]` prefilter) shares one pass."""

    def __init__(self, cs: Any, source: str, scopes: Iterable[str], log_scope: str) -> None:
        self.cs = cs
        self.source, self.log_scope = source, log_scope
        self.scopes = tuple(scopes)
        self._scope_set = set(self.scopes)
        self.index: _Index = cs.chunk_index(tuple(sorted(self._scope_set)))
        self.needles = self.index.needles
        self.no = 1  # the number (after unescaping) of the next line fed
        self.tail: Optional[str] = None  # a last line ending with a colon, not yet matched
        self.events: List[Dict[str, Any]] = []
        self._by_key: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self._per_entry: Dict[Tuple[str, str], int] = {}
        #: `by_device` lines not (yet) known to be about an accelerator: device -> hits
        self._pending: Dict[str, List[Tuple[Any, Dict[str, str], int, str, str]]] = {}

    def feed(self, lines: List[str], text: Optional[str] = None,
             hits: Optional[Dict[int, List[str]]] = None) -> None:
        if not lines:
            return
        if text is None:
            text = "\n".join(lines)
        if "#01" in text:
            lines = unescape(lines)
            text, hits = "\n".join(lines), None
        plain = text.count("\n") == len(lines) - 1  # False: some line holds a "\n" itself
        if hits is None or not plain:
            hits = self.needles.scan(text.lower()) if plain else \
                {i: got for i, got in ((i, self.needles.present(s.lower())) for i, s in enumerate(lines)) if got}
        no = self.no
        changed: Dict[int, str] = {}  # joined lines, and "" for the continuations they took
        if self.tail is not None:
            tail, self.tail = self.tail, None
            if continues(tail, lines[0]):
                self._line(no - 1, tail.rstrip() + " " + lines[0].strip(), None)
                changed[0] = ""
            else:
                self._line(no - 1, tail, None)
        last = len(lines) - 1
        for i in self._colon_lines(lines, text, plain):
            if i < last and i not in changed and continues(lines[i], lines[i + 1]):
                changed[i] = lines[i].rstrip() + " " + lines[i + 1].strip()
                changed[i + 1] = ""
        hold = last not in changed and lines[last].rstrip().endswith(":")
        if self.index.always:
            todo: Iterable[int] = range(len(lines))
        elif changed:
            todo = sorted(set(hits) | set(changed))
        else:
            todo = sorted(hits)
        lookup = self.index.lookup
        for i in todo:
            if hold and i == last:
                continue
            line = changed.get(i) if changed else None
            if line is None:
                got = hits.get(i, ())
                plan = lookup(tuple(got))
                # most lines that hold a needle hold no pattern's every needle set: the plan
                # settles them without a look at the line, or with a look for the other sets
                if not plan[0] and (not plan[1] or not _any_held(lines[i].lower(), plan[1])):
                    continue
                self._line(no + i, lines[i], got, plan)
            else:
                self._line(no + i, line, None)
        if hold:
            self.tail = lines[last]
        self.no = no + len(lines)

    @staticmethod
    def _colon_lines(lines: List[str], text: str, plain: bool) -> List[int]:
        if not plain:
            return [i for i, s in enumerate(lines) if s.rstrip().endswith(":")]
        out: List[int] = []
        pos = li = 0
        for m in _COLON_END.finditer(text):
            li += text.count("\n", pos, m.start())
            pos = m.start()
            out.append(li)
        return out

    def _candidates(self, line: str, needles: Optional[Iterable[str]], plan: Any = None) -> List[Any]:
        """Patterns worth running on the line: one needle of each of their sets in it. `plan`:
        the index's plan for the line's needles, when the caller has it."""
        index = self.index
        if plan is None:
            if needles is None:
                needles = self.needles.present(line.lower()) if line else ()
            plan = index.lookup(tuple(needles))
        fixed, checked = plan
        if not checked:
            return fixed
        low = line.lower()
        keep = [(order, m) for order, m, extra in checked if _holds(low, extra)]
        if not keep:
            return fixed
        keep.extend(index.orders[id(m)] for m in fixed)
        keep.sort(key=lambda om: om[0])
        return [m for _order, m in keep]

    def _line(self, n: int, raw: str, needles: Optional[Iterable[str]], plan: Any = None) -> None:
        cands = self._candidates(raw, needles, plan)
        if not cands:
            return
        if len(raw) > MAX_SCAN_LINE:
            raw = raw[:MAX_SCAN_LINE]
        msg = strip_prefix(raw)
        for entry, groups in self.cs._match(msg, self._scope_set, cands):
            device = self.cs.pending_device(entry, groups)
            if device is not None:
                held = self._pending.setdefault(device, [])
                if len(held) < MAX_EVENTS_PER_ENTRY:
                    held.append((entry, groups, n, raw, msg))
                continue
            self._add(entry, groups, n, raw, msg)

    def _add(self, entry: Any, groups: Dict[str, str], n: int, raw: str, msg: str) -> None:
        """One match: a new event, or one more count of the same message."""
        k = (entry.catalog, entry.key, msg)
        ev = self._by_key.get(k)
        if ev is not None:
            ev["count"] += 1
            return
        ek = (entry.catalog, entry.key)
        if self._per_entry.get(ek, 0) >= MAX_EVENTS_PER_ENTRY:
            return
        self._per_entry[ek] = self._per_entry.get(ek, 0) + 1
        ev = self.cs._event(entry, groups, self.source, n, raw, self.log_scope)
        self._by_key[k] = ev
        self.events.append(ev)

    def _resolve_pending(self) -> None:
        """The `by_device` lines whose device an accelerator driver's line names: events, with
        that driver as their module (the others speak of devices that are no accelerator)."""
        if not self._pending:
            return
        drivers = self.cs.drivers
        owner: Dict[str, str] = {}
        for ev in self.events:
            name = ev.get("driver") if ev.get("driver") in drivers else ev.get("module")
            dev = ev.get("device")
            if isinstance(name, str) and name in drivers and dev and dev not in owner:
                owner[dev] = name
        added = False
        for device, held in self._pending.items():
            driver = owner.get(device)
            if driver is None:
                continue
            for entry, groups, n, raw, msg in held:
                self._add(entry, dict(groups, module=driver), n, raw, msg)
                added = True
        self._pending = {}
        if added:
            self.events.sort(key=lambda ev: ev["line_no"])

    def finish(self) -> List[Dict[str, Any]]:
        """The events, counted, cleared and grouped as match_lines returns them."""
        if self.tail is not None:
            tail, self.tail = self.tail, None
            self._line(self.no - 1, tail, None)
        self._resolve_pending()
        events = self.events
        apply_cleared(events, self.cs._cleared)
        group_by_subject(events)
        for ev in events:
            if ev["count"] > 1:
                ev["message"] += f" ({ev['count']} times)"
        return events
