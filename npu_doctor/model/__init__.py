"""`npu-doctor model FILE --target T`: lint a model against what an NPU toolkit accepts.

`lint(path, target_id)` reads the model (ONNX; TFLite and OpenVINO IR in their own modules),
turns it into `model.*` facts judged against a target (`targets/<id>.toml`), and evaluates the
`model-*` rules of rules/model.toml with the same engine as `check`. Findings have the shape of
check's JSON findings; `subject` is the node (or input/output) they concern.
"""

from __future__ import annotations

from .lint import LintResult, detect_format, lint

__all__ = ["LintResult", "detect_format", "lint"]
