"""One model against one target: facts, then the model rules (rules/model.toml).

Errors: ModelError (unreadable model, exit 2), ConfigError (bad target or rules file, exit 2).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List

from ..errors import ModelError
from ..facts import Facts
from ..rules import Finding, RuleSet, evaluate, filter_findings, load_rules
from .targets import Target, load_target

MODEL_RULE_PREFIX = "model-"


@dataclass
class LintResult:
    path: str
    target: Target
    facts: Facts
    findings: List[Finding] = field(default_factory=list)
    duration_s: float = 0.0

    def to_json(self) -> Dict[str, Any]:
        from .. import __version__

        return {"schema": "npu-doctor/model-report/v1",
                "tool": {"name": "npu-doctor", "version": __version__},
                "model": {"path": self.path, "format": self.facts.get("model.format")},
                "target": {"id": self.target.id, "name": self.target.name,
                           "toolkit": self.target.toolkit,
                           "toolkit_version": self.target.toolkit_version,
                           "sources": self.target.sources, "file": self.target.path},
                "facts": self.facts.to_dict(),
                "findings": [f.to_json() for f in self.findings],
                "duration_s": round(self.duration_s, 3)}


def detect_format(path: str) -> str:
    """'onnx', 'tflite' or 'openvino-ir' from the first bytes. ModelError when unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except IsADirectoryError:
        raise ModelError(f"{path}: is a directory, not a model file") from None
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror or e})") from None
    if head[4:8] == b"TFL3":
        return "tflite"
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped.startswith(b"<"):
        return "openvino-ir"
    if path.endswith((".rknn", ".hef", ".om", ".blob")):
        raise ModelError(f"{path}: a compiled {os.path.splitext(path)[1]} model; "
                         "npu-doctor lints the source model (.onnx, .tflite, OpenVINO .xml)")
    return "onnx"


def model_rules(rule_dirs: List[str] = ()) -> RuleSet:
    rs = load_rules(rule_dirs)
    return RuleSet([r for r in rs.rules if r.id.startswith(MODEL_RULE_PREFIX)])


def lint(path: str, target_id: str, target_dirs: List[str] = (), rule_dirs: List[str] = (),
         select=(), ignore=()) -> LintResult:
    """Findings for the model at `path` on target `target_id`."""
    start = time.monotonic()
    target = load_target(target_id, list(target_dirs))
    rules = model_rules(list(rule_dirs))
    fmt = detect_format(path)
    if fmt == "onnx":
        from . import onnx_model

        model_facts = onnx_model.analyze(onnx_model.load(path), target)
    else:
        # detected so that the answer is a clear line, not a protobuf error on a flatbuffer
        raise ModelError(f"{path}: a {fmt} model; this version of npu-doctor lints ONNX models only "
                         "(convert with tflite2onnx / ovc's ONNX source, or lint the ONNX you exported)")
    facts = Facts()
    facts.set("model", model_facts, source=path)
    facts.set("model.path", path, source=path)
    facts.set("target", {k: v for k, v in target.facts().items() if v is not None},
              source=target.sources[0])
    findings = filter_findings(evaluate(rules, facts, []), select, ignore)
    return LintResult(path, target, facts, findings, time.monotonic() - start)
