"""Parsing one ELF file's dynamic and version data with pyelftools, reading only the few
kilobytes the loader needs (see npu_doctor.linker.elf)."""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Dict, Optional, Tuple

from .arch import arch_of
from .elftypes import _LOCK, ELF_MAGIC, STATS, VER_FLG_BASE, VER_FLG_WEAK, ElfError, ElfInfo, NotElf, VersionNeed


# -- pyelftools speed-up ----------------------------------------------------------------
# pyelftools builds ~80 parser objects per ELFFile (1-1.5 ms, most of the cost of reading a
# library). They depend only on (endianness, class, e_type, e_machine, OS ABI) and hold no
# per-file state, so they are built once per combination. Behaviour is unchanged.
class _PyElf:
    """pyelftools, imported on first use: a check with no SDK library never pays for it."""

    _loaded: Optional["_PyElf"] = None

    def __init__(self) -> None:
        from elftools.common.exceptions import ELFError
        from elftools.elf import elffile
        from elftools.elf.dynamic import DynamicSection, DynamicSegment
        from elftools.elf.structs import ELFStructs

        class _MemoStructs(ELFStructs):  # type: ignore[misc,valid-type]
            _memo: Dict[Tuple[Any, ...], Dict[str, Any]] = {}

            def create_basic_structs(self) -> None:  # type: ignore[override]
                key = ("basic", self.little_endian, self.elfclass)
                cached = self._memo.get(key)
                if cached is None:
                    super().create_basic_structs()
                    self._memo[key] = dict(self.__dict__)
                else:
                    self.__dict__.update(cached)

            def create_advanced_structs(self, e_type=None, e_machine=None,  # type: ignore[override]
                                        e_ident_osabi=None) -> None:
                key = ("adv", self.little_endian, self.elfclass, e_type, e_machine, e_ident_osabi)
                cached = self._memo.get(key)
                if cached is None:
                    super().create_advanced_structs(e_type, e_machine, e_ident_osabi)
                    self._memo[key] = dict(self.__dict__)
                else:
                    self.__dict__.update(cached)

        if getattr(elffile, "ELFStructs", None) is ELFStructs:
            elffile.ELFStructs = _MemoStructs  # type: ignore[attr-defined,misc]
        self.ELFFile = elffile.ELFFile
        self.ELFError = ELFError
        self.DynamicSection = DynamicSection
        self.DynamicSegment = DynamicSegment

    @classmethod
    def get(cls) -> "_PyElf":
        with _LOCK:
            if cls._loaded is None:
                cls._loaded = cls()
            return cls._loaded


class _CountingFile:
    """Seekable read-only wrapper that counts the bytes actually read (for the benchmark)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.bytes_read = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.bytes_read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()


#: Counters since import: files parsed, bytes read while parsing, cache hits.

def _parse(raw: BinaryIO, path: str) -> ElfInfo:
    head = raw.read(64)
    if len(head) < 52 or head[:4] != ELF_MAGIC:
        raise NotElf(f"{path}: not an ELF file")
    raw.seek(0)
    f = _CountingFile(raw)
    pe = _PyElf.get()
    try:
        elf = pe.ELFFile(f)
        info = ElfInfo(
            path=path,
            elf_class=elf.elfclass,
            e_machine=str(elf["e_machine"]),
            machine=(arch_of(str(elf["e_machine"]), elf.elfclass, elf.little_endian)
                     or str(elf["e_machine"]).lower().replace("em_", "")),
            little_endian=elf.little_endian,
            elf_type=str(elf["e_type"]),
        )
        if elf.num_sections() > 0:
            _from_sections(elf, info)
        else:
            _from_segments(elf, f, info)
    except (pe.ELFError, struct.error, ValueError, KeyError, IndexError, TypeError,
            AttributeError, EOFError, OSError, OverflowError, RecursionError,
            ZeroDivisionError, AssertionError) as e:
        # corrupt offsets make pyelftools seek past 2**63 or read garbage: one clear error
        raise ElfError(f"{path}: unreadable ELF ({type(e).__name__}: {e})") from None
    with _LOCK:
        STATS["parsed"] += 1
        STATS["bytes_read"] += f.bytes_read
    return info


def _take_tags(dyn: Any, info: ElfInfo) -> Dict[str, int]:
    """Fill needed/soname/rpath/runpath from a DynamicSection/Segment; return raw d_vals."""
    raw: Dict[str, int] = {}
    info.has_dynamic = True
    for tag in dyn.iter_tags():
        t = tag.entry.d_tag
        if t == "DT_NULL":
            break
        if t == "DT_NEEDED":
            info.needed.append(tag.needed)
        elif t == "DT_SONAME":
            info.soname = tag.soname
        elif t == "DT_RPATH":
            info.rpath.extend(p for p in tag.rpath.split(":") if p)
        elif t == "DT_RUNPATH":
            info.runpath.extend(p for p in tag.runpath.split(":") if p)
        elif t in ("DT_VERNEED", "DT_VERNEEDNUM", "DT_VERDEF", "DT_VERDEFNUM", "DT_STRTAB"):
            raw[t] = tag.entry.d_val
    return raw


class _Budget:
    """Entry counter for the linked version lists: a corrupt count or a `next` offset of 0
    must not make one file loop for minutes (the lists cannot hold more entries than their
    section has room for)."""

    def __init__(self, limit: int, path: str) -> None:
        self.left = min(int(limit), 1_000_000)
        self.path = path

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ElfError(f"{self.path}: corrupt version section (more entries than fit)")


_SHT_WANTED = {6: "SHT_DYNAMIC", 0x6FFFFFFE: "SHT_GNU_verneed", 0x6FFFFFFD: "SHT_GNU_verdef"}


def _from_sections(elf: Any, info: ElfInfo) -> None:
    # Find the three sections by sh_type with one read of the section header table (sh_type
    # is the second 32-bit word of every entry, in both classes); pyelftools then parses only
    # those three headers. Parsing every header through pyelftools cost ~40% of the time.
    wanted: Dict[str, int] = {}
    n, shoff, entsize = elf.num_sections(), elf["e_shoff"], elf["e_shentsize"]
    elf.stream.seek(shoff)
    table = elf.stream.read(n * entsize)
    end = "<" if elf.little_endian else ">"
    if len(table) == n * entsize and entsize >= 8:
        for i in range(n):
            t = _SHT_WANTED.get(struct.unpack_from(end + "I", table, i * entsize + 4)[0])
            if t is not None and t not in wanted:
                wanted[t] = i
    else:  # truncated table: let pyelftools report it
        for i in range(n):
            t = elf.get_section(i)["sh_type"]
            if isinstance(t, str) and t in _SHT_WANTED.values() and t not in wanted:
                wanted[t] = i
    if "SHT_DYNAMIC" in wanted:
        dyn = elf.get_section(wanted["SHT_DYNAMIC"])
        if isinstance(dyn, _PyElf.get().DynamicSection):
            _take_tags(dyn, info)
    if "SHT_GNU_verneed" in wanted:
        sec = elf.get_section(wanted["SHT_GNU_verneed"])
        budget = _Budget(sec["sh_size"] // 16 + 1, info.path)  # 16-byte Verneed/Vernaux
        for verneed, auxes in sec.iter_versions():
            budget.take()
            needs = info.version_needs.setdefault(verneed.name, [])
            for aux in auxes:
                budget.take()
                needs.append(VersionNeed(aux.name, bool(aux.entry["vna_flags"] & VER_FLG_WEAK)))
    if "SHT_GNU_verdef" in wanted:
        info.has_version_defs = True
        sec = elf.get_section(wanted["SHT_GNU_verdef"])
        budget = _Budget(sec["sh_size"] // 8 + 1, info.path)  # Verdaux entries are 8 bytes
        for verdef, auxes in sec.iter_versions():
            budget.take()
            names = []
            for a in auxes:
                budget.take()
                names.append(a.name)
            if verdef.entry["vd_flags"] & VER_FLG_BASE or not names:
                continue
            info.version_defs.append(names[0])


def _from_segments(elf: Any, f: _CountingFile, info: ElfInfo) -> None:
    """No section headers (sstrip'ed): read PT_DYNAMIC and the version tables it points to."""
    dyn = None
    for seg in elf.iter_segments():
        if isinstance(seg, _PyElf.get().DynamicSegment):
            dyn = seg
            break
    if dyn is None:
        return
    raw = _take_tags(dyn, info)
    end = "<" if info.little_endian else ">"

    def off(vaddr: int) -> Optional[int]:
        return next(iter(elf.address_offsets(vaddr)), None)

    strtab = off(raw["DT_STRTAB"]) if "DT_STRTAB" in raw else None
    if strtab is None:
        return

    def cstr(o: int) -> str:
        f.seek(strtab + o)
        buf = b""
        while b"\x00" not in buf and len(buf) < 4096:
            chunk = f.read(64)
            if not chunk:
                break
            buf += chunk
        return buf.split(b"\x00", 1)[0].decode("utf-8", "replace")

    budget = _Budget(100_000, info.path)
    pos = off(raw["DT_VERNEED"]) if "DT_VERNEED" in raw else None
    for _ in range(min(raw.get("DT_VERNEEDNUM", 0), 65536) if pos is not None else 0):
        budget.take()
        f.seek(pos)  # type: ignore[arg-type]  # not None: the loop runs only then
        _ver, cnt, vn_file, vn_aux, vn_next = struct.unpack(end + "HHIII", f.read(16))
        needs = info.version_needs.setdefault(cstr(vn_file), [])
        apos = pos + vn_aux
        for _ in range(cnt):
            budget.take()
            f.seek(apos)
            _hash, flags, _other, name, nxt = struct.unpack(end + "IHHII", f.read(16))
            needs.append(VersionNeed(cstr(name), bool(flags & VER_FLG_WEAK)))
            if not nxt:
                break
            apos += nxt
        if not vn_next:
            break
        pos += vn_next
    pos = off(raw["DT_VERDEF"]) if "DT_VERDEF" in raw else None
    if pos is not None:
        info.has_version_defs = True
    for _ in range(min(raw.get("DT_VERDEFNUM", 0), 65536) if pos is not None else 0):
        budget.take()
        f.seek(pos)  # type: ignore[arg-type]  # not None: the loop runs only then
        _ver, flags, _ndx, cnt, _hash, vd_aux, vd_next = struct.unpack(end + "HHHHIII", f.read(20))
        if cnt and not flags & VER_FLG_BASE:
            f.seek(pos + vd_aux)
            name, _n = struct.unpack(end + "II", f.read(8))
            info.version_defs.append(cstr(name))
        if not vd_next:
            break
        pos += vd_next
