"""`npu-doctor fix`: show, and with --apply perform, the sysfs writes that fix current
findings; hints that work as written (live vs snapshot, root or not, the executable's path)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import click

from ..errors import ConfigError, HostError, SnapshotError
from .common import EXIT_OK, EXIT_USAGE, _fail, _open_host, config_loaded, host_options
from .selfcmd import self_command


def _hint(snapshot, writes) -> str:
    """What to do next, for this context."""
    if snapshot:
        lines = ["These writes are for the board the snapshot was taken on; nothing is written "
                 "from a snapshot. On that board, run `npu-doctor fix` to see them and, as root, "
                 "`npu-doctor fix --apply` to perform them, or write them by hand:"]
        lines += [f"  echo {w.value} | sudo tee {w.path}" for w in writes]
        return "\n".join(lines)
    return f"Run `{self_command('fix', '--apply')}` to write these."


@click.command()
@host_options
@click.option("--apply", "do_apply", is_flag=True, help="Perform the writes (root, live host only).")
@click.option("--select", multiple=True, metavar="ID",
              help="Only fixes of these rule ids (comma list, shell patterns); repeatable.")
@click.option("--ignore", multiple=True, metavar="ID",
              help="Not the fixes of these rule ids (comma list, shell patterns); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: {writes: [{rule, subject, path, current, value, "
                                      "result}], applied, hint}.")
def fix(snapshot, probe_dirs, rule_dirs, logs, do_apply, select, ignore, fmt):
    """Show, and with --apply perform, the sysfs writes that fix current findings.

    Only structured fixes are applied (for example power/control = on for
    runtime-autosuspend); everything else stays advice in `npu-doctor check`. Writes last
    until reboot: the check's `make it stay` lines say how to persist them.
    """
    from ..check import Config, run_check
    from ..fix import apply, planned_writes
    from .ruleids import expand_rule_ids

    try:
        config = Config.load(probe_dirs, rule_dirs)
        config_loaded()
        known = [r.id for r in config.rules.rules]
        sel = expand_rule_ids(select, known, "--select")
        ign = expand_rule_ids(ignore, known, "--ignore")
        if do_apply and snapshot:
            raise ConfigError("--apply writes to this host's /sys; it cannot apply to a snapshot "
                              "(run `npu-doctor fix` without --apply to see the writes)")
        host = _open_host(snapshot, list(logs))
        result = run_check(host, config, select=sel, ignore=ign)
    except (ConfigError, SnapshotError, HostError) as e:
        _fail(str(e))
    writes = planned_writes(result)
    doc: Dict[str, Any] = {"host": {"source": "snapshot" if snapshot else "live", "path": snapshot},
                           "writes": [], "applied": False, "hint": ""}

    def rows() -> List[Dict[str, Any]]:
        return [{"rule": w.rule, "subject": w.subject, "path": w.path, "current": w.current,
                 "value": w.value, **({"result": w.result} if w.result else {})} for w in writes]

    def done(code: int) -> None:
        if fmt == "json":
            doc["writes"] = rows()
            sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        sys.exit(code)

    if not writes:
        if fmt == "text":
            click.echo("Nothing to write: no current finding has a sysfs fix.")
        done(EXIT_OK)
    if fmt == "text":
        for w in writes:
            click.echo(f"{w.rule} [{w.subject}]: {w.path}: {w.current or '?'} -> {w.value}")
    if not do_apply:
        doc["hint"] = _hint(snapshot, writes)
        if fmt == "text":
            click.echo("\n" + doc["hint"])
        done(EXIT_OK)
    if os.geteuid() != 0:
        msg = ("--apply needs root (sysfs attributes are root-writable): "
               + self_command("fix", "--apply"))
        if fmt == "json":
            doc["hint"] = msg
            click.echo(f"npu-doctor: error: {msg}", err=True)
            done(EXIT_USAGE)
        _fail(msg)
    failed = apply(writes)
    doc["applied"] = True
    if fmt == "text":
        for w in writes:
            click.echo(f"{w.path}: {w.result}")
    done(1 if failed else EXIT_OK)
