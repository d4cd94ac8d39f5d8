"""Log files as users hand them over: compressed (rotated), UTF-16 (PowerShell), UTF-8."""

from __future__ import annotations

from .base import READ_CAP_BYTES

def _decompress(data: bytes) -> bytes:
    """gzip, bzip2 or xz (rotated logs) decompressed, up to READ_CAP_BYTES; a truncated
    archive gives what could be read before the damage."""
    import bz2
    import lzma
    import zlib

    if data[:2] == b"\x1f\x8b":
        dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif data[:3] == b"BZh":
        dec = bz2.BZ2Decompressor()
    elif data[:6] == b"\xfd7zXZ\x00":
        dec = lzma.LZMADecompressor()
    else:
        return data
    out = bytearray()
    try:
        for i in range(0, len(data), 65536):
            out += dec.decompress(data[i:i + 65536])
            if len(out) >= READ_CAP_BYTES or getattr(dec, "eof", False):
                break
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        pass
    return bytes(out[:READ_CAP_BYTES])


def decode_log(data: bytes) -> str:
    """Text of a log file as users hand it over: UTF-8, UTF-16 (what PowerShell's `>` writes,
    with or without a BOM), gzip/bzip2/xz-compressed (rotated logs). At most READ_CAP_BYTES."""
    data = _decompress(data)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    head = data[:4096]
    if len(head) >= 8 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) < len(head) // 16:
        return data.decode("utf-16-le", "replace")
    return data.decode("utf-8-sig", "replace")

