"""CPU fallback stated in runtime and compiler logs: which operators ran on the CPU.

The seed write-ups' first method: turn the runtime's log up and search it for what was
placed on the CPU. Every parser here is a pure function on the *whole* text of one log and
returns a list of entries, one per statement the log makes:

    {"runtime": "onnxruntime" | "qnn" | "vitisai" | "edgetpu" | "rknn" | "torch_npu" | "ascend",
     "kind": "op" | "total" | "hint",
     "op": "Gather" | None,          # operator type as the log prints it (None: not named)
     "count": 1 | None,              # operators this entry stands for (None: not stated)
     "target": "CPUExecutionProvider" | "CPU" | "AiCpu",
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
- Vitis AI EP (Ryzen AI): `[Vitis AI EP] No. of Operators :   CPU     8    NPU  2356
  VITIS_EP_CPU    13` (amd/RyzenAI-SW#318), `[Vitis AI EP] No. of Operators : CPU 400`
  (amd/RyzenAI-SW#170); older releases say IPU and add a percentage. Only the CPU column is
  counted (VITIS_EP_CPU is kept as a detail).
- The warning `Some nodes were not assigned to the preferred execution providers ...` names
  nothing: it becomes a "hint" entry.

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

torch_npu / PyTorch PrivateUse1 fallback (`npu_cpu_fallback`):
`[W compiler_depend.ts:51] Warning: CAUTION: The operator 'torchvision::nms' is not currently
supported on the NPU backend and will fall back to run on the CPU. This may have performance
implications. (function npu_cpu_fallback)`; newer torch prefixes `[rank0]:[W107 21:14:04.2
VariableFallbackKernel.cpp:250]`; terminals wrap the line mid-word
(opendatalab/MinerU#1695, #1941; Ascend/pytorch#51; vllm-project/vllm-omni#755;
modelscope/ms-swift#1047 "run on CPU"). Each operator warns once per process, so an operator
repeated by several ranks counts once.

Ascend AICPU (torch_npu op-plugin): `Warning: kernel [ArgSort] can not support dtype int32 or
int64 on AiCore, Now this kernel is running on AiCpu.` (vllm-project/vllm-ascend#2210); CANN
profiler CSVs (`op_statistic.csv`: `OP Type,Core Type,Count,...`; `kernel_details.csv`:
`...,Type,Accelerator Core,...`; `op_summary*.csv`: `...,OP Type,...,Task Type,...`) with
core/task type `AI_CPU`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..registry import parser

Entry = Dict[str, Any]

MAX_LINE = 300

# -- cleaning ------------------------------------------------------------------------------
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")
_PREFIX_RES = [
    re.compile(r"^\s*\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*"),                 # ray worker
    re.compile(r"^\s*\[?rank\d+\]?:\s*"),                                    # torch.distributed
    re.compile(r"^\s*[IVWED]/[\w.]+(?:\(\s*\d+\))?:\s*"),                    # android logcat
    re.compile(r"^\s*\[?\d{2,4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
               r"(?:Z|[+-]\d{2}:?\d{2})?\]?\s*"),                            # ISO date-time
    re.compile(r"^\s*[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [^\s:]+(?:\[\d+\])?:\s*"),  # syslog
    re.compile(r"^\s*\[\s*\d+\.\d+\]\s*"),                                   # dmesg
    re.compile(r"^\s*\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+"),               # bare time
    re.compile(r"^\s*[DIWEF] RKNN(?:API)?:\s*(?:\[\d{2}:\d{2}:\d{2}(?:\.\d+)?\]\s*)?"),  # RKNN
]


def clean_line(line: str) -> str:
    """A log line without ANSI escapes, carriage-return overwrites and trailing blanks."""
    line = _ANSI_RE.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line.rstrip()


def log_lines(text: str) -> List[str]:
    """Cleaned lines of a log; index i is line number i + 1."""
    return [clean_line(x) for x in text.replace("\r\n", "\n").split("\n")]


def strip_prefix(line: str) -> str:
    """The message part of a line: timestamps, `[rankN]:`, syslog and RKNN prefixes removed."""
    prev = None
    while prev != line:
        prev = line
        for rx in _PREFIX_RES:
            line = rx.sub("", line, count=1)
    return line


def _entry(runtime: str, kind: str, op: Optional[str], count: Optional[int], target: str,
           line_no: int, group: int, line: str, **extra: Any) -> Entry:
    e: Entry = {"runtime": runtime, "kind": kind, "op": op, "count": count, "target": target,
                "line_no": line_no, "group": group, "line": line.strip()[:MAX_LINE]}
    e.update({k: v for k, v in extra.items() if v is not None})
    return e


# -- ONNX Runtime --------------------------------------------------------------------------
_ORT_MARK = "VerifyEachNodeIsAssignedToAnEp]"
_ORT_PLACED_RE = re.compile(
    r"(?P<all>All nodes|Node\(s\)) placed on \[(?P<ep>[\w:.\-]+)\]\.?\s*Number of nodes:\s*(?P<n>\d+)")
_ORT_ALL_OLD_RE = re.compile(r"All nodes have been placed on \[(?P<ep>[\w:.\-]+)\]")
_ORT_PROVIDER_OLD_RE = re.compile(r"\bProvider: \[(?P<ep>[\w:.\-]+)\]: \[(?P<nodes>.*)\]\s*$")
_ORT_NODE_OLD_RE = re.compile(r"\bNode \[(?P<op>[\w.:\-]+) \((?P<name>[^()]*)\)\] has been placed on "
                              r"\[(?P<ep>[\w:.\-]+)\]")
_ORT_NODE_RE = re.compile(r"^\s*(?P<op>[A-Za-z_][\w.:\-]*) \((?P<name>[^()]*)\)\s*$")
_ORT_LIST_ITEM_RE = re.compile(r"(?P<op>[A-Za-z_][\w.:\-]*) \((?P<name>[^()]*)\)")
_ORT_NOT_FOUND_RE = re.compile(
    r"\b(?P<ep>\w+) kernel not found in registries for Op type: (?P<op>[\w.:\-]+)"
    r"(?: node name: (?P<name>.*?))?\s*$")
_ORT_HINT_RE = re.compile(r"Some nodes were not assigned to the preferred execution providers")
_OTHER_EP_RE = re.compile(r"\b(?!CPU)[A-Z][A-Za-z0-9]*ExecutionProvider\b|\b(?:QNN|Vitis AI|OpenVINO|"
                          r"TensorRT|CANN|MIGraphX|DML|CoreML|NNAPI) EP\b")
_QNN_UNSUPPORTED_RE = re.compile(r"Unsupported nodes in QNN EP:\s*(?P<rest>.*)$")
_QNN_ITEM_RE = re.compile(r"\{\s*name:\s*(?P<name>[^,}]*?)\s*,\s*type:\s*(?P<op>[\w.:\-]+)\s*\}")
_QNN_NONQDQ_RE = re.compile(r"Non-QDQ (?P<op>[\w.:\-]+) operators are not supported on HTP or DSP "
                            r"backends\. \S+ node `(?P<name>.*?) will not be assigned to QNN EP")
_EP_SUMMARY_RE = re.compile(r"number of nodes in the graph:\s*(?P<total>\d+)[,\s]+number of nodes "
                            r"supported by (?P<ep>[\w ]+?):\s*(?P<sup>\d+)")
_OPENVINO_REJECT_RE = re.compile(r"\[OpenVINO-EP\] Rejecting as graph has unsupported operations")
_VITIS_RE = re.compile(r"\[Vitis AI EP\]\s*No\. of Operators\s*:\s*(?P<rest>.*)$")
_VITIS_PAIR_RE = re.compile(r"([A-Za-z_]+)\s+(\d+)(?:\s+[\d.]+%)?")

CPU_EP = "CPUExecutionProvider"
#: any line an ONNX Runtime parser acts on contains one of these (a cheap first test)
_ORT_ANY_RE = re.compile(r"placed on \[|Provider: \[|kernel not found in registries|Unsupported nodes in "
                         r"QNN|Non-QDQ |number of nodes in the graph|OpenVINO-EP\] Rejecting|Some nodes "
                         r"were not assigned")


def _ort_body(line: str) -> str:
    i = line.find(_ORT_MARK)
    return line[i + len(_ORT_MARK):] if i >= 0 else strip_prefix(line)


@parser("fallback_onnxruntime")
def parse_onnxruntime(text: str) -> List[Entry]:
    """CPU placements an ONNX Runtime log states (see the module docstring for formats).

    Placement dumps are authoritative: when a log has one, the per-EP "kernel not found" and
    QNN "Unsupported nodes" lines of the same log are not counted again. "All nodes placed on
    [CPUExecutionProvider]" is a fallback only when the log mentions another execution
    provider (a plain CPU session places everything on the CPU by design). Identical
    placement dumps (the same session created twice) count once.
    """
    if not _ORT_ANY_RE.search(text):
        return []
    lines = log_lines(text)
    placements: List[Entry] = []
    others: List[Entry] = []
    other_ep = bool(_OTHER_EP_RE.search(text))
    seen_blocks = set()
    i = 0
    n = len(lines)
    while i < n:
        raw = lines[i]
        line_no = i + 1
        if not _ORT_ANY_RE.search(raw):
            i += 1
            continue
        m = _ORT_PLACED_RE.search(raw)
        if m:
            ep, count = m.group("ep"), int(m.group("n"))
            nodes: List[Tuple[int, str, str, str]] = []
            j = i + 1
            if m.group("all") == "Node(s)":
                while j < n:
                    body = _ort_body(lines[j])
                    if _ORT_PLACED_RE.search(lines[j]):
                        break
                    nm = _ORT_NODE_RE.match(body)
                    if not nm:
                        break
                    nodes.append((j + 1, nm.group("op"), nm.group("name"), lines[j]))
                    j += 1
            if ep == CPU_EP and (m.group("all") == "Node(s)" or other_ep):
                key = (ep, count, tuple((op, name) for _, op, name, _ in nodes))
                if key not in seen_blocks:
                    seen_blocks.add(key)
                    placements.append(_entry("onnxruntime", "total", None, count, ep, line_no,
                                             line_no, raw, all_nodes=m.group("all") == "All nodes"))
                    for ln, op, name, text_line in nodes:
                        placements.append(_entry("onnxruntime", "op", op, 1, ep, ln, line_no,
                                                 text_line, node=name or None))
            i = j
            continue
        m = _ORT_ALL_OLD_RE.search(raw)
        if m:
            if m.group("ep") == CPU_EP and other_ep:
                placements.append(_entry("onnxruntime", "total", None, None, CPU_EP, line_no,
                                         line_no, raw, all_nodes=True))
            i += 1
            continue
        m = _ORT_PROVIDER_OLD_RE.search(raw)
        if m:
            if m.group("ep") == CPU_EP:
                items = _ORT_LIST_ITEM_RE.findall(m.group("nodes"))
                for op, name in items:
                    placements.append(_entry("onnxruntime", "op", op, 1, CPU_EP, line_no, line_no,
                                             raw, node=name or None))
            i += 1
            continue
        m = _ORT_NODE_OLD_RE.search(raw)
        if m:
            if m.group("ep") == CPU_EP:
                placements.append(_entry("onnxruntime", "op", m.group("op"), 1, CPU_EP, line_no,
                                         -1, raw, node=m.group("name") or None))
            i += 1
            continue
        m = _ORT_NOT_FOUND_RE.search(raw)
        if m:
            others.append(_entry("onnxruntime", "op", m.group("op"), 1, CPU_EP, line_no, -2, raw,
                                 node=(m.group("name") or "").strip() or None,
                                 ep=m.group("ep")))
            i += 1
            continue
        m = _QNN_UNSUPPORTED_RE.search(raw)
        if m:
            for im in _QNN_ITEM_RE.finditer(m.group("rest")):
                others.append(_entry("qnn", "op", im.group("op"), 1, CPU_EP, line_no, -3, raw,
                                     node=im.group("name") or None))
            i += 1
            continue
        m = _QNN_NONQDQ_RE.search(raw)
        if m:
            others.append(_entry("qnn", "op", m.group("op"), 1, CPU_EP, line_no, -3, raw,
                                 node=m.group("name") or None))
            i += 1
            continue
        m = _EP_SUMMARY_RE.search(raw)
        if m:
            total, sup = int(m.group("total")), int(m.group("sup"))
            if total > sup:
                rt = "qnn" if m.group("ep").strip() == "QNN" else "onnxruntime"
                others.append(_entry(rt, "summary", None, total - sup, CPU_EP, line_no, line_no,
                                     raw, graph_nodes=total, supported_nodes=sup,
                                     ep=m.group("ep").strip()))
            i += 1
            continue
        if _OPENVINO_REJECT_RE.search(raw):
            others.append(_entry("onnxruntime", "reject", None, None, CPU_EP, line_no, line_no, raw,
                                 all_nodes=True, ep="OpenVINO"))
            i += 1
            continue
        if _ORT_HINT_RE.search(raw):
            others.append(_entry("onnxruntime", "hint", None, None, CPU_EP, line_no, line_no, raw))
        i += 1
    if placements:
        return placements + [e for e in others if e["kind"] == "hint"]
    # No placement dump: per-node statements, deduplicated by node (a session retried).
    out: List[Entry] = []
    seen_nodes = set()
    listed = [e for e in others if e["kind"] == "op"]
    for e in listed:
        key = (e["runtime"], e["op"], e.get("node") or e["line_no"])
        if key in seen_nodes:
            continue
        seen_nodes.add(key)
        out.append(e)
    if not listed:
        # QNN summary counts only when no node is named (its "supported" figure is the
        # partition count in some ORT releases, so a named list is better evidence).
        summaries = [e for e in others if e["kind"] == "summary"]
        rejects = [e for e in others if e["kind"] == "reject"]
        if summaries:
            e = dict(summaries[-1])
            e["kind"] = "total"
            out.append(e)
        elif rejects:
            e = dict(rejects[0])
            e["kind"] = "total"
            out.append(e)
    out.extend(e for e in others if e["kind"] == "hint")
    return out


@parser("fallback_vitisai")
def parse_vitisai(text: str) -> List[Entry]:
    """Vitis AI EP operator counts: one "total" entry per `No. of Operators` line with a CPU
    column (count = CPU; the other columns, e.g. NPU, IPU, VITIS_EP_CPU, kept in `columns`)."""
    out: List[Entry] = []
    if "Vitis AI EP" not in text:
        return out
    for i, raw in enumerate(log_lines(text)):
        if "No. of Operators" not in raw:
            continue
        m = _VITIS_RE.search(raw)
        if not m:
            continue
        cols: Dict[str, int] = {}
        for name, num in _VITIS_PAIR_RE.findall(m.group("rest")):
            cols.setdefault(name, int(num))
        cpu = cols.get("CPU")
        if cpu:
            out.append(_entry("vitisai", "total", None, cpu, "CPU", i + 1, i + 1, raw,
                              columns=cols))
    return out


# -- Edge TPU compiler ---------------------------------------------------------------------
_ETPU_HEADER_RE = re.compile(r"^\s*Operator\s+Count\s+Status\s*$")
_ETPU_ROW_RE = re.compile(r"^\s*(?P<op>[A-Za-z][\w\-]*)\s+(?P<n>\d+)\s+(?P<status>[A-Za-z].*?)\s*$")
_ETPU_CPU_TOTAL_RE = re.compile(r"Number of operations that will run on CPU:\s*(?P<n>\d+)")
_ETPU_MAPPED = "mapped to edge tpu"


@parser("fallback_edgetpu")
def parse_edgetpu(text: str) -> List[Entry]:
    """Edge TPU compiler summary and operator table.

    Rows whose status is not "Mapped to Edge TPU" become "op" entries (count = the Count
    column, status kept); `Number of operations that will run on CPU: N` (N > 0) becomes the
    "total" of the table that follows it. A table with every row mapped yields nothing.
    """
    out: List[Entry] = []
    if "will run on CPU" not in text and "Status" not in text:
        return out
    raw_lines = log_lines(text)
    lines: List[str] = []
    pending_total: Optional[Entry] = None
    i, n = 0, len(raw_lines)

    def at(k: int) -> str:
        while len(lines) <= k:
            lines.append(strip_prefix(raw_lines[len(lines)]))
        return lines[k]

    while i < n:
        raw = raw_lines[i]
        if "will run on CPU" not in raw and "Status" not in raw:
            i += 1
            continue
        line = at(i)
        m = _ETPU_CPU_TOTAL_RE.search(line)
        if m:
            cnt = int(m.group("n"))
            pending_total = (_entry("edgetpu", "total", None, cnt, "CPU", i + 1, i + 1, line)
                             if cnt > 0 else None)
            if pending_total is not None:
                out.append(pending_total)
            i += 1
            continue
        if _ETPU_HEADER_RE.match(line):
            group = pending_total["group"] if pending_total else i + 1
            j = i + 1
            while j < n and not at(j).strip():
                j += 1
            while j < n:
                rm = _ETPU_ROW_RE.match(at(j))
                if not rm:
                    if at(j).strip():
                        break
                    j += 1
                    continue
                status = rm.group("status")
                if not status.lower().startswith(_ETPU_MAPPED):
                    out.append(_entry("edgetpu", "op", rm.group("op"), int(rm.group("n")), "CPU",
                                      j + 1, group, at(j), status=status))
                j += 1
            pending_total = None
            i = j
            continue
        i += 1
    return out


# -- RKNN ----------------------------------------------------------------------------------
_RKNN_WILL_FALLBACK_RE = re.compile(r"\b(?P<op>[A-Z][A-Za-z0-9_]*) will fallback to CPU\b(?P<why>.*)$")
_RKNN_NODE_TARGET_RE = re.compile(r"\bnode:\s*(?P<op>[A-Za-z_][\w]*):(?P<name>\S+?),\s*Target:\s*"
                                  r"(?P<target>[A-Za-z_]+)")
_RKNN_UNSUPPORT_CPU_RE = re.compile(r"\bunsupport cpu (?P<op>[A-Za-z_]\w*) op(?:, op name:\s*"
                                    r"(?P<name>\S+))?", re.IGNORECASE)
_RKNN_UNSUPPORT_CPU2_RE = re.compile(r"\bUnsupport CPU op:\s*(?P<op>[A-Za-z_]\w*)")
_RKNN_TABLE_HEADER_RE = re.compile(r"^\s*ID\s+OpType\s+DataType\s+Target\b(?P<rest>.*)$")
_RKNN_IO_OPS = ("InputOperator", "OutputOperator")
#: any line the RKNN parser acts on contains one of these (a cheap first test)
_RKNN_ANY_RE = re.compile(r"OpType|Target:|fallback to CPU|nsupport cpu|nsupport CPU")


def _rknn_context(raw: str) -> bool:
    return "RKNN" in raw or "rknn" in raw


@parser("fallback_rknn")
def parse_rknn(text: str) -> List[Entry]:
    """RKNN compiler/runtime statements of operators on the CPU (see the module docstring).

    Each node counts once per log even when several formats name it (a build table and an
    eval_perf table of the same model). InputOperator/OutputOperator rows are the normal
    NPU<->CPU copies of every model and are not fallback.
    """
    out: List[Entry] = []
    if not _RKNN_ANY_RE.search(text):
        return out
    lines = log_lines(text)
    seen = set()

    def add(op: str, name: Optional[str], line_no: int, raw: str, **extra: Any) -> None:
        key = (op, name) if name else (op, "line", line_no)
        if key in seen:
            return
        seen.add(key)
        out.append(_entry("rknn", "op", op, 1, "CPU", line_no, 0, raw, node=name, **extra))

    in_table = False
    for i, raw in enumerate(lines):
        line_no = i + 1
        if not in_table and not _RKNN_ANY_RE.search(raw):
            continue
        body = strip_prefix(raw)
        hm = _RKNN_TABLE_HEADER_RE.match(body)
        if hm:
            in_table = True
            continue
        if in_table:
            cols = body.split()
            if len(cols) >= 4 and cols[0].isdigit():
                op, target = cols[1], cols[3]
                if target.upper() == "CPU" and op not in _RKNN_IO_OPS:
                    full = cols[-1] if ":" in cols[-1] and len(cols) > 5 else None
                    add(op, full or f"#{cols[0]}@{line_no}", line_no, raw, source_format="layer-table")
                continue
            if not body.strip() or set(body.strip()) <= set("-="):
                continue
            in_table = False
        m = _RKNN_NODE_TARGET_RE.search(raw)
        if m and _rknn_context(raw):
            if m.group("target").upper() == "CPU":
                add(m.group("op"), m.group("name"), line_no, raw, source_format="node-target")
            continue
        m = _RKNN_WILL_FALLBACK_RE.search(raw)
        if m and _rknn_context(raw):
            add(m.group("op"), None, line_no, raw, reason=m.group("why").lstrip(", ").strip() or None,
                source_format="will-fallback")
            continue
        m = _RKNN_UNSUPPORT_CPU_RE.search(raw) or _RKNN_UNSUPPORT_CPU2_RE.search(raw)
        if m and _rknn_context(raw):
            name = m.groupdict().get("name")
            add(m.group("op"), name, line_no, raw, runtime_missing_kernel=True,
                source_format="runtime-unsupported-cpu-op")
    return out


# -- torch_npu -----------------------------------------------------------------------------
_TORCH_FALLBACK_RE = re.compile(
    r"The operator '(?P<op>[^']+)' is not currently supported on the (?P<backend>\w+) backend "
    r"and will fall ?back to run on (?:the )?CPU")
_TORCH_START_RE = re.compile(r"The operator '")


@parser("fallback_torch_npu")
def parse_torch_npu(text: str) -> List[Entry]:
    """PyTorch backend CPU-fallback warnings (torch_npu `npu_cpu_fallback`; the same text is
    printed for MPS and other PrivateUse1 backends: runtime "torch" there, backend kept).

    A warning wrapped by the terminal over several lines is joined before matching. Each
    operator counts once per log (torch warns once per process; ranks repeat it).
    """
    out: List[Entry] = []
    if "The operator '" not in text:
        return out
    lines = log_lines(text)
    seen = set()
    for i, raw in enumerate(lines):
        if not _TORCH_START_RE.search(raw):
            continue
        parts = [strip_prefix(raw)]
        joined = parts[0]
        m = _TORCH_FALLBACK_RE.search(joined)
        k = i + 1
        while not m and k < len(lines) and k <= i + 3:
            # a terminal wraps mid-word (no blank) or at a blank that rstrip removed
            parts.append(strip_prefix(lines[k]))
            for sep in ("", " "):
                joined = sep.join(parts)
                m = _TORCH_FALLBACK_RE.search(joined)
                if m:
                    break
            k += 1
        if not m:
            continue
        op, backend = m.group("op"), m.group("backend")
        if op in seen:
            continue
        seen.add(op)
        rt = "torch_npu" if backend.upper() == "NPU" else "torch"
        out.append(_entry(rt, "op", op, 1, "CPU", i + 1, 0, joined, backend=backend))
    return out


# -- Ascend AICPU --------------------------------------------------------------------------
_AICPU_KERNEL_RE = re.compile(r"kernel \[(?P<op>[\w.:\-]+)\][^\n]*?running on AiCpu", re.IGNORECASE)
_CSV_SPLIT_RE = re.compile(r",")
_CSV_OP_COLS = ("op type", "type")
_CSV_CORE_COLS = ("core type", "task type", "accelerator core")


def _csv_ai_cpu(lines: List[str]) -> List[Entry]:
    out: List[Entry] = []
    header: Optional[List[str]] = None
    op_i = core_i = count_i = -1
    for i, raw in enumerate(lines):
        cells = [c.strip().strip('"') for c in _CSV_SPLIT_RE.split(raw)]
        low = [c.lower() for c in cells]
        core_cols = [low.index(c) for c in _CSV_CORE_COLS if c in low]
        op_cols = [low.index(c) for c in _CSV_OP_COLS if c in low]
        if core_cols and op_cols:
            header, core_i, op_i = cells, core_cols[0], op_cols[0]
            count_i = low.index("count") if "count" in low else -1
            continue
        if header is None or len(cells) <= max(core_i, op_i):
            continue
        if cells[core_i].upper() != "AI_CPU":
            continue
        cnt = 1
        if count_i >= 0 and count_i < len(cells) and cells[count_i].isdigit():
            cnt = int(cells[count_i])
        out.append(_entry("ascend", "op", cells[op_i], cnt, "AI_CPU", i + 1, 0, raw,
                          source_format="profiler-csv"))
    return out


@parser("fallback_ascend_aicpu")
def parse_ascend_aicpu(text: str) -> List[Entry]:
    """Ascend operators running on the AI CPU instead of the AI Core: torch_npu/op-plugin
    `kernel [Op] ... running on AiCpu` warnings (each op once per log) and CANN profiler CSV
    rows with core/task type AI_CPU (count from a Count column when present)."""
    out: List[Entry] = []
    low = text.lower()
    if "aicpu" not in low and "ai_cpu" not in low:
        return out
    lines = log_lines(text)
    seen = set()
    for i, raw in enumerate(lines):
        if "aicpu" not in raw.lower():
            continue
        m = _AICPU_KERNEL_RE.search(raw)
        if m:
            op = m.group("op")
            if op not in seen:
                seen.add(op)
                out.append(_entry("ascend", "op", op, 1, "AiCpu", i + 1, 0, strip_prefix(raw)))
    if "AI_CPU" in text:
        out.extend(_csv_ai_cpu(lines))
    return out


# -- all of them ---------------------------------------------------------------------------
PARSERS = (parse_onnxruntime, parse_vitisai, parse_edgetpu, parse_rknn, parse_torch_npu,
           parse_ascend_aicpu)

RUNTIME_NAMES = {
    "onnxruntime": "ONNX Runtime",
    "qnn": "ONNX Runtime QNN EP",
    "vitisai": "ONNX Runtime Vitis AI EP",
    "edgetpu": "Edge TPU compiler",
    "rknn": "RKNN",
    "torch_npu": "torch_npu",
    "torch": "PyTorch",
    "ascend": "Ascend CANN",
}


@parser("fallback_logs")
def parse_fallback_logs(text: str) -> List[Entry]:
    """Every parser of this module on one log, entries in line order."""
    out: List[Entry] = []
    for fn in PARSERS:
        out.extend(fn(text))
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
            op_counts[op] += e.get("count") or 0
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
