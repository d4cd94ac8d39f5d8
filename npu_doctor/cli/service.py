"""`npu-doctor service install | uninstall` (registered on the main click group)."""

from __future__ import annotations

import os
import sys

import click

from ..deploy.service import DEBIAN_TEXTFILE_DIR
from .common import EXIT_OK, _fail


@click.group(invoke_without_command=True)
@click.pass_context
def service(ctx) -> None:
    """Install npu-doctor watch as a systemd service, or remove it."""
    from .grouphelp import show_short_usage_when_bare

    show_short_usage_when_bare(ctx)


@service.command("install")
@click.option("--textfile-dir", metavar="DIR", default=DEBIAN_TEXTFILE_DIR, show_default=True,
              help="Where watch writes npu_doctor.prom for node_exporter's textfile collector.")
@click.option("--no-textfile", is_flag=True, help="Do not export metrics to a textfile directory.")
@click.option("--root", metavar="DIR", default="/", show_default=True,
              help="Write under this directory instead of / (an image, a test).")
@click.option("--daemon-reload", is_flag=True, help="Run `systemctl daemon-reload` afterwards.")
def service_install(textfile_dir, no_textfile, root, daemon_reload):
    """Write the unit, the runtime-PM udev rule and a default config.

    The unit runs `watch` with the interpreter running this command (a venv's, pipx's or the
    system's python), so install from the environment the service should use. Prints every
    path it wrote; `npu-doctor service uninstall` removes exactly those.

    \b
    Then:
      sudo systemctl daemon-reload && sudo systemctl enable --now npu-doctor
      sudo udevadm control --reload && sudo udevadm trigger --action=add
    """
    from ..deploy.service import ServiceError, install

    if daemon_reload and os.path.abspath(root) != "/":
        _fail("--daemon-reload talks to this system's systemd; it cannot go with --root")
    if os.path.abspath(root) == "/" and hasattr(os, "geteuid") and os.geteuid() != 0:
        _fail("writing to /etc needs root: sudo " + " ".join([sys.executable, "-m", "npu_doctor", "service", "install"]))
    try:
        plan = install(root, None if no_textfile else textfile_dir, daemon_reload=daemon_reload)
    except ServiceError as e:
        _fail(str(e))
    for line in plan.lines(root):
        click.echo(line)
    if not daemon_reload and os.path.abspath(root) == "/":
        click.echo("next: systemctl daemon-reload && systemctl enable --now npu-doctor")
    sys.exit(EXIT_OK)


@service.command("uninstall")
@click.option("--root", metavar="DIR", default="/", show_default=True,
              help="The directory `service install --root` wrote under.")
@click.option("--daemon-reload", is_flag=True, help="Run `systemctl daemon-reload` afterwards.")
def service_uninstall(root, daemon_reload):
    """Remove what `service install` wrote (stop and disable the service first)."""
    from ..deploy.service import ServiceError, uninstall

    if daemon_reload and os.path.abspath(root) != "/":
        _fail("--daemon-reload talks to this system's systemd; it cannot go with --root")
    try:
        plan = uninstall(root, daemon_reload=daemon_reload)
    except ServiceError as e:
        _fail(str(e))
    for line in plan.lines(root):
        click.echo(line)
    sys.exit(EXIT_OK)
