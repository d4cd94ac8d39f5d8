"""ONNX Runtime placement dumps (any EP), QNN, OpenVINO EP and Vitis AI EP statements."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ...lazyregex import lazy
from ...registry import parser
from .common import Entry, _entry, candidate_lines, log_lines, next_candidate, strip_prefix

# -- ONNX Runtime --------------------------------------------------------------------------
_ORT_MARK = "VerifyEachNodeIsAssignedToAnEp]"
_ORT_PLACED_RE = lazy(
    r"(?P<all>All nodes|Node\(s\)) placed on \[(?P<ep>[\w:.\-]+)\]\.?\s*Number of nodes:\s*(?P<n>\d+)")
_ORT_ALL_OLD_RE = lazy(r"All nodes have been placed on \[(?P<ep>[\w:.\-]+)\]")
_ORT_PROVIDER_OLD_RE = lazy(r"\bProvider: \[(?P<ep>[\w:.\-]+)\]: \[(?P<nodes>.*)\]\s*$")
_ORT_NODE_OLD_RE = lazy(r"\bNode \[(?P<op>[\w.:\-]+) \((?P<name>[^()]*)\)\] has been placed on "
                        r"\[(?P<ep>[\w:.\-]+)\]")
_ORT_NODE_RE = lazy(r"^\s*(?P<op>[A-Za-z_][\w.:\-]*) \((?P<name>[^()]*)\)\s*$")
_ORT_LIST_ITEM_RE = lazy(r"(?P<op>[A-Za-z_][\w.:\-]*) \((?P<name>[^()]*)\)")
_ORT_NOT_FOUND_RE = lazy(
    r"\b(?P<ep>\w+) kernel not found in registries for Op type: (?P<op>[\w.:\-]+)"
    r"(?: node name: (?P<name>.*?))?\s*$")
_ORT_HINT_RE = lazy(r"Some nodes were not assigned to the preferred execution providers")
_OTHER_EP_RE = lazy(r"\b(?!CPU)[A-Z][A-Za-z0-9]*ExecutionProvider\b|\b(?:QNN|Vitis AI|OpenVINO|"
                    r"TensorRT|CANN|MIGraphX|DML|CoreML|NNAPI) EP\b")
_QNN_UNSUPPORTED_RE = lazy(r"Unsupported nodes in QNN EP:\s*(?P<rest>.*)$")
_QNN_ITEM_RE = lazy(r"\{\s*name:\s*(?P<name>[^,}]*?)\s*,\s*type:\s*(?P<op>[\w.:\-]+)\s*\}")
_QNN_NONQDQ_RE = lazy(r"Non-QDQ (?P<op>[\w.:\-]+) operators are not supported on HTP or DSP "
                      r"backends\. \S+ node `(?P<name>.*?) will not be assigned to QNN EP")
_EP_SUMMARY_RE = lazy(r"number of nodes in the graph:\s*(?P<total>\d+)[,\s]+number of nodes "
                      r"supported by (?P<ep>[\w ]+?):\s*(?P<sup>\d+)")
_OPENVINO_REJECT_RE = lazy(r"\[OpenVINO-EP\] Rejecting as graph has unsupported operations")
#: the QNN EP could not load / initialise its backend or create the device: GetCapability claims
#: nothing, so the whole graph goes to the CPU EP (qnn_execution_provider.cc GetCapability)
_QNN_SETUP_FAILED_RE = lazy(r"QNN SetupBackend failed")
#: QNN EP per-node-unit validation (qnn_execution_provider.cc LogNodeSupport, INFO/VERBOSE):
#: 1.18-1.20 `Validation FAILED for nodes (NodeUnit):`, 1.21+ `Validation FAILED for 3 nodes in
#: NodeUnit (Sqrt) :`, then one `\tOperator type: Sqrt Node name: x Node index: 525` line per node
#: of the group and `\tREASON : ...` (microsoft/onnxruntime#22820); `Validation PASSED` blocks
#: list nodes that stay on QNN. 1.15-1.17 (IsNodeSupported, VERBOSE): `Node supported: [0] index:
#: [12] name: [x] Operator type: [Sqrt] as part of the NodeUnit type: [...]`.
_QNN_VALIDATION_RE = lazy(r"Validation FAILED for (?:nodes \([^)\n]{0,80}\)|\d+ nodes in [^\n]{0,120}?)\s*:")
_QNN_NODE_LINE_RE = lazy(r"^\s*Operator type: (?P<op>[\w.:\-]+) Node name: (?P<name>[^\n]{0,400}?) "
                         r"Node index: \d+\s*$")
_QNN_REASON_RE = lazy(r"^\s*REASON ?:")
_QNN_NODE_SUPPORTED_RE = lazy(r"Node supported: \[0\] index: \[\d+\] name: \[(?P<name>[^\]\n]{0,400})\] "
                              r"Operator type: \[(?P<op>[\w.:\-]+)\]")
#: the QNN backend's own op validation (qnn_model_wrapper.cc CreateQnnNode, WARNING), QNN op type
#: names (Conv2d, Prelu, ElementWiseAdd): 1.18+ `QNN.backendValidateOpConfig() failed for node
#: `Concat_4` of type `Concat` with error code 3110` (3110 QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE;
#: microsoft/onnxruntime#22532, #22821); 1.14-1.17 `Validating node failed for: Concat_4` (no type)
_QNN_BACKEND_VALIDATE_RE = lazy(r"backendValidateOpConfig\(\) failed for node `(?P<name>[^`\n]{0,400})` of "
                                r"type `(?P<op>[\w.:\-]+)` with error(?: code)? (?P<code>-?\d+)")
_QNN_VALIDATING_OLD_RE = lazy(r"\bValidating node failed for: (?P<name>\S[^\n]{0,400}?)\s*$")
_VITIS_RE = lazy(r"\[Vitis AI EP\]\s*No\. of Operators\s*:\s*(?P<rest>.*)$")
_VITIS_PAIR_RE = lazy(r"([A-Za-z_]+)\s+(\d+)(?:\s+[\d.]+%)?")
#: the XIR partitioner (Vitis AI EP on Ryzen AI 1.x, and the DPU compilers of Vitis AI 1.x-3.x)
#: names each operator it leaves to the CPU: `xir::Op{name = X, type = fix2float} is not
#: supported by current target. Target name: AMD_AIE2_Nx4_Overlay, target type: IPU_PHX.
#: Assign it to CPU.` (amd/RyzenAI-SW#85; DPUCZDX8G targets on FPGAs)
_VITIS_ASSIGN_RE = lazy(r"xir::Op\{name = (?P<name>[^\n]{0,400}?), type = (?P<op>[\w.:\-]+)\} is "
                        r"not supported by current target\.(?:[^\n]{0,300}?)Assign it to CPU")
_VITIS_ANY = ("Vitis AI EP", "Assign it to CPU")

CPU_EP = "CPUExecutionProvider"
#: any line an ONNX Runtime parser acts on contains one of these (a cheap first test)
_ORT_ANY = ("placed on [", "Provider: [", "kernel not found in registries", "Unsupported nodes in QNN",
            "Non-QDQ ", "number of nodes in the graph", "OpenVINO-EP] Rejecting",
            "Some nodes were not assigned", "QNN SetupBackend failed",
            "Validation FAILED for", "Node supported: [0]",
            "backendValidateOpConfig() failed", "Validating node failed for")


def _ort_any(text: str) -> bool:
    # substring tests, not one regex alternation: sre tries every branch at every position
    # (~250 MB/s on a 2 MiB log window, ~12 us a line); `in` runs at memory speed
    return any(s in text for s in _ORT_ANY)


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
    cands = candidate_lines(text, _ORT_ANY)
    if not cands:
        return []
    lines = log_lines(text)
    placements: List[Entry] = []
    others: List[Entry] = []
    # "another EP is mentioned" is asked only of an all-on-CPU statement: one search over the
    # whole text (~6 ms a 2 MiB window) made when first needed, not for every text
    other: List[bool] = []

    def other_ep() -> bool:
        if not other:
            other.append(bool(_OTHER_EP_RE.search(text)))
        return other[0]

    seen_blocks = set()
    i = 0
    n = len(lines)
    while i < n:
        i = next_candidate(cands, i)
        if i < 0:
            break
        raw = lines[i]
        line_no = i + 1
        if not _ort_any(raw):
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
            if ep == CPU_EP and (m.group("all") == "Node(s)" or other_ep()):
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
            if m.group("ep") == CPU_EP and other_ep():
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
        if _QNN_SETUP_FAILED_RE.search(raw):
            others.append(_entry("qnn", "reject", None, None, CPU_EP, line_no, line_no, raw,
                           all_nodes=True, ep="QNN"))
            i += 1
            continue
        if _QNN_VALIDATION_RE.search(raw):
            # the block's node lines carry no needle of their own: read them here
            j = i + 1
            block: List[Entry] = []
            while j < n and j <= i + 200:
                body = lines[j]
                nm = _QNN_NODE_LINE_RE.match(body) or _QNN_NODE_LINE_RE.match(_ort_body(body))
                if nm:
                    block.append(_entry("qnn", "op", nm.group("op"), 1, CPU_EP, j + 1, -3, body,
                                        node=nm.group("name") or None, tier=2))
                elif _QNN_REASON_RE.match(body) or _QNN_REASON_RE.match(_ort_body(body)):
                    for e in block:
                        e.setdefault("reason", body.strip().split(":", 1)[-1].strip()[:200])
                else:
                    break
                j += 1
            others.extend(block)
            i = j
            continue
        m = _QNN_NODE_SUPPORTED_RE.search(raw)
        if m:
            others.append(_entry("qnn", "op", m.group("op"), 1, CPU_EP, line_no, -3, raw,
                           node=m.group("name") or None, tier=2))
            i += 1
            continue
        m = _QNN_BACKEND_VALIDATE_RE.search(raw)
        if m:
            others.append(_entry("qnn", "op", m.group("op"), 1, CPU_EP, line_no, -3, raw,
                           node=m.group("name") or None,
                           reason=f"QNN backendValidateOpConfig error code {m.group('code')}",
                           tier=3))
            i += 1
            continue
        m = _QNN_VALIDATING_OLD_RE.search(raw)
        if m:
            others.append(_entry("qnn", "op", None, 1, CPU_EP, line_no, -3, raw,
                           node=m.group("name"), tier=3))
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
    # QNN's statements of one session, best first: the EP's own list of unsupported node units
    # (no tier), the per-unit validation blocks (tier 2, ONNX nodes), the backend's op validation
    # (tier 3, QNN op names): only the best kind present counts, so no node is counted twice
    qnn_tiers = [e.get("tier", 1) for e in listed if e["runtime"] == "qnn"]
    if qnn_tiers:
        best = min(qnn_tiers)
        listed = [e for e in listed if e["runtime"] != "qnn" or e.get("tier", 1) == best]
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
            for e in _summary_totals(summaries):
                out.append(e)
        elif rejects:
            e = dict(rejects[0])
            e["kind"] = "total"
            out.append(e)
    out.extend(e for e in others if e["kind"] == "hint")
    return out


#: EPs that ask for the NHWC layout: ORT calls their GetCapability again after the layout
#: transformation (onnxruntime/core/framework/graph_partitioner.cc), so one session prints
#: two summaries of one graph with different node counts.
_NHWC_EPS = ("QNN", "NNAPI", "XNNPACK")


def _summary_totals(summaries: List[Entry]) -> List[Entry]:
    """The EP summaries that count: each distinct (EP, graph nodes, supported nodes) once (a
    session created twice repeats them), summed over graphs (one app loads several models:
    FastVLM's vision encoder and token embedder); for a layout-transforming EP only its last
    summary, since its earlier ones describe the same graph before the transformation."""
    picked: List[Entry] = []
    seen = set()
    last_nhwc: Dict[str, Entry] = {}
    for e in summaries:
        ep = e.get("ep", "")
        if ep.upper() in _NHWC_EPS:
            last_nhwc[ep] = e
            continue
        key = (ep, e.get("graph_nodes"), e.get("supported_nodes"))
        if key in seen:
            continue
        seen.add(key)
        picked.append(e)
    picked.extend(last_nhwc.values())
    out = []
    for e in sorted(picked, key=lambda x: x["line_no"]):
        e = dict(e)
        e["kind"] = "total"
        out.append(e)
    return out


@parser("fallback_vitisai")
def parse_vitisai(text: str) -> List[Entry]:
    """Vitis AI EP operator counts: one "total" entry per `No. of Operators` line with a CPU
    column (count = CPU; the other columns, e.g. NPU, IPU, VITIS_EP_CPU, kept in `columns`)."""
    out: List[Entry] = []
    if not any(t in text for t in _VITIS_ANY):
        return out
    lines = log_lines(text)
    if "Assign it to CPU" in text:
        # counted one by one only when the log states no operator summary (which wins)
        counted = "No. of Operators" not in text
        group = None
        for i in candidate_lines(text, ("Assign it to CPU",)):
            m = _VITIS_ASSIGN_RE.search(lines[i])
            if not m:
                continue
            group = i + 1 if group is None else group
            out.append(_entry("vitisai", "op", m.group("op"), 1 if counted else None, "CPU",
                              i + 1, group, lines[i], node=m.group("name")))
    for i in candidate_lines(text, ("No. of Operators",)):
        raw = lines[i]
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
