"""`npu-doctor lock` and `npu-doctor verify`: pin the stack, report drift from the pin."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError, HostError, SnapshotError
from .common import _fail, _open_host, _progress_printer, config_loaded, exit_for, host_options, plural, show_progress


def _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs):
    """(host, check result) for lock/verify: the same probes as `check`."""
    from ..check import Config, run_check

    config = Config.load(probe_dirs, rule_dirs)
    config_loaded()
    host = _open_host(snapshot, list(logs))
    progress_on = show_progress()
    return host, run_check(host, config, progress=_progress_printer(progress_on))


def _refuse_over_hand_edits(path: str) -> None:
    """A plain `lock` over a lockfile someone edited since npu-doctor wrote it would throw the
    edits away: refused (exit 2), pointing at --update. An unreadable or foreign file is
    replaced as before."""
    from ..lock import LockfileError, digest_state, read_lockfile

    try:
        state = digest_state(read_lockfile(path))
    except LockfileError:
        return
    if state == "edited":
        _fail(f"{path} was edited since npu-doctor wrote it, and `lock` would replace it whole: "
              f"`npu-doctor lock --update -o {path}` rewrites only the pins that differ from this "
              "host and shows them (to start afresh, remove the file first)")


@click.command()
@host_options
@click.option("-o", "--output", "output", default="npu-env.lock", show_default=True,
              metavar="FILE", help="Where to write the lockfile ('-' for stdout).")
@click.option("--update", is_flag=True,
              help="Rewrite only the pins of FILE that changed (hand edits elsewhere stay) and "
                   "print the diff on stdout.")
@click.option("--lockspec", "lockspec", metavar="FILE", type=click.Path(dir_okay=False),
              help="What to pin (default: the shipped npu_doctor/lockspec.toml).")
def lock(snapshot, probe_dirs, rule_dirs, logs, output, update, lockspec):
    """Pin this host's accelerator stack in a lockfile (TOML).

    Records OS id/version, kernel release, libc, each accelerator with its driver and firmware
    versions and tunables (power/control, governors), kernel module versions (drivers.*),
    SDK and runtime versions (sdks.*), the Python distributions of accelerator SDKs, and
    sha256 of the SDK libraries and firmware files the probes found. What is locked and how
    a difference is graded is data: npu_doctor/lockspec.toml.

    The same machine gives a byte-identical file (sorted keys, no timestamp); the file is
    replaced atomically, so an interrupted lock leaves the previous one intact. A symlink
    is followed and its target replaced; a device, fifo, socket or directory is refused.

    Kernel modules: only the accelerator-relevant ones are pinned (bound to an accelerator,
    in the vendor driver tables, or their dependencies); others via the lockspec's
    [modules] also. The lockfile is meant to be reviewed and edited: see `verify`.

    \b
    Examples:
      npu-doctor lock                               write ./npu-env.lock for this host
      npu-doctor lock --update                      re-pin what changed, show the diff
      npu-doctor lock -o /etc/npu-env.lock
      npu-doctor lock --snapshot board.tar.gz -o golden.lock
    """
    import os

    from ..lock import LockfileError, build_manifest, count_locked, dumps, load_spec, read_lockfile
    from ..lock.review import apply_changes, changes, diff_text
    from ..outputs import OutputPathError, clean_stale_temps, resolve_output, write_atomic

    old = None
    try:
        if output != "-":
            resolve_output(output, "lockfile")   # refuse /dev/full & co before any probing
            clean_stale_temps(output)            # leftovers of a lock killed mid-write
        elif update:
            raise ConfigError("--update needs the lockfile to update (-o FILE), not stdout")
        if update and os.path.exists(output):
            old = read_lockfile(output)
        elif output != "-" and os.path.isfile(output):
            _refuse_over_hand_edits(output)
        spec = load_spec(lockspec)
        host, result = _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs)
        manifest = build_manifest(result.facts, host, spec)
    except (ConfigError, SnapshotError, HostError, OutputPathError, LockfileError) as e:
        _fail(str(e))
    if old is not None:
        chs = changes(old, manifest)
        new = apply_changes(old, chs, manifest["lock"])
        data = dumps(new)
        sys.stdout.write(diff_text(chs))
        sys.stdout.flush()
        try:
            with open(output, "rb") as f:
                same = f.read() == data
            if not same:
                write_atomic(output, data)
        except OutputPathError as e:
            _fail(str(e))
        except OSError as e:
            _fail(f"{output}: cannot write lockfile ({e.strerror or e})")
        what = f"updated {plural(len(chs), 'pin')}" if chs else "no pin changed"
        click.echo(f"npu-doctor: {what} in {output}" +
                   ("" if same or chs else " (digest renewed)"), err=True)
        return
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


@click.command()
@click.argument("lockfile", metavar="LOCKFILE", default="npu-env.lock")
@host_options
@click.option("--skip-path", "skip_paths", multiple=True, metavar="PATH",
              help="A lock path allowed to float (prefix or shell pattern per key, e.g. "
                   "'sdks.*.build', 'accelerators.*.power.control', python.packages); repeatable.")
@click.option("--accept", "accept_paths", multiple=True, metavar="PATH",
              help="Record an intended change: write the host's current value of these lock "
                   "paths (prefixes/patterns as --skip-path) into LOCKFILE, print the diff, "
                   "then verify; repeatable.")
@click.option("--select", multiple=True, metavar="ID",
              help="Report only these rule ids (comma list, shell patterns); repeatable.")
@click.option("--ignore", multiple=True, metavar="ID",
              help="Do not report these rule ids (comma list, shell patterns); repeatable.")
@click.option("--lockspec", "lockspec", metavar="FILE", type=click.Path(dir_okay=False),
              help="What is pinned (default: the shipped npu_doctor/lockspec.toml).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Report format (json: the check report schema, findings "
                                      "are lock-drift, plus a 'lock' section).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a difference at or above this severity is found.")
def verify(lockfile, snapshot, probe_dirs, rule_dirs, logs, skip_paths, accept_paths, select, ignore,
           lockspec, fmt, fail_on):
    """Compare this host (or a snapshot) with a lockfile; report each difference.

    Each difference is a `lock-drift` finding: what changed, from what, to what, and its
    severity (driver, firmware, kernel, libc, SDK version or library content: error;
    a tunable such as power/control or a governor: warning; a newly installed SDK package:
    info). See `npu-doctor rules explain lock-drift`.

    The lockfile is a reviewable manifest: edit a pin by hand and verify compares against the
    edited value (the changed digest is an info finding, "edited since written"); record an
    intended change with --accept PATH, or re-pin everything that changed with
    `npu-doctor lock --update`.

    \b
    Exit status:
      0  no difference at or above --fail-on
      1  at least one difference at or above --fail-on
      2  usage error, or a lockfile that is unreadable, not TOML, of the wrong shape, of
         an unknown schema or for another architecture

    \b
    Examples:
      npu-doctor verify npu-env.lock
      npu-doctor verify npu-env.lock --skip-path 'sdks.*.build' --fail-on warning
      npu-doctor verify npu-env.lock --accept drivers.rknpu --accept 'accelerators.*.driver'
      npu-doctor verify golden.lock --snapshot board.tar.gz --format json
    """
    import json

    from ..lock import (
        LockfileError,
        build_manifest,
        check_arch,
        count_locked,
        diff,
        digest_state,
        drift_findings,
        dumps,
        load_spec,
        parse_ignore,
        read_lockfile,
    )
    from ..lock.review import apply_changes, changes, diff_text, digest_finding
    from ..outputs import OutputPathError, write_atomic
    from ..rules import load_rules
    from .ruleids import expand_rule_ids

    try:
        for p in list(skip_paths) + list(accept_paths):
            parse_ignore(p)
        rules = load_rules(rule_dirs)
        known = [r.id for r in rules.rules]
        selected = expand_rule_ids(select, known, "--select")
        ignored_ids = expand_rule_ids(ignore, known, "--ignore")
        locked = read_lockfile(lockfile)
        spec = load_spec(lockspec)
        host, result = _facts_for_lock(snapshot, probe_dirs, rule_dirs, logs)
        current = build_manifest(result.facts, host, spec)
        arch_note = check_arch(locked, current, lockfile,
                               f"snapshot {snapshot}" if snapshot else "this host")
        if accept_paths:
            chs = changes(locked, current, only=accept_paths)
            if chs:
                locked = apply_changes(locked, chs)
                write_atomic(lockfile, dumps(locked))
                click.echo(f"npu-doctor: accepted {plural(len(chs), 'change')} into {lockfile}:",
                           err=True)
                click.echo(diff_text(chs).rstrip("\n"), err=True)
            else:
                click.echo(f"npu-doctor: nothing to accept under {', '.join(accept_paths)}: "
                           "the lockfile already holds the host's values", err=True)
        rule = rules.get("lock-drift")
        rule_fixes = []
        if rule is not None:
            rule_fixes = [{"kind": f.kind, "text": f.text.strip()} for f in rule.fixes]
            rule_fixes += [{"kind": "doc", "text": d} for d in rule.docs]
        drifts = diff(locked, current, spec, skip_paths)
        findings = drift_findings(drifts, lockfile, rule.title if rule else "", rule_fixes)
        advisory = digest_finding(digest_state(locked), lockfile)
        if advisory is not None:
            findings.append(advisory)
        findings = [f for f in findings if (not selected or f.id in selected)
                    and f.id not in ignored_ids]
    except (ConfigError, SnapshotError, HostError, LockfileError, OutputPathError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{lockfile}: cannot write lockfile ({e.strerror or e})")
    hdr = locked["lock"]
    if fmt == "json":
        doc = result.to_json()
        doc["findings"] = [f.to_json() for f in findings]
        doc["lock"] = {"path": lockfile, "schema": hdr.get("schema"),
                       "tool_version": hdr.get("tool_version"), "arch": hdr.get("arch"),
                       "locked_values": count_locked(locked), "differences": len(findings),
                       "ignored": list(skip_paths), "skipped_paths": list(skip_paths),
                       "ignored_rules": ignored_ids, "accepted": list(accept_paths),
                       "arch_compared": arch_note is None,
                       "notes": [arch_note] if arch_note else []}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        where = f"snapshot {snapshot}" if snapshot else "this host"
        click.echo(f"npu-doctor verify: {where} against {lockfile} "
                   f"(npu-doctor {hdr.get('tool_version') or 'version unknown'}, "
                   f"{hdr.get('arch') if hdr.get('arch') not in (None, 'unknown') else 'architecture unknown'}, "
                   f"{plural(count_locked(locked), 'locked value')})")
        if arch_note:
            click.echo(f"  ? note    {arch_note}")
        marks = {"error": "x", "warning": "!", "info": "i"}
        findings.sort(key=lambda f: f.subject != "lock.digest")
        for f in findings:
            click.echo(f"  {marks[f.severity]} {f.severity:<7} {f.message}")
        if not findings:
            click.echo("  ok: no drift" + (f" (skipping {', '.join(skip_paths)})" if skip_paths else ""))
        else:
            counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
            click.echo(f"{plural(len(findings), 'difference')}: " +
                       ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    sys.stdout.flush()
    sys.exit(exit_for(findings, fail_on))
