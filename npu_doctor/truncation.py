"""What npu-doctor read only in part, as facts: the `truncated` list (rule `input-truncated`).

Every limit on what is read is said, never silent. Three limits exist:
- a command's output over host.base.OUTPUT_CAP_BYTES per stream (its first part kept, or
  its last for a kernel log: host.base.keeps_newest);
- a log line over host.logstream.MAX_LINE_CHARS (its first part kept, the log read on);
- a log that `capture` copied only in part into a snapshot (capture.logcopy: snapshot.toml
  `[[snapshot.truncated]]`).

Each `truncated[]` element: {source (`dmesg`, `logs/app.log`, `logs/app.log:12`), what
(`stdout`, `stderr`, `log`, `line`), kept (`first` | `newest`), size_bytes / kept_bytes (or
size_chars / kept_chars for a line), message (one line for people)}.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence


def human_bytes(n: int) -> str:
    """`4 MiB`, `9.3 MiB`, `1 GiB`, `812 KiB`, `17 bytes` (binary units)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) - (1 << shift) // 20480:  # 1023.96 KiB reads as 1 MiB
            v = n / (1 << shift)
            return f"{v:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def for_command(argv: Sequence[str], stream: str, size: int, kept: int,
                newest: bool) -> Dict[str, Any]:
    """The record of a command output cut at `kept` bytes of `size`."""
    cmd = " ".join(argv)
    end = ("the newest lines are kept; older messages were not checked" if newest else
           "its first part is kept; the rest was not checked")
    what = "output" if stream == "stdout" else "error output"
    return {"source": cmd, "what": stream, "kept": "newest" if newest else "first",
            "size_bytes": size, "kept_bytes": kept,
            "message": f"{what} of `{cmd}` cut at {human_bytes(kept)} of {human_bytes(size)}; "
                       f"{end}"}


def for_line(log: str, cut: Dict[str, int]) -> Dict[str, Any]:
    """The record of a log line cut ({line_no, chars, kept_chars}: host.logstream)."""
    return {"source": f"{log}:{cut['line_no']}", "what": "line", "kept": "first",
            "size_chars": cut["chars"], "kept_chars": cut["kept_chars"],
            "message": f"line {cut['line_no']} of {log} is {cut['chars']:,} characters long "
                       f"(no line break); only its first {cut['kept_chars']:,} were read (the "
                       "rest of the log was read on)"}


def for_log(log: str, size: int, kept: int, why: str, compressed: bool = False) -> Dict[str, Any]:
    """The record of a log copied into a snapshot only in part: its first `kept` bytes (as
    text) of a file of `size` bytes (compressed: the size of the compressed file)."""
    of = f"a {human_bytes(size)} compressed file" if compressed else human_bytes(size)
    return {"source": log, "what": "log", "kept": "first", "size_bytes": size,
            "kept_bytes": kept,
            "message": f"{log} was cut at {human_bytes(kept)} of {of} when captured ({why}); "
                       "what follows was not checked"}


def add(facts: Any, records: Iterable[Dict[str, Any]], source: str) -> None:
    """Append records to `truncated` (one per source and what), each with its source."""
    lst: List[Dict[str, Any]] = facts.data.setdefault("truncated", [])
    have = {(r.get("source"), r.get("what")) for r in lst}
    for r in records:
        if (r["source"], r["what"]) in have:
            continue
        have.add((r["source"], r["what"]))
        lst.append(r)
        facts.sources[f"truncated[{len(lst) - 1}]"] = source


def from_snapshot(meta: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The well-formed `truncated` records of a snapshot.toml `[snapshot]` table."""
    out: List[Dict[str, Any]] = []
    got: Optional[Any] = meta.get("truncated")
    for r in got if isinstance(got, list) else []:
        if isinstance(r, dict) and isinstance(r.get("source"), str) and \
                isinstance(r.get("message"), str) and isinstance(r.get("what"), str):
            out.append(dict(r))
    return out
