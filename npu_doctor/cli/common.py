"""What every command shares: exit codes, one-line errors, progress lines, colour, the host
options (--snapshot, --probes, --rules, --log) and the exit status from findings."""

from __future__ import annotations

import os
import sys
from typing import List, NoReturn, Optional, Sequence

import click

from ..errors import ConfigError, HostError, SnapshotError  # noqa: F401  (re-exported to commands)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130


def config_loaded() -> None:
    """Freeze what start-up built (the configuration, click's commands) out of the cyclic
    garbage collector's reach, and turn the collector back on (npu_doctor.main turned it off
    for start-up): later collections walk only what the command allocates afterwards."""
    import gc

    if not gc.isenabled():  # the console entry point's start-up (not a caller that embeds us)
        gc.freeze()
        gc.enable()


def _fail(msg: str) -> "NoReturn":
    click.echo(f"npu-doctor: error: {msg}", err=True)
    sys.exit(EXIT_USAGE)


def _use_color(mode: str, stream=None) -> bool:
    if mode == "never":
        return False
    if mode == "always":
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def _progress_printer(enabled: bool):
    def progress(msg: str) -> None:
        if enabled:
            click.echo(f"npu-doctor: {msg} ...", err=True)
    return progress


def _open_host(snapshot: Optional[str], logs: List[str]):
    from ..host import open_host
    from ..safeio import special_kind

    for p in logs:
        try:
            kind = special_kind(p)
        except OSError:
            continue  # a missing or unreadable file: the host says so, naming it
        if kind is not None:  # a FIFO or a device has no end to read
            _fail(f"--log {p}: not a regular file (a {kind})")
    host = open_host(snapshot, logs)
    ctx = click.get_current_context(silent=True)
    pythons = ctx.meta.get("npu_doctor.python") if ctx is not None else None
    if pythons:
        from ..pyenv import use_interpreters

        if host.source == "live":
            from ..pyenv import query

            for p in pythons:
                why = _not_an_interpreter(p)
                if why:
                    _fail(f"--python {p}: {why}")
                # an executable that runs but does not answer as Python (/bin/false, a shell
                # script): no environment to check. One that cannot run here at all (another
                # architecture's) is still read from its prefix by the probe.
                err = query(host, p).error or ""
                detail = err[len(p):].strip(" :") if err.startswith(p) else err
                if " exited " in err:
                    _fail(f"--python {p}: not a Python interpreter (asked for its paths, it {detail})")
                if "unreadable answer" in err:
                    _fail(f"--python {p}: not a Python interpreter (it gave no Python answer when "
                          "asked for its paths)")
        use_interpreters(host, pythons)
    return host


def _not_an_interpreter(path: str) -> Optional[str]:
    """Why `path` is no Python interpreter or environment (venv/conda) directory, or None."""
    if not os.path.exists(path):
        return "no such interpreter or environment directory"
    if os.path.isdir(path):
        if any(os.path.isfile(os.path.join(path, "bin", n)) for n in ("python", "python3")):
            return None
        return "a directory without bin/python: not a virtual or conda environment"
    if not os.access(path, os.X_OK):
        return "not an executable file"
    with open(path, "rb") as f:
        head = f.read(4)
    if head != b"\x7fELF" and not head.startswith(b"#!"):
        return "not an interpreter (neither an executable nor a script)"
    return None


def _remember_python(ctx, _param, value):
    # kept in the context rather than passed to every command: _open_host applies it
    if value:
        ctx.meta["npu_doctor.python"] = list(value)
    return value


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
    click.option("--python", "pythons", multiple=True, metavar="PATH", expose_value=False,
                 callback=_remember_python,
                 help="The application's Python interpreter (or its venv/conda directory) whose "
                      "frameworks and libraries to check; repeatable. Default: npu-doctor's own "
                      "interpreter plus an active VIRTUAL_ENV / CONDA_PREFIX."),
]


def host_options(fn):
    for opt in reversed(_HOST_OPTIONS):
        fn = opt(fn)
    return fn


def show_progress() -> bool:
    """Progress lines go to stderr on a terminal, or when NPU_DOCTOR_PROGRESS is set."""
    return sys.stderr.isatty() or bool(os.environ.get("NPU_DOCTOR_PROGRESS"))


def plural(n: int, noun: str, many: Optional[str] = None) -> str:
    """`1 finding`, `2 findings`, `0 findings` (`many` for irregular plurals)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def exit_for(findings: Sequence, fail_on: str) -> int:
    """The exit status of `check` and `verify`: EXIT_FINDINGS when a finding is at or above
    `fail_on` (error | warning | info), EXIT_OK otherwise or when `fail_on` is "never"."""
    from ..rules import SEVERITY_RANK

    if fail_on == "never":
        return EXIT_OK
    worst = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    return EXIT_FINDINGS if worst >= SEVERITY_RANK[fail_on] else EXIT_OK
