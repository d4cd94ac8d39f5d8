"""TensorFlow Lite delegates: what the GPU, NNAPI and Arm NN delegates left to TFLite's CPU
kernels, and the interpreter's own partition summary.

Formats (verbatim examples; sources):

GPU delegate (OpenCL/OpenGL on Android and Linux, Metal on iOS; lite/delegates/gpu/common/
model_builder.cc GetOpsToReplace), one line per rejected operator type between a header and a
total:
- 2020+: `Following operations are not supported by GPU delegate:` / `ARG_MAX: Operation is not
  supported.` / `97 operations will run on the GPU, and the remaining 200 operations will run on
  the CPU.`, or `No operations will run on the GPU, and all 31 operations will run on the CPU.`
  (tensorflow/tensorflow#57907, #49160, #56301);
- 2019: `Next operations are not supported by GPU delegate:` ... `First 2 operations will run on
  the GPU, and the remaining 249 on the CPU.` (#35378, mattn/go-tflite#7);
- the first OpenGL delegate: `WARNING: 25 cannot be handled by this delegate.  Only the first 30
  ops will run on the GPU, and the remaining 1 on the CPU` (#31720).
The header can sit at the end of a Java exception line (`Failed to apply delegate: Next
operations ...`) or after a `TFLite Warning:` / `ERROR:` / logcat prefix.

NNAPI delegate (lite/delegates/nnapi/nnapi_delegate.cc, verbose validation): `WARNING: Operator
FAKE_QUANT (v1) refused by NNAPI delegate: Unsupported operation type.` (#47905); one line per
failed check, so a node can print several: operators are named, not counted.

Arm NN TFLite delegate (armnn/delegate/src/armnn_delegate.cpp): `ERROR: Operator TILE [69] is
not supported by armnn_delegate.` (ARM-software/armnn#740, #678; one line per operator TYPE --
the number is the BuiltinOperator code, 69 = TILE, not a node) and `DEQUANTIZE: not supported by armnn: <backend reason>` (#719, #666, #758). Nodes Arm NN
does not take run on TFLite's own CPU kernels.

The first OpenGL delegate names a rejected operator by its builtin code only (`WARNING: op code #40
cannot be handled by this delegate.` #25131; `WARNING: 25 cannot be handled by this delegate.`
#31720): the code becomes the operator's name (tflite_ops.py, schema.fbs BuiltinOperator).

Delegates built on SimpleDelegate or the partition helper state their share of the graph:
`Hexagon delegate: 44 nodes delegated out of 67 nodes with 7 partitions.` (lite/delegates/hexagon/
hexagon_delegate.cc, #45902; `... out of 67 nodes.` before partitions were counted),
`TfLiteHexagonDelegate delegate: 125 nodes delegated out of 125 nodes with 1 partitions.`
(lite/delegates/utils/simple_delegate.cc: `%s delegate: ...`, #49247), `CoreML delegate: 30 nodes
delegated out of 31 nodes, with 2 partitions.` (lite/delegates/coreml/coreml_delegate.mm): the
nodes left out stay on the CPU. When applying a delegate fails after that, the interpreter prints
`Restored original execution plan after delegate application failure.` (lite/core/subgraph.cc;
TFLite 2.0-2.3: `Restored previous execution plan ...`, #43793):
every node of the graph runs on the CPU, the graph size being the M of the last summary.
The benchmark tools say it per delegate (lite/tools/benchmark/benchmark_tflite_model.cc): `Though
NNAPI delegate is explicitly applied, the model graph will not be executed by the delegate.` -- the
delegate took nothing, the graph runs on the CPU (#56301), unless a delegate applied before it
says `Explicitly applied GPU delegate, and the model graph will be completely executed by the
delegate.` (two delegates applied one after another).

Interpreter (lite/core/subgraph.cc ReplaceNodeSubsetsWithDelegateKernels, TF 2.13+): `Replacing
60 out of 64 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 3 partitions for the
whole graph.` -- the nodes left out stay on the CPU. XNNPACK is the CPU delegate and never
counts; a GPU delegate total already stated by the GPU block is not counted twice.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate, strip_prefix
from .tflite_ops import builtin_name

_GPU_HEADER_RE = lazy(r"\b(?:Following|Next) operations are not supported by GPU delegate:\s*$")
_GPU_OP_RE = lazy(r"^\s*(?:CUSTOM\s+)?(?P<op>[A-Za-z][A-Za-z0-9_]*):(?P<why>.*)$")
_GPU_TOTAL_RES = (
    lazy(r"\b(?P<gpu>\d+) operations will run on the GPU, and the remaining (?P<cpu>\d+) "
         r"operations will run on the CPU"),
    lazy(r"\bNo operations will run on the GPU, and all (?P<cpu>\d+) operations will run on the "
         r"CPU"),
    lazy(r"\bFirst (?P<gpu>\d+) operations will run on the GPU, and the remaining (?P<cpu>\d+) "
         r"on the CPU"),
    lazy(r"\bOnly the first (?P<gpu>\d+) ops will run on the GPU, and the remaining (?P<cpu>\d+) "
         r"on the CPU"),
)
_NNAPI_RE = lazy(r"\bOperator (?P<op>[A-Za-z][A-Za-z0-9_]*) \(v\d+\) refused by NNAPI delegate"
                 r"(?::(?P<why>.*))?$")
_ARMNN_OP_RE = lazy(r"\bOperator (?P<op>[A-Za-z][A-Za-z0-9_]*) \[\d+\] is not supported by "
                    r"armnn_delegate")
_ARMNN_BACKEND_RE = lazy(r"(?:^|\s)(?P<op>[A-Z][A-Z0-9_]*): not supported by armnn"
                         r"(?::(?P<why>.*))?$")
_REPLACING_RE = lazy(r"\bReplacing (?P<n>\d+) out of (?P<m>\d+) node\(s\) with delegate "
                     r"\((?P<delegate>[^)]+)\) node")
_OPCODE_RE = lazy(r"\b(?:op code #)?(?P<code>\d{1,3}) cannot be handled by this delegate")
_DELEGATED_RE = lazy(r"\b(?P<delegate>[A-Za-z][\w\-]*) delegate: (?P<n>\d+) nodes delegated out of "
                     r"(?P<m>\d+) nodes\b")
_RESTORED_RE = lazy(r"Restored (?:original|previous) execution plan after delegate application failure")
# benchmark_model / the benchmark app (lite/tools/benchmark/benchmark_tflite_model.cc) states what
# each delegate it applied took
_NOT_EXECUTED_RE = lazy(r"\bThough (?P<delegate>\w+) delegate is explicitly applied, the model graph "
                        r"will not be executed by the delegate")
_COMPLETELY_RE = lazy(r"\bExplicitly applied (?P<delegate>\w+) delegate, and the model graph will be "
                      r"completely executed by the delegate")
#: any line this parser acts on contains one of these (a cheap first test)
_ANY = ("supported by GPU delegate", "will run on the GPU", "refused by NNAPI delegate",
        "not supported by armnn", "node(s) with delegate (", "cannot be handled by this delegate",
        "nodes delegated out of", "Restored original execution plan",
        "Restored previous execution plan", "delegate is explicitly applied",
        "completely executed by the delegate")
_MAX_BLOCK = 200


def _any(text: str) -> bool:
    return any(s in text for s in _ANY)


def _gpu_total(line: str) -> Optional[int]:
    split = _gpu_split(line)
    return split[1] if split else None


def _gpu_split(line: str) -> Optional[Tuple[int, int]]:
    """(operations on the GPU, operations on the CPU) of a GPU delegate total line."""
    for rx in _GPU_TOTAL_RES:
        m = rx.search(line)
        if m:
            return int(m.groupdict().get("gpu") or 0), int(m.group("cpu"))
    return None


def _family(delegate: str) -> str:
    """`TfLiteHexagonDelegate` / `Hexagon` -> `hexagon`: one delegate under its two names."""
    low = delegate.lower()
    for w in ("tflite", "delegate", "_", "-", " "):
        low = low.replace(w, "")
    return low


def _graph_on_cpu(plan: Optional[Tuple[Optional[Entry], int]], out: List[Entry],
                  replacing: List[Entry], line_no: int, body: str, **extra: Any) -> None:
    """The whole graph runs on the CPU (the original plan restored, or a delegate that took
    nothing): one "total" entry of the graph's last stated size (`plan`), replacing the total
    that statement made; out and replacing are changed in place."""
    nodes = None
    if plan is not None:
        gone, nodes = plan
        out[:] = [e for e in out if e is not gone]
        replacing[:] = [e for e in replacing if e is not gone]
    out.append(_entry("tflite", "total", None, nodes, "CPU", line_no, line_no, body, **extra))


@parser("fallback_tflite")
def parse_tflite(text: str) -> List[Entry]:
    """TFLite delegate statements of nodes left to the CPU (see the module docstring).

    GPU delegate: one "op" entry per rejected operator type (count not stated: the log names
    types, not nodes) and one "total" entry with the CPU operation count, grouped at the
    header. NNAPI and Arm NN refusals: one "op" entry per operator type (uncounted).
    `Replacing N out of M` and `X delegate: N nodes delegated out of M nodes` with N < M for a
    non-XNNPACK delegate: a "total" of M - N (a GPU delegate whose own block states the total,
    or a delegate whose summary line already counted, is not counted twice). `Restored original
    execution plan`: the last statement's graph (M nodes) runs on the CPU, replacing its total.
    """
    out: List[Entry] = []
    cands = candidate_lines(text, _ANY)
    if not cands:
        return out
    lines = log_lines(text)
    seen_ops = set()
    gpu_totals = 0
    replacing: List[Entry] = []
    summarised = set()
    # the last statement of a graph's size: (its total entry or None, nodes in the graph)
    plan: Optional[Tuple[Optional[Entry], int]] = None
    whole: Optional[str] = None  # a delegate the benchmark tool says took the whole graph
    i, n = 0, len(lines)
    while i < n:
        i = next_candidate(cands, i)
        if i < 0:
            break
        raw = lines[i]
        if not _any(raw):
            i += 1
            continue
        body = strip_prefix(raw)
        if _GPU_HEADER_RE.search(body):
            group = i + 1
            j = i + 1
            block: List[Entry] = []
            total: Optional[int] = None
            while j < n and j <= i + _MAX_BLOCK:
                b = strip_prefix(lines[j])
                split = _gpu_split(b)
                if split is not None:
                    total = split[1]
                    plan = (None, sum(split))
                    if total > 0:
                        block.append(_entry("tflite_gpu", "total", None, total, "CPU", j + 1, group, b))
                        plan = (block[-1], sum(split))
                    j += 1
                    break
                m = _GPU_OP_RE.match(b)
                if m:
                    block.append(_entry("tflite_gpu", "op", m.group("op"), None, "CPU", j + 1,
                                        group, b, reason=(m.group("why") or "").strip() or None))
                elif b.strip():
                    break
                j += 1
            if total != 0:
                out.extend(block)
                gpu_totals += 1 if total else 0
            i = j
            continue
        for m in _OPCODE_RE.finditer(body):
            op = builtin_name(int(m.group("code"))) or f"op code {m.group('code')}"
            out.append(_entry("tflite_gpu", "op", op, None, "CPU", i + 1, i + 1, body,
                              opcode=int(m.group("code"))))
        split = _gpu_split(body)
        if split and split[1]:
            # a total without its header (the header line was cut off, or the 2019 one-line form)
            out.append(_entry("tflite_gpu", "total", None, split[1], "CPU", i + 1, i + 1, body))
            plan = (out[-1], sum(split))
            gpu_totals += 1
            i += 1
            continue
        m = _NNAPI_RE.search(body)
        if m:
            if ("nnapi", m.group("op")) not in seen_ops:
                seen_ops.add(("nnapi", m.group("op")))
                out.append(_entry("tflite_nnapi", "op", m.group("op"), None, "CPU", i + 1, 0, body,
                                  reason=(m.group("why") or "").strip() or None))
            i += 1
            continue
        m = _ARMNN_OP_RE.search(body) or _ARMNN_BACKEND_RE.search(body)
        if m:
            if ("armnn", m.group("op")) not in seen_ops:
                seen_ops.add(("armnn", m.group("op")))
                out.append(_entry("armnn", "op", m.group("op"), None, "CPU", i + 1, 0, body,
                                  reason=(m.groupdict().get("why") or "").strip() or None))
            i += 1
            continue
        m = _DELEGATED_RE.search(body)
        if m:
            left = int(m.group("m")) - int(m.group("n"))
            delegate = m.group("delegate")
            if "xnnpack" not in delegate.lower():
                summarised.add(_family(delegate))
                e = None
                if left > 0:
                    e = _entry("tflite", "total", None, left, "CPU", i + 1, i + 1, body,
                               delegate=delegate)
                    out.append(e)
                plan = (e, int(m.group("m")))
            i += 1
            continue
        m = _REPLACING_RE.search(body)
        if m:
            left = int(m.group("m")) - int(m.group("n"))
            delegate = m.group("delegate")
            if "XNNPack" not in delegate:
                e = None
                if left > 0:
                    e = _entry("tflite", "total", None, left, "CPU", i + 1, i + 1, body,
                               delegate=delegate)
                    replacing.append(e)
                if plan is None or plan[0] is None or plan[0] not in out:
                    plan = (e, int(m.group("m")))
            i += 1
            continue
        m = _COMPLETELY_RE.search(body)
        if m:
            if m.group("delegate").upper() != "XNNPACK":
                whole = m.group("delegate")
            i += 1
            continue
        m = _NOT_EXECUTED_RE.search(body)
        if m:
            # the delegate took nothing: the graph runs on the CPU, unless another (accelerator)
            # delegate applied before it took the whole graph (--use_gpu --use_nnapi)
            if m.group("delegate").upper() != "XNNPACK" and whole is None:
                _graph_on_cpu(plan, out, replacing, i + 1, body, delegate=m.group("delegate"))
                plan = None
            i += 1
            continue
        if _RESTORED_RE.search(body):
            _graph_on_cpu(plan, out, replacing, i + 1, body, restored=True)
            plan = None
        i += 1
    for e in replacing:
        d = e["delegate"]
        if gpu_totals and ("Gpu" in d or "Metal" in d or "GPU" in d):
            continue
        if _family(d) in summarised:
            continue
        out.append(e)
    return out
