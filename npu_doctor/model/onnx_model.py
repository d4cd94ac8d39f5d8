"""Reading an ONNX model into the `model.*` facts the model rules check.

Needs the optional `onnx` package (`pip install 'npu-doctor[model]'`). Tensor data is never
needed: the file is parsed without external data, and shape inference runs on a copy whose
large initializers keep their dims but drop their bytes, so a 100 MB model costs one parse.

Facts (docs/architecture.md, model rules; lists hold one entry per finding subject):
  model.format = "onnx", model.opset (default-domain opset), model.ir_version, model.producer,
  model.node_count, model.op_counts {op: n},
  model.dynamic_inputs [{name, shape, dynamic}], model.control_flow [{node, op, placement, branches}],
  model.training_ops [{node, op, why}], model.op_issues [{op, node, nodes, count, placement, why, substitute}],
  model.outputs [{name, index, duplicate}], model.layout {transposes, around_conv, node}
Errors: ModelError (one line) for a missing, truncated or non-ONNX file.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import ModelError
from .targets import Constraint, Target

CONTROL_FLOW = ("If", "Loop", "Scan")
TRAINING_DOMAINS = ("ai.onnx.preview.training",)
_STRIP_BYTES = 4096          # initializers larger than this lose their data before inference


def require_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ModelError("reading ONNX models needs the onnx package: pip install 'npu-doctor[model]'") from None
    return onnx


def load(path: str):
    """ModelProto of `path` without external data. Raises ModelError."""
    onnx = require_onnx()
    from google.protobuf.message import DecodeError

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror or e})") from None
    if not data:
        raise ModelError(f"{path}: empty file, not an ONNX model")
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelError(f"{path}: not a valid ONNX model (truncated or corrupt protobuf: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    # protobuf accepts many byte strings; a real model names its opsets and has a graph
    if not model.opset_import or not model.HasField("graph") or model.ir_version <= 0:
        raise ModelError(f"{path}: not an ONNX model (no graph, IR version or opset import)")
    return model


def _attr(node, name: str) -> Any:
    for a in node.attribute:
        if a.name == name:
            from onnx import helper

            v = helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return None


def walk(graph, prefix: str = "") -> Iterator[Tuple[Any, str]]:
    """(node, graph path) for every node, subgraphs (If/Loop/Scan bodies) included."""
    for node in graph.node:
        yield node, prefix
        for a in node.attribute:
            if a.type == a.GRAPH:
                yield from walk(a.g, f"{prefix}{node.name or node.op_type}/{a.name}/")
            for g in a.graphs:
                yield from walk(g, f"{prefix}{node.name or node.op_type}/{a.name}/")


def _node_name(node, prefix: str, index: int) -> str:
    return prefix + (node.name or f"{node.op_type}#{index}")


def _shape_of(vi) -> Optional[List[Any]]:
    t = vi.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out: List[Any] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(int(d.dim_value))
        else:
            out.append(d.dim_param or "?")
    return out


def _inferred_shapes(model) -> Dict[str, List[Any]]:
    """Tensor name -> shape after onnx.shape_inference on a data-less copy (best effort)."""
    import onnx
    from onnx import shape_inference

    light = onnx.ModelProto()
    light.CopyFrom(model)
    for init in light.graph.initializer:
        if len(init.raw_data) > _STRIP_BYTES:
            # dims are what inference needs; keep a one-element payload so no check trips on it
            init.ClearField("raw_data")
            init.data_location = onnx.TensorProto.DEFAULT
    try:
        inferred = shape_inference.infer_shapes(light, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001  (inference failure = shapes unknown, not a crash)
        inferred = light
    g = inferred.graph
    shapes = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        s = _shape_of(vi)
        if s is not None:
            shapes[vi.name] = s
    for init in model.graph.initializer:
        shapes.setdefault(init.name, [int(d) for d in init.dims])
    return shapes


def _is_depthwise(node, shapes) -> bool:
    group = _attr(node, "group") or 1
    if group <= 1 or len(node.input) < 2:
        return False
    w = shapes.get(node.input[1])
    return bool(w) and len(w) >= 2 and w[1] == 1


def _violation(c: Constraint, node, shapes) -> Optional[str]:
    """Why `node` breaks constraint `c`, or None (also when the value is unknown)."""
    if c.variant and node.op_type == "Conv":
        if (c.variant == "depthwise") != _is_depthwise(node, shapes):
            return None
    if c.attr in ("@input_rank", "@nonunit_dims"):
        shape = shapes.get(node.input[0]) if node.input else None
        if shape is None:
            return None
        value = len(shape) if c.attr == "@input_rank" else sum(
            1 for d in shape if not (isinstance(d, int) and d == 1))
        label = "input rank" if c.attr == "@input_rank" else "input dims larger than 1"
        lo, hi = c.range or (0, 1 << 30)
        return None if lo <= value <= hi else f"{label} {value} (allowed {lo} to {hi})"
    value = _attr(node, c.attr)
    if value is None and c.attr == "kernel_shape" and len(node.input) > 1:
        w = shapes.get(node.input[1])
        value = [d for d in w[2:]] if w and len(w) > 2 else None
    if value is None:
        value = c.default
    if value is None:
        return None
    if c.range is not None:
        vals = value if isinstance(value, list) else [value]
        if all(isinstance(v, int) for v in vals) and not all(c.range[0] <= v <= c.range[1] for v in vals):
            return f"{c.attr} {vals} outside [{c.range[0]}, {c.range[1]}]"
        return None
    if c.one_of is not None:
        return None if str(value) in c.one_of else f"{c.attr} '{value}' not one of {', '.join(c.one_of)}"
    if c.same and isinstance(value, list) and len(set(value)) > 1:
        return f"{c.attr} {value} differ"
    return None


def analyze(model, target: Target) -> Dict[str, Any]:
    """The `model.*` facts of a loaded ModelProto, judged against `target`."""
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    shapes = _inferred_shapes(model) if target.constraints else {}
    initializers = {i.name for i in graph.initializer}

    dynamic_inputs = []
    for vi in graph.input:
        if vi.name in initializers:
            continue
        shape = _shape_of(vi)
        if shape is None:
            dynamic_inputs.append({"name": vi.name, "shape": "unknown (no shape in the graph)",
                                   "dynamic": ["all"]})
            continue
        dyn = [str(d) for d in shape if not isinstance(d, int)]
        if dyn:
            dynamic_inputs.append({"name": vi.name, "shape": "[" + ", ".join(str(d) for d in shape) + "]",
                                   "dynamic": dyn})

    op_counts: Dict[str, int] = {}
    control, training = [], []
    issues: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    consumers: Dict[str, List[Any]] = {}
    producers: Dict[str, Any] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
        for o in node.output:
            producers[o] = node

    for index, (node, prefix) in enumerate(walk(graph)):
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        op_counts[op] = op_counts.get(op, 0) + 1
        name = _node_name(node, prefix, index)
        if node.op_type in CONTROL_FLOW and node.domain in ("", "ai.onnx"):
            outer = next((c for c in control if prefix.startswith(c["node"] + "/")), None)
            if outer is not None:          # one finding per outermost region, not per nested If
                outer["nested"] += 1
                continue
            branches = sum(1 for a in node.attribute if a.type == a.GRAPH) + sum(len(a.graphs) for a in node.attribute)
            control.append({"node": name, "op": node.op_type, "placement": target.placement_of(node.op_type),
                            "branches": branches, "nested": 0})
            continue
        if node.op_type == "Dropout" and node.domain in ("", "ai.onnx"):
            why = "Dropout left in the graph (export in training mode, or an opset that keeps it)"
            if len(node.input) >= 3 and node.input[2]:
                why = "Dropout with a training_mode input"
            training.append({"node": name, "op": "Dropout", "why": why})
            continue
        if node.op_type == "BatchNormalization" and (_attr(node, "training_mode") == 1 or len(node.output) > 1):
            training.append({"node": name, "op": "BatchNormalization",
                             "why": "BatchNormalization in training mode (training_mode=1 or running mean/var outputs)"})
        if node.domain in TRAINING_DOMAINS:
            training.append({"node": name, "op": op, "why": f"training operator of domain {node.domain}"})
            continue
        if node.domain not in ("", "ai.onnx"):
            _add_issue(issues, op, name, "unsupported",
                       f"custom operator of domain '{node.domain}': not in {target.toolkit}'s ONNX list", target)
            continue
        placement = target.placement_of(node.op_type)
        if placement in ("cpu", "unsupported", "unknown"):
            why = {"cpu": f"no {target.name} kernel: {target.toolkit} {target.toolkit_version} places it on the CPU",
                   "unsupported": f"not supported by {target.toolkit} {target.toolkit_version}",
                   "unknown": f"not in the documented {target.toolkit} list (that list is partial: check the vendor's full table)"}[placement]
            _add_issue(issues, node.op_type, name, placement, why, target)
            continue
        if placement != "npu":
            continue
        for c in target.constraints:
            if c.op not in (node.op_type, "*"):
                continue
            why = _violation(c, node, shapes)
            if why:
                _add_issue(issues, node.op_type, name, c.placement,
                           f"{why} ({c.source})", target)
                break

    outputs, seen = [], set()
    input_names = {i.name for i in graph.input}
    for idx, vi in enumerate(graph.output):
        # the repeat is the problem (unreachable), not the first one
        outputs.append({"name": vi.name, "index": idx, "duplicate": vi.name in seen,
                        "also_input": vi.name in input_names})
        seen.add(vi.name)

    layout = _layout(graph, consumers, producers)
    return {"format": "onnx", "opset": opset, "ir_version": model.ir_version,
            "producer": (f"{model.producer_name} {model.producer_version}".strip() or None),
            "node_count": sum(op_counts.values()), "op_counts": op_counts,
            "dynamic_inputs": dynamic_inputs, "control_flow": control, "training_ops": training,
            "op_issues": sorted(issues.values(), key=lambda d: (d["placement"] != "unsupported", d["op"])),
            "outputs": outputs, "layout": layout}


def _add_issue(issues, op: str, node: str, placement: str, why: str, target: Target) -> None:
    # ops a partial list does not name make one finding together, not one each
    key = ("", placement, why) if placement == "unknown" else (op, placement, why)
    entry = issues.get(key)
    if entry is not None and placement == "unknown" and op not in entry["op"].split(", "):
        entry["op"] += f", {op}"
    if entry is None:
        entry = issues[key] = {"op": op, "node": node, "nodes": [], "count": 0,
                               "placement": placement, "why": why,
                               "substitute": target.substitutes.get(op)}
    entry["count"] += 1
    if len(entry["nodes"]) < 20:
        entry["nodes"].append(node)


def _layout(graph, consumers, producers) -> Dict[str, Any]:
    """Transposes that feed or follow a convolution: NCHW<->NHWC churn an NPU pays for."""
    conv_ops = ("Conv", "ConvTranspose", "QLinearConv", "ConvInteger")
    total, around, first = 0, 0, None
    for node in graph.node:
        if node.op_type != "Transpose":
            continue
        total += 1
        before = producers.get(node.input[0]) if node.input else None
        after = [c for o in node.output for c in consumers.get(o, [])]
        if (before is not None and before.op_type in conv_ops) or any(c.op_type in conv_ops for c in after):
            around += 1
            if first is None:
                first = node.name or "Transpose"
    return {"transposes": total, "around_conv": around, "node": first}
