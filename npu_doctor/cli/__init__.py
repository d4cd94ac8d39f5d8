"""Command line: `npu-doctor check | rules | ...` (click).

Exit codes of check (docs/architecture.md): 0 nothing at or above --fail-on, 1 findings at or
above it, 2 usage or configuration error. Errors are one line on stderr, never a traceback;
stdout carries only the report, so `--format json` output always parses.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from .. import __version__
from ..errors import NpuDoctorError
from .common import EXIT_INTERRUPTED, EXIT_OK, _fail

#: Command name -> (module, attribute), in the order `--help` lists them. A command's module
#: is imported only when that command runs (or --help lists them all): `check` need not pay
#: for importing `watch`, `service`, `capture` and what they import.
COMMANDS: Dict[str, Tuple[str, str]] = {
    "check": ("check", "check"),
    "rules": ("rules", "rules"),
    "lock": ("lock", "lock"),
    "verify": ("lock", "verify"),
    "capture": ("capture", "capture"),
    "watch": ("watch", "watch"),
    "fix": ("watch", "fix"),
    "model": ("model", "model_cmd"),
    "explain": ("explain", "explain"),
    "service": ("service", "service"),
}


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module = importlib.import_module("." + where[0], __name__)
        cmd: Any = getattr(module, where[1])
        return cmd  # type: ignore[no-any-return]


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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



_SHORT_USAGE = """Usage: npu-doctor COMMAND [OPTIONS]

  check     report on this machine (or --snapshot PATH); exit 1 on an error finding
  explain   what a vendor status code or a pasted log line means, and its fix
  watch     log throttling, runtime PM and hot-plug as they happen (systemd)
  lock      pin the validated stack; verify: drift since the lock
  capture   bring this board home (redacted snapshot)
  fix       show (or --apply) the fixes for the findings
  rules     list or explain the checks
  model     lint a model against what an NPU runs; service: install the daemon

Run `npu-doctor --help` or `npu-doctor COMMAND --help` for more.
"""


def run(argv: Optional[List[str]] = None) -> None:
    """Entry point: usage errors and stray NpuDoctorErrors become one line and exit 2;
    Ctrl-C is exit 130 (not 1, which means "findings"); stdout failures as in cli.streams;
    bare `npu-doctor` is a short usage on stdout, exit 0. Always ends in SystemExit.

    `argv` (default: sys.argv[1:]) lets the tests run the CLI in-process, as the console
    script would."""
    from .streams import guarded, install

    install()
    if not (sys.argv[1:] if argv is None else argv):
        guarded(lambda: sys.stdout.write(_SHORT_USAGE))
    guarded(lambda: _run(argv))


def _run(argv: Optional[List[str]]) -> None:
    try:
        rv = main(args=argv, prog_name="npu-doctor", standalone_mode=False)
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
