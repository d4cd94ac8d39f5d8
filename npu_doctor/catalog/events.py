"""What a matched line becomes: templates filled from its named groups (with units), PCI
addresses and errno names spelled one way, and the passes over a log's events (a failure a
later line clears; several lines of one problem made one event)."""

from __future__ import annotations

import errno as _errno
from typing import Any, Dict, List, Optional, Tuple

from ..lazyregex import lazy

#: `{group}` / `{group|other}` / `{group:conv}` in an entry's message, subject and facts.
_TEMPLATE_RE = lazy(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\|[A-Za-z_][A-Za-z0-9_]*)*)(?::([a-z]+))?\}")


def apply_cleared(events: List[Dict[str, Any]], cleared: Dict[Tuple[str, str], List[str]]) -> None:
    """A failure followed by a line of one of its `cleared_by` entries (same device, when the
    lines name one) is benign: e.g. a firmware file missing, then a fallback name loaded."""
    for ev in events:
        keys = cleared.get((ev["catalog"], ev["entry"]))
        if not keys:
            continue
        for later in events:
            if later["catalog"] == ev["catalog"] and later["entry"] in keys \
                    and later["source"] == ev["source"] and later["line_no"] > ev["line_no"] \
                    and later.get("device") == ev.get("device"):
                ev["benign"] = True
                ev["cleared_by_line"] = f"{later['source']}:{later['line_no']}"
                ev.pop("rule", None)
                break


def apply_consequences(events: List[Dict[str, Any]]) -> None:
    """A line whose entry is `consequence_of` a rule, where another line raises that rule for
    the same vendor and device, is evidence of that finding, not a finding of its own: e.g.
    "RmInitAdapter failed!" after "Open nvidia.ko is only ready for use on Data Center GPUs".
    The line's rule moves to `consequence_rule`, `consequence_of_line` names the cause's line
    ("source:line") and the cause lists it under `also`. With no such cause the line keeps
    its rule. Works over the events of all logs of a host (a cause in dmesg, its consequence in
    an application log); same vendor (or, when a line names none, the same log); a device
    named by both lines must be the same. A chain (A, then B a consequence of A, then C of B)
    ends at the first cause; lines that name each other's rules leave one standing."""
    raising = [ev for ev in events if ev.get("rule") and not ev.get("grouped_into")]
    if not any(ev.get("consequence_of") for ev in raising):
        return
    # causes tried in this order: lines that are no consequence themselves, same log, earlier
    order = sorted(raising, key=lambda ev: (bool(ev.get("consequence_of")), ev["line_no"]))
    memo: Dict[int, Optional[Dict[str, Any]]] = {}

    def root_of(ev: Dict[str, Any], stack: set) -> Optional[Dict[str, Any]]:
        if id(ev) in memo:
            return memo[id(ev)]
        causes = ev.get("consequence_of") or ()
        found = None
        if causes:
            stack.add(id(ev))
            same_log = [p for p in order if p["source"] == ev["source"]]
            for p in same_log + [p for p in order if p["source"] != ev["source"]]:
                if p is ev or id(p) in stack or p["rule"] not in causes or not _related(ev, p):
                    continue
                found = root_of(p, stack) or p
                break
            stack.discard(id(ev))
        memo[id(ev)] = found
        return found

    demoted = [(ev, root_of(ev, set())) for ev in raising]
    for ev, root in demoted:
        if root is None:
            continue
        ev["consequence_rule"] = ev.pop("rule")
        ev["consequence_of_line"] = f"{root['source']}:{root['line_no']}"
        # the cause's finding is at least as severe as what it absorbed would have been
        # (rules.evaluate): a warning-level cause must not turn a failed run's exit code to 0
        rules_of = root.setdefault("consequence_rules", [])
        if ev["consequence_rule"] not in rules_of:
            rules_of.append(ev["consequence_rule"])
        if ev.get("severity"):
            root.setdefault("consequence_severities", []).append(ev["severity"])
        also = root.setdefault("also", [])
        also.append(f"{ev['message']} (a consequence)")
        also.extend(ev.pop("also", []))


def _device_of(ev: Dict[str, Any]) -> Optional[str]:
    for k in ("pci_address", "device"):
        if is_bdf(ev.get(k)):
            return full_bdf(ev[k])
    return None


def _related(ev: Dict[str, Any], cause: Dict[str, Any]) -> bool:
    """Whether `cause` can be the cause of `ev`: same vendor (or the same log when either
    line names none) and, when both name a device, the same device."""
    v1, v2 = ev.get("vendor"), cause.get("vendor")
    if v1 and v2:
        if v1 != v2:
            return False
    elif ev["source"] != cause["source"]:
        return False
    d1, d2 = _device_of(ev), _device_of(cause)
    return not (d1 and d2 and d1 != d2)


def group_by_subject(events: List[Dict[str, Any]]) -> None:
    """Several lines that raise one rule for one device are one finding: the first line that
    is no consequence (no `consequence_of`) keeps the rule, else the first line, and lists the
    others under `also` (a torch_npu "error code is 507033" printed before the "E30006" that
    caused it, on one line, is evidence of the E30006 finding, not its headline)."""
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for ev in events:
        if ev.get("rule") and ev.get("subject"):
            groups.setdefault((ev["rule"], ev["subject"]), []).append(ev)
    for group in groups.values():
        if len(group) < 2:
            continue
        head = next((ev for ev in group if not ev.get("consequence_of")), group[0])
        for ev in group:
            if ev is head:
                continue
            head.setdefault("also", []).append(ev["message"])
            ev["grouped_into"] = f"{head['source']}:{head['line_no']}"
            ev.pop("rule")


_BDF_RE = lazy(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?:0x)?(?P<bus>[0-9a-fA-F]{2}):(?:0x)?(?P<slot>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?$")


def is_bdf(text: object) -> bool:
    """Whether the text is a PCI address (`0000:3b:00.0`, `3b:00.0`, `0000:3b:00`)."""
    return isinstance(text, str) and _BDF_RE.match(text) is not None


def full_bdf(text: str) -> str:
    """A PCI address as the contract writes it (`0000:3b:00.0`): Xid lines print `0000:3b:00`,
    older drivers `3b:00.0`, Intel DMAR faults of v5.14-v5.15 `0x3b:0x00.0`. Anything that is no PCI
    address is returned as it was."""
    m = _BDF_RE.match(text)
    if not m:
        return text
    return f"{(m.group('domain') or '0000').lower()}:{m.group('bus').lower()}:{m.group('slot').lower()}.{m.group('fn') or '0'}"


# The kernel-internal codes of include/linux/errno.h: never returned to user space, but printed by
# the kernel's own lines ("probe with driver X failed with error -517", "-524" from a driver's
# init); Python's errno table has only the uapi ones.
_KERNEL_ERRNO = {
    512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND", 515: "ENOIOCTLCMD",
    516: "ERESTART_RESTARTBLOCK", 517: "EPROBE_DEFER", 518: "EOPENSTALE", 519: "ENOPARAM",
    521: "EBADHANDLE", 522: "ENOTSYNC", 523: "EBADCOOKIE", 524: "ENOTSUPP", 525: "ETOOSMALL",
    526: "ESERVERFAULT", 527: "EBADTYPE", 528: "EJUKEBOX", 529: "EIOCBQUEUED",
    530: "ERECALLCONFLICT", 531: "ENOGRACE",
}


def errno_name(value: str) -> str:
    """`-22` -> `EINVAL`, `-517` -> `EPROBE_DEFER`; the number itself when unknown."""
    try:
        n = abs(int(value))
    except ValueError:
        return value
    return _errno.errorcode.get(n) or _KERNEL_ERRNO.get(n, str(n))


def _group(groups: Dict[str, str], names: str) -> Optional[str]:
    """The value of `name`, or of the first of `a|b` that matched (alternatives of a pattern
    cannot share a group name)."""
    return next((groups[n] for n in names.split("|") if groups.get(n) is not None), None)


def complete(template: str, groups: Dict[str, str]) -> bool:
    """Whether every placeholder of the template has a value in `groups`."""
    return all(_group(groups, m.group(1)) is not None for m in _TEMPLATE_RE.finditer(template))


def fill(template: str, groups: Dict[str, str]) -> str:
    """`{group}` placeholders filled from named groups; an unknown one stays `?`."""
    return _TEMPLATE_RE.sub(lambda m: str(_convert(_group(groups, m.group(1)), m.group(2)) or "?"), template)


def fill_value(template: str, groups: Dict[str, str]) -> Any:
    """A fact value from a template: a lone `{g:int}`/`{g:kib}`/`{g:mib}` gives a number
    (KiB/MiB converted to bytes), otherwise a string; None when a group is missing."""
    m = _TEMPLATE_RE.fullmatch(template)
    if m:
        return _convert(_group(groups, m.group(1)), m.group(2))
    if any(_group(groups, x.group(1)) is None for x in _TEMPLATE_RE.finditer(template)):
        return None
    return fill(template, groups)


_UNITS = {"int": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


def _convert(value: Optional[str], conv: Optional[str]) -> Any:
    if value is None:
        return None
    if not conv:
        return value
    if conv in _UNITS:
        try:
            n = int(str(value).strip())
        except ValueError:
            return None
        if len(str(n)) > 30:
            return None
        return n * _UNITS[conv]
    if conv == "lower":
        return value.lower()
    if conv == "cudaver":  # CUDA's integer version: 11040 -> "11.4", 12020 -> "12.2"
        try:
            n = int(value)
        except ValueError:
            return None
        return f"{n // 1000}.{(n % 1000) // 10}" if 1000 <= n < 1000000 else None
    return value
