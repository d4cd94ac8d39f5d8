"""`npu-doctor check`: one report and an exit status for CI."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError, HostError, SnapshotError
from .common import (
    _fail,
    _open_host,
    _progress_printer,
    _use_color,
    config_loaded,
    exit_for,
    host_options,
    show_progress,
)


@click.command()
@host_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "npd"]), default="text",
              show_default=True, help="Report format (npd: Node Problem Detector plugin, one line).")
@click.option("--select", multiple=True, metavar="ID",
              help="Report only these rule ids (comma list, shell patterns such as 'thermal-*'); repeatable.")
@click.option("--ignore", multiple=True, metavar="ID",
              help="Do not report these rule ids (comma list, shell patterns); repeatable.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--sample", "sample_s", type=click.FloatRange(0, 600), default=0.0, metavar="SECONDS",
              help="Measure CPU and accelerator utilisation over a window (default: no waiting).")
@click.option("-v", "--verbose", is_flag=True, help="Show every fact with its source, and failed probes.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour the text report (auto: on a terminal, unless NO_COLOR is set).")
@click.option("--collect-env", "collect_env", is_flag=True,
              help="Print the environment block for bug reports (what `python -m "
                   "torch.utils.collect_env` prints, for every framework) instead of the report.")
@click.option("--deep", is_flag=True, help="Also run a small built-in model through every installed "
              "runtime and device (subprocess, timeout, memory limit): placement, latency, counters.")
def check(snapshot, probe_dirs, rule_dirs, logs, fmt, select, ignore, fail_on, sample_s, verbose, color,
          collect_env, deep):
    """Check this host (or a snapshot) and report findings.

    \b
    Examples:
      npu-doctor check                               this machine
      npu-doctor check --log app.log                 and the runtime log of your app
      npu-doctor check --python ~/venvs/yolo/bin/python   and the app's Python environment
      npu-doctor check --snapshot board.tar.gz       a board captured with `capture`
      npu-doctor check --format json | jq .findings  for scripts (only JSON on stdout)
      npu-doctor check --collect-env                 the block to paste into a bug report
      npu-doctor check --fail-on warning             CI: exit 1 on warnings too

    \b
    Exit status:
      0    no finding at or above --fail-on
      1    at least one finding at or above --fail-on
      2    usage or configuration error (bad rules file, unreadable snapshot)
      130  interrupted (Ctrl-C)

    With --format npd (Node Problem Detector custom plugin): 0 OK, 1 problem, 2 unknown (only
    checks that could not be made, or a usage error); one line of at most 80 bytes naming the
    worst finding.
    """
    from ..check import Config, run_check
    from ..report import render_json, render_text, stdout_is_unicode

    if deep and snapshot:
        # the runs would happen on this machine and be reported as the board's
        _fail("--deep runs models on this machine's runtimes; it cannot apply to a snapshot "
              "(run `npu-doctor check --deep` on the board itself)")
    try:
        config = Config.load(probe_dirs, rule_dirs)
        config_loaded()
        from .ruleids import expand_rule_ids

        known = {r.id for r in config.rules.rules}
        select = expand_rule_ids(select, known, "--select")     # comma lists, `thermal-*`
        ignore = expand_rule_ids(ignore, known, "--ignore")
        host = _open_host(snapshot, list(logs))
        progress_on = show_progress()
        if sample_s and progress_on:
            click.echo(f"npu-doctor: sampling utilisation for {sample_s:g} s ...", err=True)
        result = run_check(host, config, select, ignore, progress=_progress_printer(progress_on),
                           sample_s=sample_s, deep=_deep_options(deep))
    except (ConfigError, SnapshotError, HostError) as e:
        if fmt == "npd":  # NPD shows stdout, not stderr
            click.echo(f"unknown: {e}"[:80])
        _fail(str(e))
    if fmt == "npd":
        from ..deploy.npd import status

        code, line = status(result.findings, fail_on)
        click.echo(line)
        sys.exit(code)
    if collect_env:
        from ..collect_env import render_collect_env

        sys.stdout.write(render_collect_env(result))
    elif fmt == "json":
        sys.stdout.write(render_json(result, ensure_ascii=not stdout_is_unicode()))
    else:
        sys.stdout.write(render_text(result, verbose=verbose, color=_use_color(color),
                                     unicode=stdout_is_unicode()))
    sys.stdout.flush()
    sys.exit(exit_for(result.findings, fail_on))


def _deep_options(deep: bool):
    """`run_check(deep=...)`: None without --deep; else the application's interpreter (the
    first --python) to run the probe model with."""
    if not deep:
        return None
    ctx = click.get_current_context(silent=True)
    pythons = ctx.meta.get("npu_doctor.python") if ctx is not None else None
    return {"python": pythons[0]} if pythons else {}
