"""What the dynamic loader needs to know about one ELF file, read with pyelftools.

`read_elf(host, path)` returns an `ElfInfo`: ELF class and machine, DT_NEEDED, DT_SONAME,
DT_RPATH, DT_RUNPATH, the `.gnu.version_r` requirements per needed file and the
`.gnu.version_d` definitions. Nothing else is read: the ELF header, the section header table,
the dynamic section with its string table and the two version sections — a few kilobytes even
for a 500 MB library (the file is opened through `Host.open_binary` and read with seeks, never
whole). A file whose section headers were stripped is read the way ld.so reads it, through the
PT_DYNAMIC program header.

Results are cached per file identity (device, inode, mtime, size), so `watch` and a
dependency tree that meets the same libc a hundred times parse each file once.

Formats: System V gABI "Dynamic Section"; LSB Core "Symbol Versioning"
(https://refspecs.linuxfoundation.org/LSB_5.0.0/LSB-Core-generic/LSB-Core-generic/symversion.html).

Errors: `NotElf` (not an ELF file: a linker script such as libc.so, a text stub, a truncated
file) and `ElfError` (an ELF file pyelftools cannot read); host errors (NotFound,
AccessDenied) pass through.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from .host import Host

ELF_MAGIC = b"\x7fELF"
VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2

#: e_machine (pyelftools name) -> the name npu-doctor reports (uname -m style).
MACHINES = {
    "EM_X86_64": "x86_64", "EM_386": "i386", "EM_AARCH64": "aarch64", "EM_ARM": "arm",
    "EM_RISCV": "riscv", "EM_PPC64": "ppc64", "EM_PPC": "ppc", "EM_S390": "s390",
    "EM_MIPS": "mips", "EM_LOONGARCH": "loongarch", "EM_SPARCV9": "sparc64",
    "EM_IA_64": "ia64",
}


class NotElf(Exception):
    """The file is not an ELF object (linker script, text, empty, truncated header)."""


class ElfError(Exception):
    """An ELF file whose dynamic or version data cannot be read."""


@dataclass
class VersionNeed:
    """One `.gnu.version_r` entry: `version` (e.g. GLIBC_2.27) needed from a file."""

    version: str
    weak: bool = False


@dataclass
class ElfInfo:
    """The loader-relevant facts of one ELF file.

    `elf_class` is 32 or 64; `machine` the uname-style name (x86_64, aarch64, arm, ...);
    `e_machine` pyelftools' raw name (EM_X86_64); `rpath`/`runpath` the raw entries split
    on ':' (with `$ORIGIN` etc. unexpanded); `version_needs` maps each needed file name (as
    written in vn_file) to its required versions; `version_defs` are the version names the
    file defines, without the base entry (the soname); `has_version_defs` says whether the
    file has a `.gnu.version_d` at all (ld.so only warns when a provider has none).
    """

    path: str
    elf_class: int
    machine: str
    e_machine: str
    little_endian: bool
    elf_type: str
    soname: Optional[str] = None
    needed: List[str] = field(default_factory=list)
    rpath: List[str] = field(default_factory=list)
    runpath: List[str] = field(default_factory=list)
    version_needs: Dict[str, List[VersionNeed]] = field(default_factory=dict)
    version_defs: List[str] = field(default_factory=list)
    has_version_defs: bool = False
    has_dynamic: bool = False

    @property
    def class_name(self) -> str:
        return f"ELF{self.elf_class}"

    def compatible(self, other: "ElfInfo") -> bool:
        """Whether ld.so would load `other` into a process of this file's kind."""
        return (self.elf_class == other.elf_class and self.e_machine == other.e_machine
                and self.little_endian == other.little_endian)


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
            elffile.ELFStructs = _MemoStructs  # type: ignore[attr-defined]
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
STATS = {"parsed": 0, "bytes_read": 0, "cache_hits": 0}
_CACHE: Dict[Tuple[Any, ...], ElfInfo] = {}
_CACHE_MAX = 8192
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget what was parsed in this process (the cache file is left alone)."""
    with _LOCK:
        _CACHE.clear()
        _DISK.clear()
        _NEW_KEYS.clear()
        _DISK_STATE["loaded"] = True  # and do not read it back in this process


# -- cache across runs ---------------------------------------------------------------------
# Parsing is most of the preflight's cost and SDK libraries rarely change, so what was read is
# kept in the user's cache directory, keyed like the in-process cache (device, inode, mtime,
# size): a changed or replaced file is parsed again (npu_doctor.usercache says where).
_DISK: Dict[str, Dict[str, Any]] = {}
_DISK_STATE = {"loaded": False, "dirty": False}
_DISK_VERSION = 1


_CACHE_NAME = "elf-cache.json"


def _key_text(key: Tuple[Any, ...]) -> str:
    return ":".join(str(k) for k in key)


def _load_disk() -> None:
    from . import usercache

    with _LOCK:
        if _DISK_STATE["loaded"]:
            return
        _DISK_STATE["loaded"] = True
        data = usercache.load_json(_CACHE_NAME)
        if isinstance(data, dict) and data.get("version") == _DISK_VERSION \
                and isinstance(data.get("files"), dict):
            _DISK.update(data["files"])


def _from_disk(key: Tuple[Any, ...], path: str) -> Optional[ElfInfo]:
    _load_disk()
    d = _DISK.get(_key_text(key))
    if not isinstance(d, dict):
        return None
    try:
        d = dict(d)
        d["version_needs"] = {k: [VersionNeed(**n) for n in v] for k, v in d.get("version_needs", {}).items()}
        info = ElfInfo(**d)
    except (TypeError, AttributeError):
        return None
    info.path = path
    with _LOCK:
        _CACHE[key] = info
    return info


def save_cache() -> None:
    """Write what this process parsed to the user cache (atomically). Never raises."""
    from . import usercache

    with _LOCK:
        if not _NEW_KEYS:
            return
        for key in _NEW_KEYS:
            info = _CACHE.get(key)
            if info is not None:
                _DISK[_key_text(key)] = dataclasses.asdict(info)
        _NEW_KEYS.clear()
        if len(_DISK) > _CACHE_MAX:
            for k in list(_DISK)[: len(_DISK) - _CACHE_MAX]:
                del _DISK[k]
        files = dict(_DISK)
    usercache.save_json(_CACHE_NAME, {"version": _DISK_VERSION, "files": files})


_NEW_KEYS: List[Tuple[Any, ...]] = []


def is_elf(host: Host, path: str) -> bool:
    """Whether path starts with the ELF magic (False for missing or unreadable files)."""
    try:
        return host.read_bytes(path, 4) == ELF_MAGIC
    except Exception:
        return False


def read_elf(host: Host, path: str) -> ElfInfo:
    """The ElfInfo of path (a host path), cached per (dev, inode, mtime, size).

    Raises NotElf, ElfError, and the Host's NotFound / AccessDenied / HostError.
    """
    f = host.open_binary(path)
    try:
        key: Optional[Tuple[Any, ...]] = None
        try:
            st = os.fstat(f.fileno())
            # no path: /lib/x/libc.so.6 and /usr/lib/x/libc.so.6 (merged /usr) are one file
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        except (AttributeError, OSError, ValueError):
            key = None  # an in-memory file: no identity to cache by
        if key is not None:
            hit = _CACHE.get(key)
            if hit is None:
                hit = _from_disk(key, path)
            if hit is not None:
                with _LOCK:
                    STATS["cache_hits"] += 1
                return hit if hit.path == path else dataclasses.replace(hit, path=path)
        info = _parse(f, path)
        if key is not None:
            with _LOCK:
                if len(_CACHE) >= _CACHE_MAX:
                    _CACHE.clear()
                _CACHE[key] = info
                _NEW_KEYS.append(key)
        return info
    finally:
        f.close()


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
            machine=MACHINES.get(str(elf["e_machine"]), str(elf["e_machine"]).lower().replace("em_", "")),
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
            if t in _SHT_WANTED.values() and t not in wanted:
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
        f.seek(pos)
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
        f.seek(pos)
        _ver, flags, _ndx, cnt, _hash, vd_aux, vd_next = struct.unpack(end + "HHHHIII", f.read(20))
        if cnt and not flags & VER_FLG_BASE:
            f.seek(pos + vd_aux)
            name, _n = struct.unpack(end + "II", f.read(8))
            info.version_defs.append(cstr(name))
        if not vd_next:
            break
        pos += vd_next
