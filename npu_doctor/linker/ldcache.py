"""The shared-library cache ld.so reads: `/etc/ld.so.cache` (`glibc-ld.so.cache1.1` and the
old `ld.so-1.7.0` layout, as written by `ldconfig`, glibc `elf/cache.c`) and, in a snapshot
without that file, the canonical `ldconfig -p` output."""


import struct
from dataclasses import dataclass
from typing import List, Optional

from ..lazyregex import lazy

CACHE_FILE = "/etc/ld.so.cache"
LDCONFIG_P = ["ldconfig", "-p"]
OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"

# glibc sysdeps/generic/ldconfig.h: FLAG_REQUIRED_MASK values -> (ELF class, e_machine set)
FLAG_ELF_LIBC6 = 0x0003
_REQUIRED_FLAGS = {
    0x0000: (32, {"EM_386", "EM_ARM", "EM_MIPS", "EM_PPC", "EM_S390", "EM_SPARC", "EM_RISCV"}),
    0x0100: (64, {"EM_SPARCV9"}),
    0x0200: (64, {"EM_IA_64"}),
    0x0300: (64, {"EM_X86_64"}),
    0x0400: (64, {"EM_S390"}),
    0x0500: (64, {"EM_PPC64"}),
    0x0600: (32, {"EM_MIPS"}),
    0x0700: (64, {"EM_MIPS"}),
    0x0800: (32, {"EM_X86_64"}),
    0x0900: (32, {"EM_ARM"}),
    0x0A00: (64, {"EM_AARCH64"}),
    0x0B00: (32, {"EM_ARM"}),
    0x0C00: (32, {"EM_MIPS"}),
    0x0D00: (32, {"EM_MIPS"}),
    0x0E00: (64, {"EM_MIPS"}),
    0x0F00: (0, {"EM_RISCV"}),
    0x1000: (0, {"EM_RISCV"}),
    0x1100: (0, {"EM_LOONGARCH"}),
    0x1200: (0, {"EM_LOONGARCH"}),
}
# The same, as `ldconfig -p` prints them (glibc elf/cache.c print_entry).
_TAG_FLAGS = {
    "": 0x0000, "64bit": None, "IA-64": 0x0200, "x86-64": 0x0300, "N32": 0x0600,
    "x32": 0x0800, "hard-float": 0x0900, "AArch64": 0x0A00, "soft-float": None,
    "nan2008": 0x0C00, "N32,nan2008": 0x0D00, "64bit,nan2008": 0x0E00, "double-float": 0x1000,
}

_LDCONFIG_LINE = lazy(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*$")


@dataclass
class CacheEntry:
    """One ld.so.cache entry: `name` -> `path`; `flags` as stored (None when unknown)."""

    name: str
    path: str
    flags: Optional[int]
    hwcap: bool = False

    def accepts(self, elf_class: int, e_machine: str) -> bool:
        if self.flags is None:
            return True
        if self.flags & 0xFF not in (FLAG_ELF_LIBC6, 0x0001):
            return False
        spec = _REQUIRED_FLAGS.get(self.flags & 0xFF00)
        if spec is None:
            return False
        cls, machines = spec
        return e_machine in machines and (cls == 0 or cls == elf_class)


def parse_ld_so_cache(data: bytes) -> List[CacheEntry]:
    """Entries of an /etc/ld.so.cache image, in file order (ld.so takes the first match).

    Handles the new format (`glibc-ld.so.cache1.1`, glibc >= 2.32 default), the old format
    (`ld.so-1.7.0`) and the old format with the new one appended (what glibc < 2.32 wrote by
    default); the new part wins when present. Raises ValueError for anything else.
    Layout: glibc sysdeps/generic/dl-cache.h.
    """
    try:
        return _parse_cache(data)
    except struct.error as e:
        raise ValueError(f"truncated cache ({e})") from None


def _cstr(data: bytes, base: int, off: int) -> str:
    start = base + off
    end = data.find(b"\x00", start)
    if start >= len(data) or end < 0:
        raise ValueError("string offset outside the cache")
    return data[start:end].decode("utf-8", "replace")


def _parse_new(data: bytes, at: int) -> List[CacheEntry]:
    """struct cache_file_new at offset `at`: 48-byte header, 24-byte entries; string
    offsets are relative to the header."""
    if len(data) < at + 48:
        raise ValueError("truncated new-format header")
    end = ">" if data[at + 28] & 3 == 3 else "<"  # flags: endianness of the writer
    nlibs = struct.unpack_from(end + "I", data, at + 20)[0]
    if at + 48 + nlibs * 24 > len(data):
        raise ValueError("entry table runs past the end of the cache")
    out = []
    for i in range(nlibs):
        fl, key, val, _osv, hwcap = struct.unpack_from(end + "iIIIQ", data, at + 48 + i * 24)
        out.append(CacheEntry(_cstr(data, at, key), _cstr(data, at, val), fl & 0xFFFF,
                              hwcap=bool(hwcap)))
    return out


def _parse_cache(data: bytes) -> List[CacheEntry]:
    if data.startswith(NEW_MAGIC):
        return _parse_new(data, 0)
    if data.startswith(OLD_MAGIC):
        # struct cache_file: 11-byte magic, uint32 nlibs at 12, 12-byte entries; strings are
        # relative to the end of the entry table. A new-format cache may follow, 8-aligned.
        nlibs = struct.unpack_from("<I", data, 12)[0]
        table_end = 16 + nlibs * 12
        if table_end > len(data):
            raise ValueError("old-format entry table runs past the end of the cache")
        new_at = (table_end + 7) & ~7
        if data[new_at:new_at + len(NEW_MAGIC)] == NEW_MAGIC:
            return _parse_new(data, new_at)
        out = []
        for i in range(nlibs):
            fl, key, val = struct.unpack_from("<iII", data, 16 + i * 12)
            out.append(CacheEntry(_cstr(data, table_end, key), _cstr(data, table_end, val),
                                  fl & 0xFFFF))
        return out
    raise ValueError("not an ld.so.cache file (unknown magic)")


def parse_ldconfig_p(text: str) -> List[CacheEntry]:
    """Entries of `ldconfig -p` output:
    `\\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1`, also with
    `, hwcap: "x86-64-v3"` or `, OS ABI: Linux 3.2.0` inside the parentheses. The header line
    (`N libs found in cache ...`) and the trailing `Cache generated by:` line are skipped.
    """
    out = []
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if not m:
            continue
        name, tag, path = m.groups()
        parts = [p.strip() for p in tag.split(",")]
        kind = parts[0] if parts else ""
        req = [p for p in parts[1:] if not p.startswith(("hwcap:", "OS ABI:"))]
        hwcap = any(p.startswith("hwcap:") for p in parts[1:])
        if kind not in ("libc6", "ELF"):
            flags: Optional[int] = 0  # libc5/libc4: never loaded by glibc's ld.so
        else:
            req_flag = _TAG_FLAGS.get(",".join(req), 0x0000 if not req else None)
            flags = None if req_flag is None else (FLAG_ELF_LIBC6 | req_flag)
        out.append(CacheEntry(name, path, flags, hwcap=hwcap))
    return out
