"""`npu-doctor rules list | explain`: the checks npu-doctor knows."""

from __future__ import annotations

import click

from ..errors import ConfigError
from .common import _fail


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx) -> None:
    """List the checks npu-doctor knows, or explain one."""
    from .grouphelp import show_short_usage_when_bare

    show_short_usage_when_bare(ctx)


@rules.command("list")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Extra rules files to load.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_list(rule_dirs, fmt):
    """Every rule id with its severity and title."""
    import json

    from ..rules import load_rules

    try:
        rs = load_rules(rule_dirs)
    except ConfigError as e:
        _fail(str(e))
    if fmt == "json":
        click.echo(json.dumps([{"id": r.id, "severity": r.severity, "title": r.title} for r in rs.rules], indent=2))
        return
    width = max((len(r.id) for r in rs.rules), default=10)
    for r in rs.rules:
        click.echo(f"{r.id.ljust(width)}  {r.severity:<7}  {r.title}")


@rules.command("explain")
@click.argument("rule_id", metavar="ID")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Extra rules files to load.")
def rules_explain(rule_id, rule_dirs):
    """What a rule checks, why it matters, and how to fix it."""
    from ..rules import load_rules

    try:
        rs = load_rules(rule_dirs)
    except ConfigError as e:
        _fail(str(e))
    rule = rs.get(rule_id)
    if rule is None:
        _fail(f"unknown rule id {rule_id!r} (see `npu-doctor rules list`)")
    click.echo(f"{rule.id} ({rule.severity}): {rule.title}\n")
    click.echo(rule.explain + "\n")
    fixes, seen_fix = [], set()
    # the catalog path's fixes are templates over each entry's own fix ({it.fix_now}): the
    # entries are listed below with theirs
    for f in [f for m in rule.matches if m.file != "catalogs" for f in m.fixes] + rule.fixes:
        if (f.kind, f.text.strip()) not in seen_fix:
            seen_fix.add((f.kind, f.text.strip()))
            fixes.append(f)
    if fixes:
        click.echo("Fixes ({placeholders} are filled in from the facts of each finding):")
        for f in fixes:
            click.echo(f"  [{f.kind}] {f.text.strip()}")
    if rule.docs:
        click.echo("Sources:")
        for d in rule.docs:
            click.echo(f"  {d}")
    for mid in rs.matrices_for(rule):
        path, desc = rs.matrix_info[mid]
        rows = rs.matrices[mid]
        click.echo(f"\nMatrix {mid}" + (f": {desc}" if desc else "") + f" ({len(rows)} rows, {path})")
        for row in rows:
            cells = ", ".join(f"{k}={_cell(v)}" for k, v in row.items() if k not in ("source", "date"))
            click.echo(f"  {cells}")
            click.echo(f"      source: {row.get('source')}" + (f" ({row['date']})" if row.get("date") else ""))
    from ..catalog import load_catalogs

    try:
        entries = [e for e in load_catalogs(rule_dirs).entries() if e.rule == rule.id]
    except ConfigError as e:
        _fail(str(e))
    if entries:
        click.echo(f"\nCatalog entries that raise it ({len(entries)}; `npu-doctor explain CODE` for one):")
        for entry in entries:
            head = " ".join(x for x in (entry.mnemonic, f"({entry.code})" if entry.code and entry.mnemonic
                                        else entry.code) if x)
            click.echo(f"  [{entry.catalog}] {head or entry.key}: {entry.meaning}")
    files = sorted({rule.file} | {m.file for m in rule.matches if m.file and m.file != "catalogs"})
    click.echo("\nDefined in " + ", ".join(files))


def _cell(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)
