"""Active runs: `check --deep` and `model FILE --run` (issue 15).

A small model (the built-in probe, npu_doctor/deep/probe.onnx, or the user's) goes through
every installed inference runtime and device of the application's interpreter, each run in a
sandboxed subprocess (sandbox.py; the worker is worker.py). The results, with the accelerator's
busy counter read around the run (counters.py), become `deep.<runtime>.<device>` facts
(runner.py lists the fields) that rules/deep.toml judges. Never part of a plain `check`, and
`watch` never runs it.
"""

from __future__ import annotations

from .runner import deep_runs
from .sandbox import app_interpreter

__all__ = ["deep_runs", "app_interpreter"]
