"""Facts that catalog log events state: versions, limits, and devices named by kernel lines.

A catalog entry's `facts` table (npu_doctor.catalogs) turns named groups of a matched line
into contract facts (`drivers.<module>.version`, `sdks.<name>.version`, `limits.*`), with the
log line as the source. A fact a probe already read from the machine is kept: the file beats
the log. An entry with `accelerator = true` whose line names a PCI address (or only a
vendor) creates or enriches an `accelerators[]` entry, but only where sysfs was not scanned
(a snapshot of logs): on a machine whose /sys was read, the hardware is what /sys shows, and a
log (perhaps from another machine) must not add devices to it.

A line whose entry is `consequence_of` a rule that another line raises (same vendor and
device) is made evidence of that line's finding (catalog.events.apply_consequences).
"""

from __future__ import annotations

from ..catalog.events import apply_consequences, full_bdf, is_bdf
from ..facts import Facts
from ..host import Host
from ..registry import deriver


@deriver()
def derive_catalog_facts(facts: Facts, host: Host) -> None:
    for ev in facts.get("log_events") or []:
        if not isinstance(ev, dict) or not ev.get("catalog"):
            continue
        where = f"{ev.get('source')}:{ev.get('line_no')}"
        for path, value in (ev.get("facts") or {}).items():
            if facts.get(path) is None:
                facts.set(path, value, where)
        if ev.get("accelerator") and ev.get("vendor") and not facts.get("inventory.sysfs_scanned"):
            _add_accelerator(facts, ev, where)


@deriver()
def demote_consequences(facts: Facts, host: Host) -> None:
    """Lines that are the consequence of another line's finding (an entry's `consequence_of`)
    become evidence of that finding; here, where the events of every log meet."""
    events = facts.get("log_events")
    if isinstance(events, list):
        dicts = [ev for ev in events if isinstance(ev, dict)]
        apply_consequences([ev for ev in dicts if ev.get("catalog")] + _signature_causes(dicts))


def _signature_causes(events: list) -> list:
    """Probe-signature lines (not catalog lines) whose rule can be a cause: the signature's
    `cause_rule` field names the rule its line raises (probes/libraries.toml: a library the
    loader cannot open). A stand-in event carries that rule into apply_consequences, so a
    catalog line that is its consequence is demoted; the signature's own finding is unchanged."""
    out = []
    for ev in events:
        if ev.get("catalog") or not ev.get("cause_rule") or ev.get("source") is None:
            continue
        out.append({"rule": ev["cause_rule"], "source": ev["source"], "line_no": ev.get("line_no"),
                    "message": ev.get("line", ""), "vendor": ev.get("vendor")})
    return out


def _add_accelerator(facts: Facts, ev: dict, where: str) -> None:
    record = {"vendor": ev["vendor"]}
    pci = ev.get("pci_address") or (ev.get("device") if is_bdf(ev.get("device")) else None)
    if pci:
        record["pci_address"] = full_bdf(pci)
        if any(a.get("pci_address") == record["pci_address"] and a.get("vendor") not in (None, ev["vendor"])
               for a in facts.get("accelerators") or []):
            return  # another vendor's device already holds that address: not this one
    elif any(a.get("vendor") == ev["vendor"] for a in facts.get("accelerators") or []):
        return
    if ev.get("driver"):
        record["driver"] = {"name": ev["driver"]}
    facts.add_accelerator(record, source=where)
