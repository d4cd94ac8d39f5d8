"""A command group run without a subcommand (`npu-doctor rules`, `npu-doctor service`): its
short usage on stdout and exit 0, as bare `npu-doctor` does, not the whole help as an error."""

from __future__ import annotations

import click


def short_usage(ctx: click.Context) -> str:
    """`Usage: npu-doctor rules COMMAND [OPTIONS]`, one line per subcommand, a pointer to --help."""
    group = ctx.command
    lines = [f"Usage: {ctx.command_path} COMMAND [OPTIONS]", ""]
    if isinstance(group, click.Group):
        names = group.list_commands(ctx)
        width = max((len(n) for n in names), default=8) + 2
        for name in names:
            sub = group.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines.append(f"  {name:<{width}}{sub.get_short_help_str(70)}")
    lines += ["", f"Run `{ctx.command_path} COMMAND --help` for more."]
    return "\n".join(lines) + "\n"


def show_short_usage_when_bare(ctx: click.Context) -> None:
    """For a group callback (`invoke_without_command=True`): print the short usage and exit 0
    when no subcommand was given."""
    if ctx.invoked_subcommand is None:
        click.echo(short_usage(ctx), nl=False)
        ctx.exit(0)
