"""`npu-doctor model FILE --target T`: lint a model for an accelerator target.

Exit codes as `check`: 0 no finding at or above --fail-on, 1 findings at or above it, 2 usage
error, unreadable/truncated model, bad target or rules file (one line on stderr).
"""

from __future__ import annotations

import json
import sys

import click

from .common import EXIT_OK, _fail, exit_for
from ..errors import ConfigError, ModelError

_MARKS = {"error": "x", "warning": "!", "info": "i"}


def _list_targets(target_dirs) -> None:
    from ..model.targets import parse_target, target_files

    for tid, path in sorted(target_files(list(target_dirs)).items()):
        t = parse_target(path)
        counts = {}
        for p in t.placement.values():
            counts[p] = counts.get(p, 0) + 1
        opset = f"opset {t.opset_min or '?'}-{t.opset_max or '?'}" if (t.opset_min or t.opset_max) else "opset n/a"
        ops = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        click.echo(f"{tid:<10} {t.toolkit} {t.toolkit_version}: {ops}; {opset}; "
                   f"dynamic shapes {t.dynamic_shapes}{' (partial list)' if t.partial else ''}")
        click.echo(f"{'':<10} {t.sources[0]}")


def _render_text(result) -> str:
    t = result.target
    f = result.facts
    lines = [f"npu-doctor model — {result.path} on {t.name} ({t.toolkit} {t.toolkit_version})",
             f"  {f.get('model.format')}, opset {f.get('model.opset', '?')}, "
             f"{f.get('model.node_count', '?')} nodes"
             + (f", {f.get('model.producer')}" if f.get("model.producer") else "")]
    if not result.findings:
        lines.append("  ok: nothing this target's published lists object to")
    for fd in result.findings:
        lines.append(f"  {_MARKS[fd.severity]} {fd.severity:<7} {fd.id} [{fd.subject}]: {fd.message}")
        for fx in fd.fixes:
            if fx["kind"] != "doc":
                lines.append(f"      fix: {fx['text']}")
    counts = {s: sum(1 for x in result.findings if x.severity == s) for s in ("error", "warning", "info")}
    lines.append(", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
                 + f" (sources: {', '.join(t.sources)})")
    return "\n".join(lines) + "\n"


@click.command("model")
@click.argument("model_file", metavar="FILE", required=False)
@click.option("--target", "targets", multiple=True, metavar="T",
              help="Target NPU (see --list-targets); repeatable, or 'all'.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--select", multiple=True, metavar="ID", help="Report only these rule ids; repeatable.")
@click.option("--ignore", multiple=True, metavar="ID", help="Do not report these rule ids; repeatable.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--targets", "target_dirs", multiple=True, metavar="DIR",
              help="Extra target files (*.toml); a file replaces the shipped one of the same name.")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Extra rules files to load.")
@click.option("--list-targets", is_flag=True, help="List the targets with toolkit version and sources.")
@click.option("--run", "run_", is_flag=True, help="Run the model on every installed runtime and device "
              "instead (placement per operator, latency; subprocess with timeout and memory limit).")
@click.option("--runtime", metavar="R", help="With --run: only this runtime (onnxruntime, openvino, tflite).")
@click.option("--device", metavar="D", help="With --run: only this device or EP (CPU, NPU, CUDAExecutionProvider).")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=D0,D1,..",
              help="With --run: the shape of an input with dynamic dims; repeatable.")
@click.option("--value", "values", multiple=True, metavar="NAME=V",
              help="With --run: the value of an input (e.g. a sample rate); repeatable.")
def model_cmd(model_file, targets, fmt, select, ignore, fail_on, target_dirs, rule_dirs, list_targets,
              run_, runtime, device, shapes, values):
    """Lint a model (ONNX; TFLite, OpenVINO IR) against what an NPU toolkit accepts.

    Checks, against the target's published operator list (targets/*.toml, one vendor document
    and toolkit version each): dynamic input dims, If/Loop/Scan, training-mode nodes, operators
    the toolkit refuses or places on the CPU (with documented attribute limits), the opset
    range, generic or duplicate output names, Transposes around convolutions.

    \b
    Exit status:
      0  no finding at or above --fail-on
      1  at least one finding at or above --fail-on
      2  usage error, unreadable or truncated model, bad target or rules file

    \b
    Examples:
      npu-doctor model yolov8n.onnx --target rk3588
      npu-doctor model det.onnx --target all --format json
      npu-doctor model --list-targets
      npu-doctor model det.onnx --run --shape x=1,3,640,640
    """
    if run_:
        from ..deep.cli_run import model_run

        model_run(model_file, runtime, device, shapes, values, fmt, select, ignore, fail_on, rule_dirs)
    from ..model import lint
    from ..model.targets import target_files

    try:
        if list_targets:
            _list_targets(target_dirs)
            sys.exit(EXIT_OK)
        if not model_file:
            raise click.UsageError("missing FILE (or --list-targets)")
        if not targets:
            raise click.UsageError("missing --target (see npu-doctor model --list-targets)")
        ids = sorted(target_files(list(target_dirs))) if "all" in targets else list(dict.fromkeys(targets))
        known = {"model-dynamic-shape", "model-control-flow", "model-training-op", "model-op-unsupported",
                 "model-opset-out-of-range", "model-output-names", "model-layout-transposes"}
        for rid in list(select) + list(ignore):
            if rid not in known:
                raise ConfigError(f"unknown model rule id {rid!r} (one of {', '.join(sorted(known))})")
        results = [lint(model_file, tid, target_dirs, rule_dirs, select, ignore) for tid in ids]
    except (ConfigError, ModelError) as e:
        _fail(str(e))
    if fmt == "json":
        doc = results[0].to_json() if len(results) == 1 else {
            "schema": "npu-doctor/model-reports/v1", "reports": [r.to_json() for r in results]}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(_render_text(r) for r in results))
    sys.stdout.flush()
    sys.exit(exit_for([f for r in results for f in r.findings], fail_on))
