"""`npu-doctor explain CODE-OR-LINE`: what a vendor status code or a log line means.

Looks the query up in the catalogs (npu_doctor.catalogs): a pasted log line is matched as the
checks match logs; otherwise a code (`Xid 79`, `-8005`, `62`) or a mnemonic (`HAILO_TIMEOUT`,
`ZE_RESULT_ERROR_UNINITIALIZED`). Exit 0 when something was found, 1 when nothing was, 2 for
a bad catalog file.
"""

from __future__ import annotations

import json

import click

from ..errors import ConfigError
from .common import _fail


@click.command("explain")
@click.argument("query", metavar="CODE-OR-LINE", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR",
              help="Also the site catalogs in DIR (files with a [catalog] table); repeatable.")
def explain(query, fmt, rule_dirs):
    """What a vendor status code or a log line means, the rule it raises, the fix and the source.

    \b
    Examples:
      npu-doctor explain Xid 79
      npu-doctor explain HAILO_TIMEOUT
      npu-doctor explain -- -8005
      npu-doctor explain "apex 0000:01:00.0: Couldn't initialize interrupts: -28"
    """
    from ..catalog import fill, load_catalogs

    text = " ".join(query)
    if not text.strip():
        raise click.UsageError("give a status code, a mnemonic or a log line to explain")
    try:
        cs = load_catalogs(rule_dirs)
    except ConfigError as err:
        _fail(str(err))
    hits = cs.lookup(text)
    if fmt == "json":
        click.echo(json.dumps({"query": text, "matches": [dict(e.describe(), groups=g) for e, g in hits]},
                              indent=2, ensure_ascii=False))
        raise SystemExit(0 if hits else 1)
    if not hits:
        sigs = _signatures_matching(text)
        if sigs:
            for sig in sigs:
                click.echo(f"{sig.id}  [signature, {sig.file}]")
                click.echo("  a probe's collector reads this line (its rule decides with the facts around it);")
                click.echo("  `npu-doctor check --log FILE` on the log that holds it shows the finding")
            raise SystemExit(0)
        click.echo(f"nothing in the catalogs matches {text!r} "
                   "(try the code alone, the mnemonic, or the whole log line)")
        raise SystemExit(1)
    from ..catalog.lookup import fragment_regex

    word = fragment_regex(text)
    for n, (e, groups) in enumerate(hits):
        if n:
            click.echo("")
        head = " ".join(x for x in (e.mnemonic, f"({e.code})" if e.code and e.mnemonic else e.code) if x)
        click.echo(f"{head or e.key}  [{e.catalog}]")
        click.echo(f"  meaning:  {e.meaning}")
        if not groups:
            # found by a fragment (lookup): show the example line that holds it, when the
            # meaning does not, so the reader sees why this entry answers the query
            if not word.search(e.meaning):
                seen = next((x for x in e.examples if word.search(x)), None)
                if seen:
                    click.echo(f"  example:  {seen}")
        if groups and e.message:
            click.echo(f"  here:     {fill(e.message, groups)}")
        click.echo(f"  raises:   {e.rule} ({e.severity or 'rule default'})" if e.rule
                   else "  raises:   nothing (benign: informational, or a consequence of an earlier error)")
        for kind in ("now", "persist", "doc"):
            if e.fix.get(kind):
                label = {"now": "fix now", "persist": "make stay", "doc": "read"}[kind]
                click.echo(f"  {label + ':':<9} {fill(e.fix[kind], groups) if groups else e.fix[kind]}")
        click.echo(f"  source:   {e.source}")


def _signatures_matching(text: str):
    """The `[[signature]]` tables (probes/*.toml) whose regex matches the line."""
    from .. import registry
    from ..catalog import strip_prefix
    from ..probes import load_signatures

    try:
        registry.load_all()  # probe files name collectors, which must be known to load them
        sigs = load_signatures()
    except ConfigError:
        return []
    msg = strip_prefix(text)
    return [s for s in sigs if s.regex.search(msg) and not (s.unless is not None and s.unless.search(msg))]
