"""Log files streamed: any size, compressed or not, UTF-8 or UTF-16, in bounded memory.

`iter_log_lines(path)` yields the lines of a log exactly as `decode_log(data).splitlines()`
would for the whole file (same decoding, same line breaks), but reads it in chunks of
CHUNK_BYTES, so a 100 MB log costs a few MB of memory and every line is read. The one bound:
a line longer than MAX_LINE_CHARS (1 Mi characters, a log without line breaks) keeps its
first MAX_LINE_CHARS characters and the rest of that line is skipped; iter_log_chunks says
which lines it cut. gzip, bzip2 and xz (rotated logs) are decompressed as they are read; a
damaged archive yields what could be read before the damage (as host.logfile does).
`iter_log_text` gives the decoded text itself, uncut, for copying a log (capture).
"""

from __future__ import annotations

import codecs
import os
import re
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import AccessDenied, HostError, NotFound
from ..safeio import open_regular

#: What str.splitlines() breaks lines at.
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
#: Bytes read (and decompressed) at a time: the lines of one chunk are what the log consumers
#: get at once (collectors.logscan: one needle scan per chunk); 256 KiB keeps a chunk's text,
#: lower-cased copy and line list at a few MB.
CHUNK_BYTES = 1 << 18
#: Longest line kept (characters): a log with no line breaks (minified JSON, base64, a
#: progress bar drawn with backspaces) would otherwise be held whole in memory as one line.
#: What every consumer looks at sits near the start of a line (signatures read 4 KiB of it).
MAX_LINE_CHARS = 1 << 20
_BREAK_RE = re.compile("[" + "".join(sorted(_BREAKS)) + "]")


def open_log(path: str, strict: bool = False) -> BinaryIO:
    """The log's decompressed bytes as a stream. Only a regular file is opened (a FIFO or a
    device given as a log cannot hang the run: safeio.open_regular); `strict` also refuses a
    symlink as the last component and a hard-linked file (a snapshot's logs/). Raises
    HostError (NotFound, AccessDenied) when it cannot be opened."""
    try:
        raw = os.fdopen(open_regular(path, 0, follow=not strict, single_link=strict), "rb")
    except FileNotFoundError:
        raise NotFound(path, "no such file") from None
    except PermissionError:
        raise AccessDenied(path, "permission denied") from None
    except OSError as e:
        raise HostError(path, e.strerror or str(e)) from None
    head = raw.read(6)
    raw.seek(0)
    # the decompressors are imported only for a compressed log (start-up cost otherwise)
    if head[:2] == b"\x1f\x8b":
        import gzip

        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if head[:3] == b"BZh":
        import bz2

        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if head[:6] == b"\xfd7zXZ\x00":
        import lzma

        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    return raw


#: How a gzip, bzip2 or xz file starts (open_log decompresses those).
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def _encoding(head: bytes) -> str:
    """The codec decode_log would pick for a file starting with `head` (first 4 KB)."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    if len(head) >= 8 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) < len(head) // 16:
        return "utf-16-le"
    return "utf-8-sig"


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    try:
        while True:
            chunk = stream.read(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk
    except Exception as e:  # zlib.error, lzma.LZMAError, OSError, EOFError, ValueError
        if isinstance(e, (KeyboardInterrupt, MemoryError)):
            raise
        return  # a truncated or damaged archive: what was read before the damage


def iter_log_lines(path: str, strict: bool = False) -> Iterator[str]:
    """Every line of the log at `path` (a local file), as str.splitlines() of its whole
    decoded text would give them (a line over MAX_LINE_CHARS cut: iter_log_chunks). Raises
    HostError when it cannot be opened (open_log)."""
    for lines in iter_log_chunks(path, strict):
        yield from lines


def _decoded(path: str, strict: bool) -> Iterator[str]:
    """The decoded text of the log at `path`, in pieces of about CHUNK_BYTES bytes read (cut
    anywhere). The encoding is judged on the first 4 KB, as host.logfile.decode_log does."""
    stream = open_log(path, strict)
    try:
        chunks = _chunks(stream)
        first = b""
        for chunk in chunks:
            first += chunk
            if len(first) >= 4096:
                break
        dec = codecs.getincrementaldecoder(_encoding(first[:4096]))("replace")
        for chunk in _chain([first], chunks):
            text = dec.decode(chunk)
            if text:
                yield text
        tail = dec.decode(b"", final=True)
        if tail:
            yield tail
    finally:
        stream.close()


def iter_log_text(path: str, strict: bool = False) -> Iterator[str]:
    """The decoded text of the log at `path` (what decode_log gives, any size), in pieces
    that end just after a "\n" (a piece of a line longer than MAX_LINE_CHARS excepted), so a
    piece can be redacted on its own (capture copies a log this way). Raises HostError when
    the file cannot be opened (open_log); an OSError while reading propagates."""
    carry = ""
    for text in _decoded(path, strict):
        text = carry + text
        cut = text.rfind("\n") + 1
        if not cut and len(text) > MAX_LINE_CHARS:
            cut = len(text)
        carry = text[cut:]
        if cut:
            yield text[:cut]
    if carry:
        yield carry


def iter_log_chunks(path: str, strict: bool = False,
                    cut_lines: Optional[List[Dict[str, int]]] = None) -> Iterator[List[str]]:
    """The lines of the log at `path` in lists, one per chunk of about CHUNK_BYTES read: their
    concatenation is str.splitlines() of the whole decoded text (a line cut by a chunk seam,
    a CRLF pair included, goes whole into the next list), except that a line longer than
    MAX_LINE_CHARS keeps only its first MAX_LINE_CHARS characters (the rest of that line is
    skipped, the log read on) and is appended to `cut_lines` as {line_no, chars, kept_chars}.
    Raises HostError when the file cannot be opened (open_log); an OSError while reading
    propagates."""
    carry = ""
    done = 0            # lines yielded so far
    skip: List[int] = []  # [line_no, characters so far] of a line being skipped past its cut
    for text in _decoded(path, strict):
        if skip:
            m = _BREAK_RE.search(text)
            if m is None:
                skip[1] += len(text)
                continue
            skip[1] += m.start()
            _note_cut(cut_lines, skip)
            skip = []
            text = text[m.start():]  # the break ends the cut line kept in carry
        text = carry + text
        # a "\r" at the very end may be the first half of "\r\n": keep it for later
        hold = "\r" if text.endswith("\r") else ""
        if hold:
            text = text[:-1]
        lines = text.splitlines()
        # the last piece continues in the next chunk unless a line break ends the text
        carry = lines.pop() if lines and text[-1] not in _BREAKS else ""
        if len(text) > MAX_LINE_CHARS + len(carry):  # a finished line may be too long
            for i, line in enumerate(lines):
                if len(line) > MAX_LINE_CHARS:
                    _note_cut(cut_lines, [done + i + 1, len(line)])
                    lines[i] = line[:MAX_LINE_CHARS]
        if len(carry) > MAX_LINE_CHARS:
            skip = [done + len(lines) + 1, len(carry)]
            carry = carry[:MAX_LINE_CHARS]
            if hold:  # the "\r" ended that line: nothing of it left to skip
                _note_cut(cut_lines, skip)
                skip = []
        carry += hold
        if lines:
            done += len(lines)
            yield lines
    if skip:
        _note_cut(cut_lines, skip)
    if carry:
        yield carry.splitlines()


def _note_cut(cut_lines: Optional[List[Dict[str, int]]], skip: List[int]) -> None:
    if cut_lines is not None:
        cut_lines.append({"line_no": skip[0], "chars": skip[1], "kept_chars": MAX_LINE_CHARS})


def _chain(first, rest):
    yield from first
    yield from rest


def log_file_list(log_dir: Optional[str], extra_logs: Sequence[str]) -> List[Tuple[str, str, bool]]:
    """(name, path, strict) of the files under a snapshot's logs/ (`logs/<rel>`, strict:
    regular files, no symlink as the last component, one hard link) and of the --log files
    (not strict), sorted by name as Host.logs() sorts them."""
    out = [(p, p, False) for p in extra_logs]
    if log_dir:
        for dirpath, _dirs, files in os.walk(log_dir):
            for name in sorted(files):
                p = os.path.join(dirpath, name)
                out.append(("logs/" + os.path.relpath(p, log_dir), p, True))
    return sorted(out)
