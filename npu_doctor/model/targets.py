"""NPU targets as data: `targets/*.toml`, one file per chip, shipped inside the wheel.

A target file (see targets/rk3588.toml for a full one):

```toml
[target]
id = "rk3588"                      # what `--target` takes
name = "Rockchip RK3588 NPU"
toolkit = "RKNN-Toolkit2"
toolkit_version = "2.3.2"          # the release the lists below were read from
formats = ["onnx"]
opset_min = 9                      # optional: ONNX default-domain opset range the toolkit accepts
opset_max = 19
opset_recommended = 17             # optional: a version the vendor recommends (info only)
dynamic_shapes = false             # false | true | "declared" (a fixed set given at conversion)
default = "unsupported"            # placement of an op not listed: npu|cpu|unsupported|unknown
partial = false                    # true: the published list is incomplete
sources = ["https://..."]          # the vendor documents the lists come from

[ops]                              # ONNX operator types (default domain), by placement
npu = ["Conv", ...]                # compiled for the accelerator
cpu = ["TopK", ...]                # accepted, but the node runs on the CPU
accepted = ["Constant", ...]       # folded or lowered by the converter: no placement of its own
unsupported = ["Loop", ...]        # the converter refuses the model

[[constraint]]                     # when an NPU op breaks a documented limit it moves to `placement`
op = "Conv"                        # or "*" for every NPU op
variant = "depthwise"              # optional (Conv): "depthwise" or "regular"
attr = "kernel_shape"              # an attribute, or @input_rank / @nonunit_dims (shape inference)
range = [1, 31]                    # each value within; or `in = [...]` for strings; or `same = true`
default = "nearest"                # the attribute's ONNX default, when the node leaves it out
placement = "cpu"                  # optional: default "cpu" when the target has a CPU path, else "unsupported"
source = "URL (section)"

[[substitute]]                     # what the vendor documents to use instead
op = "Resize"
text = "..."
```

`load_target(id)` raises ConfigError (one line: file, what is wrong) for a bad file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..datafiles import read_toml
from ..errors import ConfigError
from ..resources import shipped_dir

PLACEMENTS = ("npu", "cpu", "accepted", "unsupported", "unknown")
_TARGET_KEYS = {"id", "name", "vendor", "toolkit", "toolkit_version", "formats", "opset_min",
                "opset_max", "opset_recommended", "dynamic_shapes", "default", "partial", "note",
                "sources"}
_CONSTRAINT_KEYS = {"op", "variant", "attr", "range", "in", "same", "default", "placement",
                    "source"}


@dataclass
class Constraint:
    op: str
    attr: str
    source: str
    variant: Optional[str] = None
    range: Optional[List[int]] = None
    one_of: Optional[List[str]] = None
    same: bool = False
    default: Any = None
    placement: str = "cpu"

    def describe(self) -> str:
        if self.range is not None:
            return f"{self.attr} in [{self.range[0]}, {self.range[1]}]"
        if self.one_of is not None:
            return f"{self.attr} one of {', '.join(self.one_of)}"
        return f"{self.attr}: all values equal"


@dataclass
class Target:
    id: str
    name: str
    toolkit: str
    toolkit_version: str
    path: str
    sources: List[str]
    formats: List[str]
    dynamic_shapes: Any
    default: str
    opset_min: Optional[int] = None
    opset_max: Optional[int] = None
    opset_recommended: Optional[int] = None
    partial: bool = False
    note: str = ""
    vendor: str = ""
    placement: Dict[str, str] = field(default_factory=dict)      # op type -> placement
    constraints: List[Constraint] = field(default_factory=list)
    substitutes: Dict[str, str] = field(default_factory=dict)
    tflite: Dict[str, List[str]] = field(default_factory=dict)

    def placement_of(self, op_type: str) -> str:
        return self.placement.get(op_type, self.default)

    def facts(self) -> Dict[str, Any]:
        """The `target.*` facts the model rules read."""
        return {"id": self.id, "name": self.name, "toolkit": self.toolkit,
                "toolkit_version": self.toolkit_version, "opset_min": self.opset_min,
                "opset_max": self.opset_max, "opset_recommended": self.opset_recommended,
                "dynamic_shapes": self.dynamic_shapes, "partial": self.partial,
                "source": self.sources[0], "note": self.note or None}


def targets_dir() -> str:
    return shipped_dir("targets")


def target_files(extra_dirs: List[str] = ()) -> Dict[str, str]:
    """Target id (file stem) -> path; a file in an extra dir replaces a shipped one."""
    out: Dict[str, str] = {}
    for d in [targets_dir(), *extra_dirs]:
        if not os.path.isdir(d):
            raise ConfigError(f"--targets {d}: no such directory")
        for n in sorted(os.listdir(d)):
            if n.endswith(".toml"):
                out[n[:-5]] = os.path.join(d, n)
    return out


def _str_list(v: Any, where: str) -> List[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{where} must be a list of strings")
    return v


def _parse_constraint(raw: Any, path: str, n: int, has_cpu: bool) -> Constraint:
    where = f"{path}: constraint #{n + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = set(raw) - _CONSTRAINT_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    for key in ("op", "attr", "source"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f"{where}: missing {key}")
    kinds = [k for k in ("range", "in", "same") if k in raw]
    if len(kinds) != 1:
        raise ConfigError(f"{where}: needs exactly one of range, in, same")
    rng = raw.get("range")
    if rng is not None and (not isinstance(rng, list) or len(rng) != 2
                            or not all(isinstance(x, int) and not isinstance(x, bool) for x in rng)
                            or rng[0] > rng[1]):
        raise ConfigError(f"{where}: range must be [low, high] integers")
    one_of = _str_list(raw["in"], f"{where}: in") if "in" in raw else None
    if raw.get("variant") not in (None, "depthwise", "regular"):
        raise ConfigError(f"{where}: variant must be depthwise or regular")
    placement = raw.get("placement", "cpu" if has_cpu else "unsupported")
    if placement not in ("cpu", "unsupported"):
        raise ConfigError(f"{where}: placement must be cpu or unsupported")
    return Constraint(raw["op"], raw["attr"], raw["source"], raw.get("variant"), rng, one_of,
                      bool(raw.get("same", False)), raw.get("default"), placement)


def parse_target(path: str) -> Target:
    """A Target from one file. Raises ConfigError naming the file and the problem."""
    data = read_toml(path)
    unknown = set(data) - {"target", "ops", "constraint", "substitute", "tflite"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r}")
    t = data.get("target")
    if not isinstance(t, dict):
        raise ConfigError(f"{path}: missing [target]")
    unknown = set(t) - _TARGET_KEYS
    if unknown:
        raise ConfigError(f"{path}: [target]: unknown key {sorted(unknown)[0]!r}")
    for key in ("id", "name", "toolkit", "toolkit_version"):
        if not isinstance(t.get(key), str) or not t[key]:
            raise ConfigError(f"{path}: [target]: missing {key}")
    sources = _str_list(t.get("sources"), f"{path}: [target]: sources")
    if not sources or not all(s.startswith("https://") for s in sources):
        raise ConfigError(f"{path}: [target]: sources must be https URLs of the vendor documents")
    for key in ("opset_min", "opset_max", "opset_recommended"):
        if key in t and (not isinstance(t[key], int) or isinstance(t[key], bool)):
            raise ConfigError(f"{path}: [target]: {key} must be an integer")
    if t.get("dynamic_shapes") not in (True, False, "declared"):
        raise ConfigError(f"{path}: [target]: dynamic_shapes must be true, false or \"declared\"")
    default = t.get("default", "unsupported")
    if default not in PLACEMENTS:
        raise ConfigError(f"{path}: [target]: default must be one of {', '.join(PLACEMENTS)}")
    ops = data.get("ops", {})
    if not isinstance(ops, dict) or set(ops) - set(PLACEMENTS):
        raise ConfigError(f"{path}: [ops] may only hold {', '.join(PLACEMENTS)} lists")
    placement: Dict[str, str] = {}
    for kind, names in ops.items():
        for op in _str_list(names, f"{path}: [ops] {kind}"):
            if op in placement:
                raise ConfigError(f"{path}: [ops]: {op} is listed as both {placement[op]} and {kind}")
            placement[op] = kind
    has_cpu = default == "cpu" or "cpu" in ops
    constraints = [_parse_constraint(c, path, i, has_cpu)
                   for i, c in enumerate(data.get("constraint", []))]
    subs: Dict[str, str] = {}
    for i, s in enumerate(data.get("substitute", [])):
        if not isinstance(s, dict) or not isinstance(s.get("op"), str) or not isinstance(s.get("text"), str):
            raise ConfigError(f"{path}: substitute #{i + 1}: needs op and text")
        subs[s["op"]] = s["text"]
    tfl = data.get("tflite", {})
    tflite = {k: _str_list(v, f"{path}: [tflite] {k}") for k, v in tfl.items()}
    return Target(t["id"], t["name"], t["toolkit"], t["toolkit_version"], path, sources,
                  list(t.get("formats", ["onnx"])), t["dynamic_shapes"], default,
                  t.get("opset_min"), t.get("opset_max"), t.get("opset_recommended"),
                  bool(t.get("partial", False)), str(t.get("note", "")), str(t.get("vendor", "")),
                  placement, constraints, subs, tflite)


def load_target(target_id: str, extra_dirs: List[str] = ()) -> Target:
    """The target named `target_id`. ConfigError (naming the known ids) when there is none."""
    files = target_files(extra_dirs)
    path = files.get(target_id)
    if path is None:
        raise ConfigError(f"unknown target {target_id!r} (known: {', '.join(sorted(files))})")
    t = parse_target(path)
    if t.id != target_id:
        raise ConfigError(f"{path}: [target] id {t.id!r} does not match the file name")
    return t
