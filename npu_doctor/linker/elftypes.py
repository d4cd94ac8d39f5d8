"""The values ELF reading yields (ElfInfo, VersionNeed), its errors, and the e_machine ->
architecture table (see npu_doctor.linker.elf)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..errors import NpuDoctorError

ELF_MAGIC = b"\x7fELF"
VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2


class ElfError(NpuDoctorError):
    """An ELF file whose dynamic or version data cannot be read (message: path and cause)."""


class NotElf(ElfError):
    """The file is not an ELF object (linker script, text, empty, truncated header)."""


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



#: Counters since import: files parsed, bytes read while parsing, cache hits.
STATS = {"parsed": 0, "bytes_read": 0, "cache_hits": 0}
_LOCK = threading.Lock()
