"""The `model FILE --run` branch of the `model` command (kept here so that cli_model.py only
registers the options)."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError, ModelError


def model_run(model_file, runtime, device, shapes, values, fmt, select, ignore, fail_on, rule_dirs) -> None:
    """Run, print, exit (0 / 1 findings at or above --fail-on / 2 usage or model error)."""
    from ..cli.common import _fail, exit_for
    from .model_run import DEEP_RULES, render_json, render_text, run_model

    if not model_file:
        raise click.UsageError("missing FILE")
    try:
        for rid in list(select) + list(ignore):
            if rid not in DEEP_RULES:
                raise ConfigError(f"unknown run rule id {rid!r} (one of {', '.join(DEEP_RULES)})")
        result = run_model(model_file, runtime, device, shapes, values, rule_dirs=rule_dirs,
                           select=select, ignore=ignore)
    except (ConfigError, ModelError) as e:
        _fail(str(e))
    sys.stdout.write(render_json(result) if fmt == "json" else render_text(result))
    sys.stdout.flush()
    sys.exit(exit_for(result.findings, fail_on))
