"""run_capture: a check through a RecordingHost, the snapshot written, replayed and compared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from ..host import Host

from ..host.recording import RecordingHost
from .names import seed_redactor
from .output import output_kind
from .tree import CaptureResult
from .writer import DEFAULT_MAX_FILE_BYTES, CaptureWriter
from ..lazyregex import lazy


# -- comparing a live run with its replay ------------------------------------------------------
def _leaves(tree: Any, prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, list) and tree and all(isinstance(x, dict) for x in tree):
        for i, v in enumerate(tree):
            out.update(_leaves(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = tree
    return out


def normalize_for_replay(facts: Dict[str, Any], red, log_names: Dict[str, str]) -> Dict[str, Any]:
    """What the replay of a capture must give for these live facts: values redacted like the
    capture, --log paths renamed to their `logs/NAME` place in the snapshot."""
    import json

    text = json.dumps(facts, sort_keys=True, ensure_ascii=False)
    for live, snap in sorted(log_names.items(), key=lambda t: -len(t[0])):
        text = text.replace(json.dumps(live)[1:-1], json.dumps(snap)[1:-1])
    return red.value(json.loads(text))


#: Leaves that measure the run itself (time spent by npu-doctor), not the host: never compared.
VOLATILE_RE = lazy(r"^(?:duration|cpu|elapsed|wall)_(?:ms|s)$")


def compare_runs(live: Dict[str, Any], replay: Dict[str, Any]) -> List[str]:
    """Fact paths whose value differs between two facts trees (sorted, `path: a != b`).

    Timings of the run itself (`*.duration_ms`, `*.cpu_ms`) are not compared. A leaf only the replay has
    is listed as `replay only` (a live probe that used an OS call, such as os.confstr,
    where the snapshot offers a file with more detail).
    """
    a, b = _leaves(live), _leaves(replay)
    out = []
    for k in sorted(set(a) | set(b)):
        if VOLATILE_RE.match(k.rsplit(".", 1)[-1]):
            continue
        if k not in a:
            out.append(f"replay only: {k} = {b[k]!r}")
        elif a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k)!r} != {b.get(k)!r}")
    return out


def finding_keys(findings: Sequence[Any]) -> List[Tuple[str, str, str, str]]:
    """Findings as sorted (id, severity, subject, message) tuples: what a capture's replay must
    reproduce (CaptureRun.finding_diffs compares these)."""
    return sorted((f.id, f.severity, f.subject, f.message) for f in findings)


@dataclass
class CaptureRun:
    """A capture and its self-check: the live check run through the recorder, the replay of
    the written snapshot, and the differences between them (empty = same facts/findings)."""

    result: CaptureResult
    live: Any
    replay: Any
    fact_diffs: List[str]
    finding_diffs: List[str]


def run_capture(inner: Host, config: Any, out: str, redact: bool = True,
                max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, self_check: bool = True,
                progress=None) -> CaptureRun:
    """Run `check` through a RecordingHost, write the snapshot, replay it and compare.

    Besides the probes, the Python distribution scan of `lock` runs through the recorder,
    and a file kept only in part records its sha256 in snapshot.toml, so `lock --snapshot
    CAPTURE` matches `lock` on the board.
    Raises OutputPathError (before anything runs) for an output path it refuses, OSError
    when the output cannot be written.
    """
    from ..check import run_check
    from ..host import SnapshotHost
    from ..lock import load_spec, scan_python_packages, site_dirs
    from ..redact import Redactor

    output_kind(out)   # refuse a bad output before spending a whole check on it
    rec = RecordingHost(inner)
    try:  # an ELF parsed by an earlier run in this process would not be read (nor recorded)
        from ..linker.elf import clear_cache

        clear_cache()
    except ImportError:
        pass
    live = run_check(rec, config, progress=progress)
    try:  # what `lock` scans beyond the probes: the SDK Python distributions
        scan_python_packages(rec, load_spec().python_packages)
    except Exception:  # a bonus for `lock --snapshot`; the capture itself must not fail on it
        pass
    red = Redactor(enabled=redact)
    seed_redactor(red, inner)
    writer = CaptureWriter(rec, red, max_file_bytes)
    py_paths = site_dirs(inner) if inner.source == "live" else []
    from ..pyenv import interpreters

    # the application environments: their interpreters' answers, dist-info and libraries are
    # in commands.toml and fs/ already; the replay asks the same interpreters
    pythons = [{"path": red.apply_path(p), "origin": origin} for p, origin in interpreters(rec)
               if origin not in ("VIRTUAL_ENV", "CONDA_PREFIX")]
    res = writer.write(out, {"python_paths": [red.apply_path(p) for p in py_paths],
                             "python": pythons})
    fact_diffs: List[str] = []
    finding_diffs: List[str] = []
    replay = None
    if self_check:
        snap = SnapshotHost(out)
        try:
            replay = run_check(snap, config)
        finally:
            snap.close()
        want = normalize_for_replay(live.facts.to_dict(), red, writer.log_map)
        fact_diffs = compare_runs(want, replay.facts.to_dict())
        live_f = sorted((f.id, f.severity, f.subject, f.message) for f in live.findings)
        live_f = [tuple(normalize_for_replay(list(k), red, writer.log_map)) for k in live_f]
        got_f = finding_keys(replay.findings)
        finding_diffs = [f"live only: {k}" for k in live_f if k not in got_f] + \
                        [f"replay only: {k}" for k in got_f if k not in live_f]
    return CaptureRun(res, live, replay, fact_diffs, finding_diffs)
