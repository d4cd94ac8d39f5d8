"""One table from an ELF file's machine to the architecture name npu-doctor reports, in the
spelling of `uname -m` (`x86_64`, `aarch64`, `i686`, `riscv64`), so that the `arch` fact
(collectors/kernel.py, from /proc or an ELF header) and `libraries[].machine` (linker.elf)
always agree. Sources: System V gABI e_machine values (elf.h), `uname -m` on each platform.

EM_ARM maps to "arm": the header cannot tell armv6l from armv7l, so the family is all that
is known. PowerPC 64 is ppc64 or ppc64le by byte order.
"""

from __future__ import annotations

from typing import Optional

#: e_machine number -> pyelftools' name.
E_MACHINE_NAMES = {
    0x03: "EM_386", 0x08: "EM_MIPS", 0x14: "EM_PPC", 0x15: "EM_PPC64", 0x16: "EM_S390",
    0x28: "EM_ARM", 0x2B: "EM_SPARCV9", 0x32: "EM_IA_64", 0x3E: "EM_X86_64", 0xB7: "EM_AARCH64",
    0xF3: "EM_RISCV", 0x102: "EM_LOONGARCH",
}

#: (e_machine name, ELF class 32/64) -> `uname -m` spelling.
ARCH_BY_MACHINE = {
    ("EM_X86_64", 64): "x86_64", ("EM_386", 32): "i686", ("EM_AARCH64", 64): "aarch64",
    ("EM_ARM", 32): "arm", ("EM_RISCV", 64): "riscv64", ("EM_RISCV", 32): "riscv32",
    ("EM_S390", 64): "s390x", ("EM_S390", 32): "s390", ("EM_LOONGARCH", 64): "loongarch64",
    ("EM_MIPS", 32): "mips", ("EM_MIPS", 64): "mips64", ("EM_PPC", 32): "ppc",
    ("EM_SPARCV9", 64): "sparc64", ("EM_IA_64", 64): "ia64",
}


def arch_of(e_machine: str, elf_class: int, little_endian: bool = True) -> Optional[str]:
    """The `uname -m` name for an ELF machine (pyelftools name such as `EM_AARCH64`), class
    (32 or 64) and byte order; None for a machine not in the table."""
    if e_machine == "EM_PPC64":
        return "ppc64le" if little_endian else "ppc64"
    return ARCH_BY_MACHINE.get((e_machine, elf_class))
