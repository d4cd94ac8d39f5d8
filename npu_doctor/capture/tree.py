"""What a capture writes, in memory: the result counts, sparse file copies (the byte ranges
the probes read), the tree of files, links and placeholders, and safe link targets."""

from __future__ import annotations

import io
import posixpath
from dataclasses import dataclass, field
from typing import Any, Dict, List, Set, Tuple

from ..host import StatInfo


@dataclass
class CaptureResult:
    path: str
    files: int = 0
    placeholders: int = 0
    links: int = 0
    commands: int = 0
    logs: int = 0
    left_out: List[Tuple[str, str]] = field(default_factory=list)   # (host path, why)
    redactions: Dict[str, int] = field(default_factory=dict)
    truncated: List[str] = field(default_factory=list)   # logs cut when copied: what was cut


class _Sparse:
    """A file of `size` bytes of which only `pieces` [(offset, bytes)] were read; the rest is
    written as zeros (what the probes never looked at)."""

    def __init__(self, size: int, pieces: List[Tuple[int, bytes]], sha256: str) -> None:
        self.size, self.pieces, self.sha256 = size, pieces, sha256

    def stream(self) -> "io.RawIOBase":
        return _SparseStream(self)


class _SparseStream(io.RawIOBase):
    def __init__(self, sp: _Sparse) -> None:
        self.sp, self.pos, self.i = sp, 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.pos >= self.sp.size:
            return 0
        want = min(len(b), self.sp.size - self.pos)
        pieces = self.sp.pieces
        while self.i < len(pieces) and pieces[self.i][0] + len(pieces[self.i][1]) <= self.pos:
            self.i += 1
        if self.i < len(pieces) and pieces[self.i][0] <= self.pos:
            off, data = pieces[self.i]
            chunk = data[self.pos - off:self.pos - off + want]
        else:
            nxt = pieces[self.i][0] if self.i < len(pieces) else self.sp.size
            chunk = bytes(min(want, nxt - self.pos))
        b[:len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


def _merge_ranges(ranges: List[Tuple[int, int]], size: int) -> List[Tuple[int, int]]:
    out: List[List[int]] = []
    for off, n in sorted(ranges):
        end = min(off + n, size)
        if end <= off:
            continue
        if out and off <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([off, end])
    return [(a, b - a) for a, b in out]


class _Tree:
    """The capture being assembled: fs/ entries by (unredacted) host path."""

    def __init__(self) -> None:
        self.dirs: Set[str] = set()
        self.files: Dict[str, Any] = {}   # bytes, or _Sparse for a file read in parts
        self.placeholders: Set[str] = set()
        self.links: Dict[str, str] = {}
        self.stats: Dict[str, StatInfo] = {}

    def add_dir(self, path: str) -> None:
        while path not in ("/", "") and path not in self.dirs:
            if path in self.files or path in self.links:
                return
            self.dirs.add(path)
            path = posixpath.dirname(path)


def _safe_target(link: str, target: str) -> str:
    """A link target that resolves inside the tree: relative, never above `/`.

    A relative target that stays below `/` is kept as stored (what readlink returns); an
    absolute one, or one whose `..` climb above `/`, is rewritten relative to the link.
    """
    parent = posixpath.dirname(link)
    if not target.startswith("/"):
        level = len([p for p in parent.split("/") if p])
        ok = True
        for part in target.split("/"):
            if part == "..":
                level -= 1
                if level < 0:
                    ok = False
                    break
            elif part not in ("", "."):
                level += 1
        if ok:
            return target
    absolute = posixpath.normpath(posixpath.join(parent, target))
    return posixpath.relpath(absolute, parent)
