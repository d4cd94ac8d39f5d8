"""`npu-doctor capture`: a (redacted) snapshot of what the probes read and ran."""

from __future__ import annotations

import click

from ..errors import ConfigError, HostError, SnapshotError
from .common import _fail, _open_host, _progress_printer, config_loaded, host_options, plural, show_progress


@click.command()
@host_options
@click.option("-o", "--output", "output", default="npu-doctor-capture.tar.gz", show_default=True,
              metavar="PATH", help="Archive to write (.tar.gz/.tgz), or a directory: an "
                                   "existing empty one, or a path ending in '/'.")
@click.option("--no-redact", is_flag=True,
              help="Keep hostnames, serial numbers, MAC/IP addresses, user and home-directory "
                   "names and UUIDs (default: replace them with consistent placeholders).")
@click.option("--max-file-size", "max_mib", type=click.FloatRange(0.001, 4096), default=64.0,
              show_default=True, metavar="MiB", help="Leave out (and list) any file larger than this.")
@click.option("--no-self-check", is_flag=True,
              help="Do not replay the capture to confirm it gives the same facts and findings.")
def capture(snapshot, probe_dirs, rule_dirs, logs, output, no_redact, max_mib, no_self_check):
    """Capture what the probes read and ran on this host, as a snapshot.

    Runs the same probes as `check` through a recorder and writes exactly what they read
    and ran in the snapshot format: fs/ (symlinks kept, never pointing out of the tree),
    commands.toml, stat.toml (device nodes), logs/ (--log files), snapshot.toml. Then it
    replays the capture and says whether `check --snapshot` gives the same facts and
    findings. Personal and machine-identifying values are redacted by default; files and
    the archive are mode 0600. A summary of what was left out, and why, goes to stderr.

    \b
    Examples:
      npu-doctor capture -o board.tar.gz                 on the board
      npu-doctor check --snapshot board.tar.gz           on a laptop, later
      npu-doctor capture -o board.tar.gz --log run.log   include a runtime log
      npu-doctor capture --snapshot case/ -o clean.tgz   redact an existing snapshot
    """
    from ..capture import output_kind, run_capture
    from ..check import Config
    from ..outputs import OutputPathError
    from ..redact import KIND_NOUNS

    try:
        output_kind(output)   # refuse out.zip, /dev/full & co before any probing
        config = Config.load(probe_dirs, rule_dirs)
        config_loaded()
        host = _open_host(snapshot, list(logs))
        progress_on = show_progress()
        run_ = run_capture(host, config, output, redact=not no_redact,
                           max_file_bytes=int(max_mib * 1024 * 1024),
                           self_check=not no_self_check,
                           progress=_progress_printer(progress_on))
    except (ConfigError, SnapshotError, HostError, OutputPathError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{output}: cannot write capture ({e.strerror or e})")
    r = run_.result
    red = ", ".join(plural(n, *KIND_NOUNS.get(k, (k, k + "s"))) for k, n in sorted(r.redactions.items())
                    if n) or "nothing found"
    click.echo(f"npu-doctor: captured {plural(r.files, 'file')}, {plural(r.links, 'link')}, "
               f"{plural(r.placeholders, 'listed-only entry', 'listed-only entries')}, "
               f"{plural(r.commands, 'command')}, {plural(r.logs, 'log')} into {r.path} "
               f"({'redacted: ' + red if not no_redact else 'not redacted'})", err=True)
    if r.left_out:
        click.echo(f"npu-doctor: left out {plural(len(r.left_out), 'path')}:", err=True)
        for p, why in r.left_out[:50]:
            click.echo(f"  {p}: {why}", err=True)
        if len(r.left_out) > 50:
            click.echo(f"  ... and {len(r.left_out) - 50} more (snapshot.toml lists them all)", err=True)
    if r.truncated:
        click.echo(f"npu-doctor: cut {plural(len(r.truncated), 'log')} (listed in snapshot.toml; "
                   "`check --snapshot` reports it):", err=True)
        for m in r.truncated:
            click.echo(f"  {m}", err=True)
    if not no_self_check:
        diffs = run_.fact_diffs + run_.finding_diffs
        if not diffs:
            click.echo(f"npu-doctor: replay check: the capture gives the same facts and "
                       f"{plural(len(run_.live.findings), 'finding')} as this run", err=True)
        else:
            click.echo(f"npu-doctor: replay check: the capture differs from this run in "
                       f"{plural(len(diffs), 'place')}:", err=True)
            for d in diffs[:20]:
                click.echo(f"  {d[:200]}", err=True)
