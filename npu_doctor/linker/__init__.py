"""What the dynamic linker would do with a library: ELF reading (`elf`), the ld.so cache
(`ldcache`) and glibc's search order and symbol-version checks (`ldso`)."""
