"""CPU fallback stated in runtime and compiler logs: which operators ran on the CPU.

The seed write-ups' first method: turn the runtime's log up and search it for what was
placed on the CPU. Every parser here is a pure function on the *whole* text of one log and
returns a list of entries, one per statement the log makes:

    {"runtime": "onnxruntime" | "qnn" | "vitisai" | "edgetpu" | "rknn" | "torch_npu" | "ascend"
                | "tflite" | "tflite_gpu" | "tflite_nnapi" | "armnn" | "tensorrt" | "opencv_dnn",
     "kind": "op" | "total" | "hint",
     "op": "Gather" | None,          # operator type as the log prints it (None: not named)
     "count": 1 | None,              # operators this entry stands for (None: not stated)
     "target": "CPUExecutionProvider" | "CPU" | "AiCpu" | "GPU" (TensorRT: off the DLA),
     "line_no": 7,                   # 1-based line in the log
     "group": 6,                     # line of the block header: entries of one block share it
     "line": "...", ...}             # the cleaned line, plus format-specific keys (node, status)

- kind "op": one operator type (with how many of it) on the CPU;
- kind "total": a count the log states for a whole block ("Number of nodes: 39",
  "Number of operations that will run on CPU: 2"); within a block the stated total wins over
  the sum of the listed operators (a log can be truncated after the first few);
- kind "hint": the log says *some* nodes left the accelerator without naming or counting them
  (ONNX Runtime's "Some nodes were not assigned to the preferred execution providers").

`aggregate()` turns entries into {ops, count, op_counts}. ANSI colour codes, carriage-return
progress output, timestamps and `[rankN]:` prefixes are removed before matching, so the same
parser reads a terminal capture, a journald export and a file log.

Formats (verbatim examples; sources):

ONNX Runtime, any execution provider (onnxruntime/core/framework/session_state.cc,
VerifyEachNodeIsAssignedToAnEp; VERBOSE log level):
- 1.13+: `Node placements` / ` Node(s) placed on [CPUExecutionProvider]. Number of nodes: 39`
  then one `  Gather (Gather_1067)` line (OpType (node name)) per node; one provider only:
  ` All nodes placed on [CPUExecutionProvider]. Number of nodes: 52`
  (https://github.com/ROCm/AMDMIGraphX/issues/1641, https://github.com/k2-fsa/sherpa-onnx/issues/163).
- 0.5-1.12: ` Provider: [CPUExecutionProvider]: [Gather (Gather_1), Shape (Shape_2), ]` and
  ` All nodes have been placed on [CPUExecutionProvider].`
  (https://github.com/microsoft/onnxruntime/pull/2221, /pull/2229); briefly (PR 12276)
  ` Node [Gather (Gather_1)] has been placed on [CPUExecutionProvider].`
- `CUDA kernel not found in registries for Op type: ScatterND node name: ScatterND_1`
  (also webgpu, MPS, ROCm): INFO lines of the EP's GetCapability; used only when the log has
  no placement dump.
- QNN EP: `Unsupported nodes in QNN EP: { name: n0, type: DequantizeLinear }{ ... }`
  (https://github.com/microsoft/onnxruntime/issues/22821, krrishnarraj/clpeak#197);
  `Non-QDQ Conv operators are not supported on HTP or DSP backends. Conv node `x will not be
  assigned to QNN EP.` (ORT 1.16, /pull/16750); `Number of partitions supported by QNN EP: 3,
  number of nodes in the graph: 60, number of nodes supported by QNN: 58` (the same summary
  for CoreML/NNAPI); used only when no node is named.
- OpenVINO EP (2019-2020): `[OpenVINO-EP] Rejecting as graph has unsupported operations.Operation
  is not supported by OpenVINO`: the whole graph stays on the CPU, count not stated
  (https://github.com/microsoft/onnxruntime/issues/2298).
- QNN EP backend setup failure: `QNN SetupBackend failed Failed to create device. Error: 14001`,
  `... Unable to load backend, error: load library failed` (microsoft/onnxruntime#21214, #20206):
  GetCapability claims nothing, so the whole graph runs on the CPU EP; count not stated.
- Vitis AI EP (Ryzen AI): `[Vitis AI EP] No. of Operators :   CPU     8    NPU  2356
  VITIS_EP_CPU    13` (amd/RyzenAI-SW#318), `[Vitis AI EP] No. of Operators : CPU 400`
  (amd/RyzenAI-SW#170); older releases say IPU and add a percentage. Only the CPU column is
  counted (VITIS_EP_CPU is kept as a detail). The XIR partitioner's per-operator line
  `xir::Op{name = X, type = fix2float} is not supported by current target. Target name: ...,
  target type: IPU_PHX. Assign it to CPU.` (amd/RyzenAI-SW#85; also the DPU compilers of Vitis AI
  1.x-3.x) names the operator type; counted only when the log has no operator summary.
- The warning `Some nodes were not assigned to the preferred execution providers ...` names
  nothing: it becomes a "hint" entry.
- ORT's CPU-preference pass (GetCpuPreferredNodes: `Force fallback to CPU execution for node:
  x`, 1.9+ `ORT optimization- Force fallback ... because the CPU execution path is deemed
  faster ...`, `Candidate for fallback CPU execution: x`) is not counted: ORT puts those shape
  nodes on the CPU on purpose although the EP could run them (catalogs/onnxruntime.toml explains
  the line as benign).
- QNN EP node validation: `Validation FAILED for nodes (NodeUnit):` (1.18-1.20) / `Validation
  FAILED for 3 nodes in NodeUnit (Sqrt) :` (1.21+) then `\tOperator type: Sqrt Node name: x
  Node index: 525` lines (microsoft/onnxruntime#22820); 1.15-1.17 `Node supported: [0] index: [12]
  name: [x] Operator type: [Sqrt]`; the backend's `QNN.backendValidateOpConfig() failed for node
  `x` of type `Concat` with error code 3110` (QNN op names; microsoft/onnxruntime#22532) and
  1.14-1.17 `Validating node failed for: x`. Only the best kind present counts (the EP's
  unsupported list, then the validation blocks, then the backend lines).

Edge TPU compiler (`edgetpu_compiler` 2.x, 14, 15, 16; stdout and the `*_edgetpu.log`
operation log): `Number of operations that will run on CPU: 2`, then the table
`Operator  Count  Status` whose rows with any status other than `Mapped to Edge TPU`
("Operation is otherwise supported, but not mapped due to some unspecified limitation",
"More than one subgraph is not supported", "Operation is working on an unsupported data
type", "Operation not supported", ...) run on the CPU
(https://github.com/google-coral/edgetpu/issues/219, #342, #490, #60, #393).

RKNN (rknn-toolkit2 1.x/2.x compiler, librknnrt/librknnmrt runtime):
- `W RKNN: [13:52:53.504] Transpose will fallback to CPU, because ...`
  (https://github.com/airockchip/rknn-toolkit2/issues/490);
- verbose build: `D RKNN: [07:52:21.565] node: MatMul:MatMul_38, Target: CPU`
  (https://github.com/rockchip-linux/rknn-toolkit2/issues/217);
- layer tables with a Target column (build `RKNNModelBuildPass` statistics, `eval_perf`,
  `RKNN_LOG_LEVEL=4` runtime): `ID OpType DataType Target InputShape ... FullName`; CPU rows
  other than InputOperator/OutputOperator (the I/O copies every model has) count;
- runtime: `E RKNN: unsupport cpu ArgMax op, op name: ArgMax:ArgMax in current, ...` +
  `rknn fallback cpu failed` (airockchip/rknn-toolkit2#557, #482, #145) and
  `E RKNN: [..] Unsupport CPU op: CumSum in this librknnrt.so, ...` (immich-app/immich#15241):
  the model put the op on the CPU and this runtime has no CPU kernel for it.

PyTorch XPU (torch-xpu-ops XPUFallback): `Aten Op fallback from XPU to CPU happends.` (once per
process, no operator named; "happens" in later releases; intel/torch-xpu-ops#4253, #1328) and,
with PYTORCH_DEBUG_XPU_FALLBACK=1, `The operator 'aten::x on the XPU backend is falling back to
run on the CPU.` per operator.

PyTorch MPS per-operator fallbacks: `MPS: nonzero op is supported natively starting from macOS
13.0. Falling back on CPU.` and the other `MPS: ... Falling back on CPU` wordings
(pytorch/pytorch#132110; aten/src/ATen/native/mps/operations; see torch_npu.py).

torch_npu / PyTorch PrivateUse1 fallback (`npu_cpu_fallback`):
`[W compiler_depend.ts:51] Warning: CAUTION: The operator 'torchvision::nms' is not currently
supported on the NPU backend and will fall back to run on the CPU. This may have performance
implications. (function npu_cpu_fallback)`; newer torch prefixes `[rank0]:[W107 21:14:04.2
VariableFallbackKernel.cpp:250]`; terminals wrap the line mid-word
(opendatalab/MinerU#1695, #1941; Ascend/pytorch#51; vllm-project/vllm-omni#755;
modelscope/ms-swift#1047 "run on CPU"). Each operator warns once per process, so an operator
repeated by several ranks counts once.

OpenCV DNN's CUDA backend (initCUDABackend, INFO level): `CUDA backend will fallback to the CPU
implementation for the layer "onnx_node!ReduceMean_390" of type Reduce` per layer without a CUDA
implementation (opencv/opencv#24064); format and source in `opencv.py`.

TensorFlow Lite delegates (GPU, NNAPI, Arm NN; the interpreter's `Replacing N out of M node(s)`
summary) and TensorRT's DLA-to-GPU fallback: formats and sources in `tflite.py` and
`tensorrt.py`.

Ascend AICPU (torch_npu op-plugin): `Warning: kernel [ArgSort] can not support dtype int32 or
int64 on AiCore, Now this kernel is running on AiCpu.` (vllm-project/vllm-ascend#2210); CANN
profiler CSVs (`op_statistic.csv`: `OP Type,Core Type,Count,...`; `kernel_details.csv`:
`...,Type,Accelerator Core,...`; `op_summary*.csv`: `...,OP Type,...,Task Type,...`) with
core/task type `AI_CPU`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from ...registry import parser
from .ascend import parse_ascend_aicpu
from .common import ESCAPES, MAX_LINE, Entry, clean_line, forget, log_lines, strip_prefix  # noqa: F401
from .edgetpu import _ETPU_ANY, parse_edgetpu
from .onnxruntime import _ORT_ANY, _VITIS_ANY, parse_onnxruntime, parse_vitisai
from .opencv import _ANY as _OPENCV_ANY
from .opencv import parse_opencv_dnn
from .rknn import _RKNN_ANY, parse_rknn
from .tensorrt import _ANY as _TRT_ANY
from .tensorrt import parse_tensorrt_dla
from .tflite import _ANY as _TFLITE_ANY
from .tflite import parse_tflite
from .torch_npu import TRIGGER_LITERALS as TORCH_TRIGGERS
from .torch_npu import parse_torch_npu

# -- all of them ---------------------------------------------------------------------------
PARSERS = (parse_onnxruntime, parse_vitisai, parse_edgetpu, parse_rknn, parse_torch_npu,
           parse_ascend_aicpu, parse_tflite, parse_tensorrt_dla, parse_opencv_dnn)

RUNTIME_NAMES = {
    "onnxruntime": "ONNX Runtime",
    "qnn": "ONNX Runtime QNN EP",
    "vitisai": "ONNX Runtime Vitis AI EP",
    "edgetpu": "Edge TPU compiler",
    "rknn": "RKNN",
    "torch_npu": "torch_npu",
    "torch": "PyTorch",
    "ascend": "Ascend CANN",
    "tflite": "TensorFlow Lite",
    "tflite_gpu": "TFLite GPU delegate",
    "tflite_nnapi": "TFLite NNAPI delegate",
    "armnn": "Arm NN TFLite delegate",
    "tensorrt": "TensorRT (DLA)",
    "opencv_dnn": "OpenCV DNN (CUDA backend)",
}


#: per parser, literals of which a text must hold one for the parser to find anything (each
#: parser's own first test of a text), lower-cased; and what clean_line removes, which can split
#: a literal. A caller that already scanned a text for needles (collectors.logscan: one shared
#: pass per log) runs only the parsers whose literals it saw.
TRIGGERS: Dict[Any, Tuple[str, ...]] = {
    fn: tuple(sorted({x.lower() for x in lits})) for fn, lits in (
        (parse_onnxruntime, _ORT_ANY), (parse_vitisai, _VITIS_ANY),
        (parse_edgetpu, _ETPU_ANY), (parse_rknn, _RKNN_ANY),
        (parse_torch_npu, TORCH_TRIGGERS), (parse_ascend_aicpu, ("aicpu", "ai_cpu")),
        (parse_tflite, _TFLITE_ANY), (parse_tensorrt_dla, _TRT_ANY),
        (parse_opencv_dnn, _OPENCV_ANY))}
TRIGGER_NEEDLES = tuple(sorted({x for lits in TRIGGERS.values() for x in lits} | set(ESCAPES)))


@parser("fallback_logs")
def parse_fallback_logs(text: str, present: Optional[Iterable[str]] = None) -> List[Entry]:
    """Every parser of this module on one log, entries in line order. `present`: the
    TRIGGER_NEEDLES the lower-cased text holds, when the caller knows (None: run them all)."""
    out: List[Entry] = []
    seen = None if present is None else set(present)
    if seen is not None and not seen.isdisjoint(ESCAPES):
        seen = None
    for fn in PARSERS:
        if seen is not None and seen.isdisjoint(TRIGGERS[fn]):
            continue
        out.extend(fn(text))
    forget()
    out.sort(key=lambda e: (e["line_no"], e["runtime"]))
    return out


def aggregate(entries: Iterable[Entry]) -> Dict[str, Any]:
    """Sum entries (of one log, or any set): {ops, count, op_counts, lines}.

    - ops: distinct operator types in order of first appearance (line order);
    - count: per block (runtime + group), the stated total when there is one, else the sum of
      the listed operators; summed over blocks; None when no entry states a number;
    - op_counts: {op: number the log lists}; lines: sorted line numbers used.
    Hint entries are ignored.
    """
    entries = [e for e in entries if e.get("kind") in ("op", "total")]
    entries.sort(key=lambda e: e["line_no"])
    ops: List[str] = []
    op_counts: Dict[str, int] = {}
    blocks: Dict[Tuple[str, int], Dict[str, Any]] = {}
    for e in entries:
        b = blocks.setdefault((e["runtime"], e["group"]), {"total": None, "sum": None})
        if e["kind"] == "total":
            if e.get("count") is not None:
                b["total"] = (b["total"] or 0) + e["count"]
            continue
        op = e.get("op")
        if op:
            if op not in op_counts:
                ops.append(op)
                op_counts[op] = 0
            op_counts[op] += e.get("count") or 0   # 0: named, not counted
        if e.get("count") is not None:
            b["sum"] = (b["sum"] or 0) + e["count"]
    count: Optional[int] = None
    for b in blocks.values():
        val = b["total"] if b["total"] is not None else b["sum"]
        if val is not None:
            count = (count or 0) + val
    return {"ops": ops, "count": count, "op_counts": op_counts,
            "lines": sorted({e["line_no"] for e in entries})}


def line_ranges(nums: Iterable[int]) -> str:
    """`[7, 8, 9, 12]` -> `7-9, 12`."""
    nums = sorted(set(nums))
    parts: List[str] = []
    start = prev = None
    for x in nums:
        if start is None:
            start = prev = x
        elif x == prev + 1:
            prev = x
        else:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = x
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(parts)
