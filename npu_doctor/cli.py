"""Command line: `npu-doctor check | rules | ...` (click).

Exit codes of check (ARCHITECTURE.md): 0 nothing at or above --fail-on, 1 findings at or
above it, 2 usage or configuration error. Errors are one line on stderr, never a traceback;
stdout carries only the report, so `--format json` output always parses.
"""

from __future__ import annotations

import os
import sys
from typing import List, NoReturn, Optional

import click

from . import __version__
from .errors import ConfigError, HostError, NpuDoctorError, SnapshotError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _fail(msg: str) -> "NoReturn":
    click.echo(f"npu-doctor: error: {msg}", err=True)
    sys.exit(EXIT_USAGE)


def _use_color(mode: str, stream=None) -> bool:
    if mode == "never":
        return False
    if mode == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def _progress_printer(enabled: bool):
    def progress(msg: str) -> None:
        if enabled:
            click.echo(f"npu-doctor: {msg} ...", err=True)
    return progress


def _open_host(snapshot: Optional[str], logs: List[str]):
    from .host import open_host

    return open_host(snapshot, logs)


_HOST_OPTIONS = [
    click.option("--snapshot", "snapshot", metavar="PATH",
                 help="Read a snapshot (directory or .tar.gz) instead of this host."),
    click.option("--probes", "probe_dirs", multiple=True, metavar="DIR",
                 help="Extra probe specs (*.toml) to load; repeatable."),
    click.option("--rules", "rule_dirs", multiple=True, metavar="DIR",
                 help="Extra rules files (*.toml) to load; repeatable."),
    click.option("--log", "logs", multiple=True, metavar="FILE",
                 type=click.Path(exists=True, dir_okay=False, readable=True),
                 help="A runtime or compiler log to scan for CPU fallback and errors; repeatable."),
]


def host_options(fn):
    for opt in reversed(_HOST_OPTIONS):
        fn = opt(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="npu-doctor")
def main() -> None:
    """Find why a model runs slowly, or not on the NPU at all.

    npu-doctor checks the environment of an NPU or AI accelerator: firmware, driver, runtime
    and toolkit versions; shared libraries the SDK cannot load; thermal throttling; runtime
    power management; frequency governors; device-node permissions. Each finding comes with
    its evidence and the fix.

    \b
    Examples:
      npu-doctor check                         report on this machine
      npu-doctor check --format json           the same, for tools (schema npu-doctor/report/v1)
      npu-doctor check --snapshot board.tar.gz replay a board captured elsewhere
      npu-doctor check --log run.log           also scan a runtime log for CPU fallback
      npu-doctor rules list                    every check npu-doctor knows
      npu-doctor rules explain runtime-autosuspend
      npu-doctor capture -o board.tar.gz       bring this board home (redacted snapshot)
      npu-doctor lock -o npu-env.lock          pin the validated stack
      npu-doctor verify npu-env.lock           drift since the lock (exit 1 on an error)
    """


@main.command()
@host_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Report format.")
@click.option("--select", multiple=True, metavar="ID", help="Report only these rule ids; repeatable.")
@click.option("--ignore", multiple=True, metavar="ID", help="Do not report these rule ids; repeatable.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--sample", "sample_s", type=click.FloatRange(0, 600), default=0.0, metavar="SECONDS",
              help="Measure CPU and accelerator utilisation over a window (default: no waiting).")
@click.option("-v", "--verbose", is_flag=True, help="Show every fact with its source, and failed probes.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour the text report (auto: on a terminal, unless NO_COLOR is set).")
@click.option("--deep", is_flag=True, help="Also run a small built-in model through every installed "
              "runtime and device (subprocess, timeout, memory limit): placement, latency, counters.")
def check(snapshot, probe_dirs, rule_dirs, logs, fmt, select, ignore, fail_on, sample_s, verbose, color, deep):
    """Check this host (or a snapshot) and report findings.

    \b
    Exit status:
      0  no finding at or above --fail-on
      1  at least one finding at or above --fail-on
      2  usage or configuration error (bad rules file, unreadable snapshot)
    """
    from .check import Config, run_check
    from .report import render_json, render_text, stdout_is_unicode
    from .rules import SEVERITY_RANK

    try:
        config = Config.load(probe_dirs, rule_dirs)
        known = {r.id for r in config.rules.rules}
        for rid in list(select) + list(ignore):
            if rid not in known:
                raise ConfigError(f"unknown rule id {rid!r} (see `npu-doctor rules list`)")
        host = _open_host(snapshot, list(logs))
        show_progress = sys.stderr.isatty() or bool(os.environ.get("NPU_DOCTOR_PROGRESS"))
        if sample_s and show_progress:
            click.echo(f"npu-doctor: sampling utilisation for {sample_s:g} s ...", err=True)
        result = run_check(host, config, select, ignore, progress=_progress_printer(show_progress),
                           sample_s=sample_s, deep={} if deep else None)
    except (ConfigError, SnapshotError) as e:
        _fail(str(e))
    except HostError as e:
        _fail(str(e))
    if fmt == "json":
        sys.stdout.write(render_json(result))
    else:
        sys.stdout.write(render_text(result, verbose=verbose, color=_use_color(color),
                                     unicode=stdout_is_unicode()))
    sys.stdout.flush()
    if fail_on == "never":
        sys.exit(EXIT_OK)
    threshold = SEVERITY_RANK[fail_on]
    worst = max((SEVERITY_RANK[f.severity] for f in result.findings), default=0)
    sys.exit(EXIT_FINDINGS if worst >= threshold else EXIT_OK)


@main.group()
def rules() -> None:
    """List the checks npu-doctor knows, or explain one."""


@rules.command("list")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Extra rules files to load.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_list(rule_dirs, fmt):
    """Every rule id with its severity and title."""
    import json

    from .rules import load_rules

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
    from .rules import load_rules

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
    for f in [f for m in rule.matches for f in m.fixes] + rule.fixes:
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
    from .catalog import load_catalogs

    try:
        entries = [e for e in load_catalogs().entries() if e.rule == rule.id]
    except ConfigError as e:
        _fail(str(e))
    if entries:
        click.echo(f"\nCatalog entries that raise it ({len(entries)}; `npu-doctor explain CODE` for one):")
        for e in entries:
            head = " ".join(x for x in (e.mnemonic, f"({e.code})" if e.code and e.mnemonic else e.code) if x)
            click.echo(f"  [{e.catalog}] {head or e.key}: {e.meaning}")
    files = sorted({rule.file} | {m.file for m in rule.matches if m.file and m.file != "catalogs"})
    click.echo("\nDefined in " + ", ".join(files))


def _cell(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


from . import cli_watch  # noqa: E402,F401  (registers `watch` and `fix`)
from . import cli_model  # noqa: E402,F401  (registers `model`)
from . import cli_explain  # noqa: E402,F401  (registers `explain`)


def _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs):
    """(host, check result) for lock/verify: the same probes as `check`."""
    from .check import Config, run_check

    config = Config.load(probe_dirs, rule_dirs)
    host = _open_host(snapshot, list(logs))
    show_progress = sys.stderr.isatty() or bool(os.environ.get("NPU_DOCTOR_PROGRESS"))
    return host, run_check(host, config, progress=_progress_printer(show_progress))


@main.command()
@host_options
@click.option("-o", "--output", "output", default="npu-env.lock", show_default=True,
              metavar="FILE", help="Where to write the lockfile ('-' for stdout).")
def lock(snapshot, probe_dirs, rule_dirs, logs, output):
    """Pin this host's accelerator stack in a lockfile (TOML).

    Records OS id/version, kernel release, libc, each accelerator with its driver and firmware
    versions and tunables (power/control, governors), kernel module versions (drivers.*),
    SDK and runtime versions (sdks.*), the Python distributions of accelerator SDKs, and
    sha256 of the SDK libraries and firmware files the probes found. What is locked and how
    a difference is graded is data: npu_doctor/lockspec.toml.

    The same machine gives a byte-identical file (sorted keys, no timestamp); the file is
    replaced atomically, so an interrupted lock leaves the previous one intact. A symlink
    is followed and its target replaced; a device, fifo, socket or directory is refused.

    \b
    Examples:
      npu-doctor lock                               write ./npu-env.lock for this host
      npu-doctor lock -o /etc/npu-env.lock
      npu-doctor lock --snapshot board.tar.gz -o golden.lock
    """
    from .lock import (OutputPathError, build_manifest, count_locked, dumps, load_spec, plural,
                       resolve_output, write_atomic)

    try:
        if output != "-":
            resolve_output(output, "lockfile")   # refuse /dev/full & co before any probing
        spec = load_spec()
        host, result = _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs)
        manifest = build_manifest(result.facts, host, spec)
    except (ConfigError, SnapshotError, HostError, OutputPathError) as e:
        _fail(str(e))
    data = dumps(manifest)
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        write_atomic(output, data)
    except OutputPathError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{output}: cannot write lockfile ({e.strerror or e})")
    arch = manifest["lock"].get("arch") or "architecture unknown, not recorded"
    click.echo(f"npu-doctor: locked {plural(count_locked(manifest), 'value')} "
               f"({arch}) in {output}", err=True)


@main.command()
@click.argument("lockfile", metavar="LOCKFILE", default="npu-env.lock")
@host_options
@click.option("--ignore", "ignore_paths", multiple=True, metavar="PATH",
              help="A lock path allowed to float (prefix or shell pattern per key, e.g. "
                   "'sdks.*.build', 'accelerators.*.power.control', python.packages); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Report format (json: the check report schema, findings "
                                      "are lock-drift, plus a 'lock' section).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a difference at or above this severity is found.")
def verify(lockfile, snapshot, probe_dirs, rule_dirs, logs, ignore_paths, fmt, fail_on):
    """Compare this host (or a snapshot) with a lockfile; report each difference.

    Each difference is a `lock-drift` finding: what changed, from what, to what, and its
    severity (driver, firmware, kernel, libc, SDK version or library content: error;
    a tunable such as power/control or a governor: warning; a newly installed SDK package:
    info). See `npu-doctor rules explain lock-drift`.

    \b
    Exit status:
      0  no difference at or above --fail-on
      1  at least one difference at or above --fail-on
      2  usage error, or a lockfile that is unreadable, truncated, of an unknown schema
         or for another architecture

    \b
    Examples:
      npu-doctor verify npu-env.lock
      npu-doctor verify npu-env.lock --ignore 'sdks.*.build' --fail-on warning
      npu-doctor verify golden.lock --snapshot board.tar.gz --format json
    """
    import json

    from .lock import (LockfileError, build_manifest, check_arch, count_locked, diff,
                       drift_findings, load_spec, parse_ignore, plural, read_lockfile)
    from .rules import SEVERITY_RANK, load_rules

    try:
        for p in ignore_paths:
            parse_ignore(p)
        locked = read_lockfile(lockfile)
        spec = load_spec()
        host, result = _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs)
        current = build_manifest(result.facts, host, spec)
        arch_note = check_arch(locked, current, lockfile,
                               f"snapshot {snapshot}" if snapshot else "this host")
        rule = load_rules(rule_dirs).get("lock-drift")
        rule_fixes = []
        if rule is not None:
            rule_fixes = [{"kind": f.kind, "text": f.text.strip()} for f in rule.fixes]
            rule_fixes += [{"kind": "doc", "text": d} for d in rule.docs]
        drifts = diff(locked, current, spec, ignore_paths)
        findings = drift_findings(drifts, lockfile, rule.title if rule else "", rule_fixes)
    except (ConfigError, SnapshotError, HostError, LockfileError) as e:
        _fail(str(e))
    hdr = locked["lock"]
    if fmt == "json":
        doc = result.to_json()
        doc["findings"] = [f.to_json() for f in findings]
        doc["lock"] = {"path": lockfile, "schema": hdr.get("schema"),
                       "tool_version": hdr.get("tool_version"), "arch": hdr.get("arch"),
                       "locked_values": count_locked(locked), "differences": len(findings),
                       "ignored": list(ignore_paths),
                       "arch_compared": arch_note is None,
                       "notes": [arch_note] if arch_note else []}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        where = f"snapshot {snapshot}" if snapshot else "this host"
        click.echo(f"npu-doctor verify: {where} against {lockfile} "
                   f"(npu-doctor {hdr.get('tool_version')}, "
                   f"{hdr.get('arch') if hdr.get('arch') not in (None, 'unknown') else 'architecture unknown'}, "
                   f"{plural(count_locked(locked), 'locked value')})")
        if arch_note:
            click.echo(f"  ? note    {arch_note}")
        marks = {"error": "x", "warning": "!", "info": "i"}
        for f in findings:
            click.echo(f"  {marks[f.severity]} {f.severity:<7} {f.message}")
        if not findings:
            click.echo("  ok: no drift" + (f" (ignoring {', '.join(ignore_paths)})" if ignore_paths else ""))
        else:
            counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
            click.echo(f"{plural(len(findings), 'difference')}: " +
                       ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    sys.stdout.flush()
    if fail_on == "never":
        sys.exit(EXIT_OK)
    worst = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    sys.exit(EXIT_FINDINGS if worst >= SEVERITY_RANK[fail_on] else EXIT_OK)


@main.command()
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
    from .capture import output_kind, run_capture
    from .check import Config
    from .lock import OutputPathError, plural
    from .redact import KIND_NOUNS

    try:
        output_kind(output)   # refuse out.zip, /dev/full & co before any probing
        config = Config.load(probe_dirs, rule_dirs)
        host = _open_host(snapshot, list(logs))
        show_progress = sys.stderr.isatty() or bool(os.environ.get("NPU_DOCTOR_PROGRESS"))
        run_ = run_capture(host, config, output, redact=not no_redact,
                           max_file_bytes=int(max_mib * 1024 * 1024),
                           self_check=not no_self_check,
                           progress=_progress_printer(show_progress))
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


EXIT_INTERRUPTED = 130


def run() -> None:
    """Entry point: usage errors and stray NpuDoctorErrors become one line and exit 2;
    Ctrl-C is exit 130 (not 1, which means "findings")."""
    try:
        rv = main(standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "npu-doctor"
        _fail(f"{e.format_message()} (see `{cmd} --help`)")
    except click.ClickException as e:
        _fail(e.format_message())
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("npu-doctor: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except NpuDoctorError as e:
        _fail(str(e))
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    run()
