"""`npu-doctor model FILE --run`: the deep runs on the user's own model.

ONNX goes to ONNX Runtime (each execution provider) and OpenVINO (each device); an OpenVINO IR
(.xml) to OpenVINO; a .tflite to TFLite / LiteRT (CPU, and the Edge TPU delegate when it
loads). Inputs are random arrays of the declared shapes; a dynamic dimension must be given
with `--shape NAME=1,3,224,224` (else one line naming the input, exit 2); a scalar the model
branches on (silero-vad's sample rate) can be set with `--value NAME=16000`.

Errors: ModelError (unreadable model, no runtime for it, an input without a static shape)
and ConfigError (bad --shape/--value, bad rules file), both exit 2 in the CLI.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..errors import ConfigError, ModelError
from ..facts import Facts
from ..probes import ProbeResult
from ..rules import Finding, RuleSet, evaluate, filter_findings, load_rules
from .report import run_lines, runs
from ..lazyregex import lazy

DEEP_RULES = ("inference-on-cpu", "accelerator-counter-idle", "first-inference-slow",
              "accelerator-slower-than-cpu", "probe-failed")
_SHAPE_RE = lazy(r"^[^=]+=\d+(,\d+)*$")
_VALUE_RE = lazy(r"^[^=]+=-?[0-9.eE+-]+(,-?[0-9.eE+-]+)*$")


@dataclass
class RunResult:
    path: str
    model_format: str
    facts: Facts
    probes: List[ProbeResult]
    findings: List[Finding] = field(default_factory=list)
    duration_s: float = 0.0

    def to_json(self) -> Dict[str, Any]:
        from .. import __version__

        return {"schema": "npu-doctor/model-run/v1",
                "tool": {"name": "npu-doctor", "version": __version__},
                "model": {"path": self.path, "format": self.model_format},
                "facts": {"deep": self.facts.get("deep") or {},
                          "accelerators": self.facts.get("accelerators") or []},
                "findings": [f.to_json() for f in self.findings],
                "probes": [p.to_json() for p in self.probes],
                "duration_s": round(self.duration_s, 3)}


def check_pairs(items: Sequence[str], option: str, pattern: "re.Pattern[str]", example: str) -> None:
    for item in items:
        if not pattern.match(item):
            raise ConfigError(f"{option} {item!r}: expected {example}")


def run_model(path: str, runtime: Optional[str] = None, device: Optional[str] = None,
              shapes: Sequence[str] = (), values: Sequence[str] = (), python: Optional[str] = None,
              rule_dirs: Sequence[str] = (), select=(), ignore=(), host=None, with_host_facts: bool = True,
              timeout_s: Optional[float] = None) -> RunResult:
    """Run the model at `path` on every (runtime, device) that takes it (or the one asked)."""
    from ..host import open_host
    from ..model.lint import detect_format
    from .runner import deep_runs

    start = time.monotonic()
    check_pairs(shapes, "--shape", _SHAPE_RE, "NAME=1,3,224,224")
    check_pairs(values, "--value", _VALUE_RE, "NAME=16000")
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    fmt = detect_format(path)
    rules = load_rules(list(rule_dirs))
    host = host or open_host(None, [])
    facts = Facts()
    if with_host_facts:
        # accelerators and their power/control, so the rules know what the runs should have used
        from ..check import Config, run_check

        facts = run_check(host, Config.load((), rule_dirs), select=("no-accelerator-found",)).facts
    kwargs: Dict[str, Any] = {"timeout_s": timeout_s} if timeout_s else {}
    deep_facts, rows = deep_runs(host, facts, python=python, model=os.path.abspath(path),
                                 model_format=fmt, runtime=runtime, device=device,
                                 shapes=shapes, values=values, **kwargs)
    recs = list(runs(deep_facts.data))
    if not recs:
        why = "; ".join(f"{r.id[5:]}: {r.error}" for r in rows if r.error)
        asked = " ".join(x for x in (f"--runtime {runtime}" if runtime else "",
                                     f"--device {device}" if device else "") if x)
        raise ModelError(f"{path}: no installed runtime runs {fmt} models"
                         + (f" with {asked}" if asked else "") + (f" ({why})" if why else ""))
    if all(rec.get("stage") == "input" for _r, _k, rec in recs):
        raise ModelError(f"{path}: {recs[0][2]['error']}")
    facts.merge(deep_facts)
    ruleset = RuleSet([r for r in rules.rules if r.id in DEEP_RULES])
    findings = evaluate(ruleset, facts, [p.to_json() for p in rows])
    findings = filter_findings(findings, select, ignore)
    return RunResult(path, fmt, facts, rows, findings, time.monotonic() - start)


_MARKS = {"error": "x", "warning": "!", "info": "i"}


def render_text(result: RunResult) -> str:
    lines = [f"npu-doctor model --run — {result.path} ({result.model_format})"]
    for runtime, _key, rec in runs(result.facts.data):
        lines += run_lines(runtime, rec)
    for p in result.probes:
        if p.status == "no_data" and p.error:
            lines.append(f"  {p.id[5:]}: not run ({p.error})")
    for fd in result.findings:
        lines.append(f"  {_MARKS[fd.severity]} {fd.severity:<7} {fd.id} [{fd.subject}]: {fd.message}")
    if not result.findings:
        lines.append("  ok: no finding")
    return "\n".join(lines) + "\n"


def render_json(result: RunResult) -> str:
    return json.dumps(result.to_json(), indent=2, ensure_ascii=False, default=str) + "\n"
