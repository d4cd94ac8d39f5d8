"""Shared-library resolution as the glibc dynamic loader does it, through a Host.

For each DT_NEEDED name of an object (glibc `elf/dl-load.c`, `_dl_map_object`; ld.so(8)):

1. a name with a `/` is a path (after `$ORIGIN`/`$LIB`/`$PLATFORM` expansion), no search;
2. an object already loaded under that name or SONAME is reused (breadth-first load order);
3. DT_RPATH of the requesting object — only when it has no DT_RUNPATH — then the DT_RPATH of
   each object that loaded it, up to the root;
4. `LD_LIBRARY_PATH` (the Host's environment);
5. DT_RUNPATH of the requesting object only;
6. `/etc/ld.so.cache` (`glibc-ld.so.cache1.1` and the old `ld.so-1.7.0` layout, as written by
   `ldconfig`, glibc `elf/cache.c`); in a snapshot without that file, the canonical
   `ldconfig -p` output;
7. the default directories for the object's machine (multiarch, lib64, /lib, /usr/lib).

Only candidates of the requester's ELF class, machine and byte order count: a 32-bit or
foreign-architecture file earlier on the path is skipped, as ld.so does. A whole dependency
tree is walked once; every file is parsed once (`npu_doctor.elf` caches per file identity).

Then every `.gnu.version_r` requirement is checked against the `.gnu.version_d` of the file
that requirement resolved to (weak requirements and providers without version definitions
only make ld.so warn, so they are not failures). When the provider is not there to read (a
snapshot that captured the SDK but not /lib), the requirement is returned as `unverified` for
a later comparison of `GLIBC_x.y` with `libc.version`.

Not modelled: glibc-hwcaps subdirectories (their libraries are variants of ones found anyway),
DF_1_NODEFLIB, secure-execution mode, LD_PRELOAD, DSTs inside LD_LIBRARY_PATH, and the process
that will eventually dlopen a plugin: its executable's DT_RPATH, the dlopen caller's DT_RPATH
and the objects it has already loaded (only names listed as `assume_loaded` stand for those).
Each SDK library is analysed as if dlopen()ed on its own.
"""

from __future__ import annotations

import posixpath
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import CommandNotFound, HostError
from ..host import Host
from ..lazyregex import lazy
from ..namematch import name_patterns
from .elf import ElfError, ElfInfo, NotElf, read_elf
from .ldcache import CACHE_FILE, LDCONFIG_P, CacheEntry, parse_ld_so_cache, parse_ldconfig_p

#: Multiarch triplets per e_machine (Debian/Ubuntu), for default dirs and `$LIB`.
TRIPLETS = {
    ("EM_X86_64", 64): ["x86_64-linux-gnu"], ("EM_X86_64", 32): ["x86_64-linux-gnux32"],
    ("EM_386", 32): ["i386-linux-gnu"], ("EM_AARCH64", 64): ["aarch64-linux-gnu"],
    ("EM_ARM", 32): ["arm-linux-gnueabihf", "arm-linux-gnueabi"],
    ("EM_RISCV", 64): ["riscv64-linux-gnu"], ("EM_PPC64", 64): ["powerpc64le-linux-gnu"],
    ("EM_S390", 64): ["s390x-linux-gnu"], ("EM_LOONGARCH", 64): ["loongarch64-linux-gnu"],
    ("EM_MIPS", 64): ["mips64el-linux-gnuabi64"], ("EM_MIPS", 32): ["mipsel-linux-gnu"],
}
#: AT_PLATFORM per e_machine (what `$PLATFORM` expands to).
PLATFORMS = {"EM_X86_64": "x86_64", "EM_386": "i686", "EM_AARCH64": "aarch64", "EM_ARM": "v7l",
             "EM_RISCV": "riscv64", "EM_PPC64": "power8", "EM_S390": "z196",
             "EM_LOONGARCH": "loongarch"}

_DST_RE = lazy(r"\$(\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM))")
_GLIBC_VER = lazy(r"^GLIBC_(\d+(?:\.\d+)+)$")


def default_dirs(e_machine: str, elf_class: int) -> List[str]:
    """The trusted directories searched last, for objects of this machine and class."""
    dirs: List[str] = []
    for t in TRIPLETS.get((e_machine, elf_class), []):
        dirs += [f"/lib/{t}", f"/usr/lib/{t}"]
    if elf_class == 64:
        dirs += ["/lib64", "/usr/lib64"]
    elif e_machine in ("EM_386", "EM_X86_64"):
        dirs += ["/lib32", "/usr/lib32"]
    return dirs + ["/lib", "/usr/lib"]


@dataclass
class Resolution:
    """Where a needed name went: `path` (None when not found), `via` (rpath, runpath,
    ld_library_path, ld.so.cache, default, loaded, path), `tried` (dirs or notes, short),
    `captured` False when the path came from a cache listing whose file is not readable here
    (a snapshot)."""

    name: str
    path: Optional[str]
    via: str = ""
    tried: List[str] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    captured: bool = True


@dataclass
class Node:
    """One object of a dependency tree: its ElfInfo, how each DT_NEEDED resolved, and what
    was wrong."""

    path: str
    info: ElfInfo
    parent: Optional[str]
    resolutions: Dict[str, Resolution] = field(default_factory=dict)
    missing: List[str] = field(default_factory=list)
    unknown: List[str] = field(default_factory=list)
    unsatisfied: List[Dict[str, object]] = field(default_factory=list)
    unverified: List[Dict[str, object]] = field(default_factory=list)


class Resolver:
    """Resolves dependency trees on one host. Build once per check and reuse for every root.

    `environ` defaults to host.environ(); `assume_loaded` are fnmatch patterns of names the
    process that loads these libraries already has (e.g. `libpython3*.so*` for a Python
    extension module): they count as resolved.
    """

    def __init__(self, host: Host, environ: Optional[Dict[str, str]] = None,
                 cache_entries: Optional[List[CacheEntry]] = None) -> None:
        self.host = host
        self.environ = host.environ() if environ is None else environ
        self.ld_library_path = [d for d in self.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
        self.cache_source: Optional[str] = None
        self.cache_error: Optional[str] = None
        if cache_entries is None:
            cache_entries = self._load_cache()
        else:
            self.cache_source = "given"
        self.cache: Dict[str, List[CacheEntry]] = {}
        for e in cache_entries:
            self.cache.setdefault(e.name, []).append(e)
        self._elf: Dict[str, object] = {}
        self._lib_dirs: Dict[Tuple[str, int], str] = {}
        self._memo: Dict[Tuple[object, ...], Resolution] = {}

    # -- loader cache ------------------------------------------------------------------
    def _load_cache(self) -> List[CacheEntry]:
        try:
            data = self.host.read_bytes(CACHE_FILE, 64 * 1024 * 1024)
        except HostError:
            data = None
        if data:
            try:
                entries = parse_ld_so_cache(data)
                self.cache_source = CACHE_FILE
                return entries
            except ValueError as e:
                self.cache_error = f"{CACHE_FILE}: {e}"
        if self.host.source != "live":
            try:
                res = self.host.run(LDCONFIG_P)
            except (CommandNotFound, HostError):
                return []
            if res.ok:
                self.cache_source = "$ ldconfig -p"
                return parse_ldconfig_p(res.stdout)
        return []

    @property
    def cache_known(self) -> bool:
        """Whether the loader cache could be read (else a miss in a snapshot is unknown)."""
        return self.cache_source is not None

    # -- files ---------------------------------------------------------------------------
    def elf(self, path: str) -> Optional[ElfInfo]:
        """ElfInfo of a host path, or None when it is missing or not a readable ELF file."""
        got = self._elf.get(path)
        if got is None and path not in self._elf:
            try:
                got = read_elf(self.host, path)
            except (NotElf, ElfError, HostError):
                got = None
            self._elf[path] = got
        return got  # type: ignore[return-value]

    def _lib_dst(self, info: ElfInfo) -> str:
        key = (info.e_machine, info.elf_class)
        if key not in self._lib_dirs:
            val = "lib64" if info.elf_class == 64 else "lib"
            for t in TRIPLETS.get(key, []):
                if self.host.is_dir(f"/lib/{t}") or self.host.is_dir(f"/usr/lib/{t}"):
                    val = f"lib/{t}"
                    break
            self._lib_dirs[key] = val
        return self._lib_dirs[key]

    def expand(self, entry: str, origin_of: str, info: ElfInfo) -> Optional[str]:
        """Expand `$ORIGIN`, `$LIB`, `$PLATFORM` (and `${...}`) in one path entry; None when
        the entry cannot be used (relative with no origin)."""
        def sub(m: "re.Match[str]") -> str:
            name = m.group(2) or m.group(3)
            if name == "ORIGIN":
                return posixpath.dirname(origin_of) or "/"
            if name == "LIB":
                return self._lib_dst(info)
            return PLATFORMS.get(info.e_machine, info.machine)
        out = _DST_RE.sub(sub, entry)
        return posixpath.normpath(out) if out.startswith("/") else None

    def _try(self, directory: str, name: str, want: ElfInfo, res: Resolution) -> Optional[str]:
        cand = posixpath.join(directory, name)
        if not self.host.exists(cand):
            return None
        got = self.elf(cand)
        if got is None:
            res.skipped.append(f"{cand} (not a readable ELF file)")
            return None
        if not want.compatible(got):
            res.skipped.append(f"{cand} ({got.class_name} {got.machine}, need "
                               f"{want.class_name} {want.machine})")
            return None
        return cand

    # -- one name ------------------------------------------------------------------------
    def resolve(self, name: str, requester: str, info: ElfInfo,
                inherited_rpath: Sequence[Tuple[str, str]] = ()) -> Resolution:
        """Resolve one DT_NEEDED `name` of the object at `requester`.

        `inherited_rpath` is the (origin path, entry) list of DT_RPATH entries of the objects
        that loaded `requester` (used only when it has no DT_RUNPATH).
        """
        key = (name, requester, tuple(inherited_rpath))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        res = self._resolve(name, requester, info, inherited_rpath)
        self._memo[key] = res
        return res

    def _resolve(self, name: str, requester: str, info: ElfInfo,
                 inherited_rpath: Sequence[Tuple[str, str]]) -> Resolution:
        res = Resolution(name, None)
        if "/" in name:
            p = self.expand(name, requester, info) if "$" in name else (
                name if name.startswith("/") else None)
            if p and self._try(posixpath.dirname(p), posixpath.basename(p), info, res):
                res.path, res.via = p, "path"
            res.tried.append(p or name)
            return res
        groups: List[Tuple[str, List[Tuple[str, str]]]] = []
        if not info.runpath:
            own = [(requester, e) for e in info.rpath]
            groups.append(("rpath", own + list(inherited_rpath)))
        groups.append(("ld_library_path", [("", d) for d in self.ld_library_path]))
        groups.append(("runpath", [(requester, e) for e in info.runpath]))
        labels = {"rpath": "RPATH", "ld_library_path": "LD_LIBRARY_PATH", "runpath": "RUNPATH"}
        for via, entries in groups:
            if via == "ld_library_path" and not entries:
                res.tried.append("LD_LIBRARY_PATH unset")
            for origin, entry in entries:
                d = self.expand(entry, origin, info) if "$" in entry else (
                    entry if entry.startswith("/") else None)
                if d is None:
                    continue
                res.tried.append(f"{labels[via]} {d}")
                if self._try(d, name, info, res):
                    res.path, res.via = posixpath.join(d, name), via
                    return res
        for cached in self.cache.get(name, []):
            if not cached.accepts(info.elf_class, info.e_machine):
                continue
            if self.host.exists(cached.path):
                if self._try(posixpath.dirname(cached.path), posixpath.basename(cached.path), info, res):
                    res.path, res.via = cached.path, "ld.so.cache"
                    res.tried.append("ld.so.cache")
                    return res
            elif self.host.source != "live":
                # listed by the captured loader cache, file not captured: present on the board
                res.path, res.via, res.captured = cached.path, "ld.so.cache", False
                res.tried.append("ld.so.cache")
                return res
        res.tried.append("ld.so.cache" if self.cache_known else "ld.so.cache (not available)")
        for d in default_dirs(info.e_machine, info.elf_class):
            res.tried.append(d)
            if self._try(d, name, info, res):
                res.path, res.via = posixpath.join(d, name), "default"
                return res
        return res

    # -- a whole tree --------------------------------------------------------------------
    def tree(self, root: str, assume_loaded: Iterable[str] = ()) -> List[Node]:
        """Every object of root's dependency tree, breadth-first as ld.so loads them.

        Raises NotElf/ElfError/HostError when the root itself cannot be read.
        """
        info = read_elf(self.host, root)
        assume = name_patterns(assume_loaded)
        nodes: List[Node] = []
        by_path: Dict[str, Node] = {}
        loaded: Dict[str, str] = {}  # DT_NEEDED name or SONAME -> path (ld.so _dl_name_match_p)
        queue: "deque[Tuple[str, ElfInfo, Optional[str], Tuple[Tuple[str, str], ...]]]" = \
            deque([(root, info, None, ())])
        first = Node(root, info, None)
        by_path[root] = first
        if info.soname:
            loaded[info.soname] = root
        pending = {root: first}
        while queue:
            path, inf, parent, inherited = queue.popleft()
            node = pending.pop(path)
            nodes.append(node)
            own_rpath = tuple((path, e) for e in inf.rpath) if not inf.runpath else ()
            for name in inf.needed:
                if name in loaded:
                    node.resolutions[name] = Resolution(name, loaded[name], via="loaded")
                    continue
                if assume.match(name):
                    node.resolutions[name] = Resolution(name, None, via="assumed")
                    continue
                res = self.resolve(name, path, inf, inherited)
                node.resolutions[name] = res
                if res.path is None:
                    if self.host.source != "live" and not self.cache_known:
                        node.unknown.append(name)
                    else:
                        node.missing.append(name)
                    continue
                loaded[name] = res.path
                if not res.captured or res.path in by_path:
                    continue
                child = self.elf(res.path)
                if child is None:
                    continue
                if child.soname:
                    loaded.setdefault(child.soname, res.path)
                cn = Node(res.path, child, path)
                by_path[res.path] = cn
                pending[res.path] = cn
                queue.append((res.path, child, path, own_rpath + tuple(inherited)))
        for node in nodes:
            self._check_versions(node)
        return nodes

    def _check_versions(self, node: Node) -> None:
        for file, needs in node.info.version_needs.items():
            res = node.resolutions.get(file)
            if res is None or (res.path is None and res.via != "assumed"):
                continue  # not a DT_NEEDED of this object, or already reported missing
            if res.via == "assumed":
                continue
            provider = self.elf(res.path) if res.captured and res.path is not None else None
            for need in needs:
                if need.weak:
                    continue
                if provider is None:
                    node.unverified.append({"version": need.version, "library": file,
                                            "provider": res.path})
                    continue
                if not provider.has_version_defs:
                    continue  # ld.so: "no version information available" (a warning)
                if need.version not in provider.version_defs:
                    node.unsatisfied.append({
                        "version": need.version, "library": file, "provider": res.path,
                        "basis": "version_d",
                        "provided_max": newest_of_family(provider.version_defs, need.version)})


def version_family(version: str) -> str:
    """`GLIBC_2.27` -> `GLIBC`, `GLIBCXX_3.4.29` -> `GLIBCXX`, `CXXABI_1.3.13` -> `CXXABI`."""
    m = re.match(r"^(.*?)_?(\d+(?:\.\d+)*)$", version)
    return m.group(1) if m else version


def _ver_key(version: str) -> Tuple[int, ...]:
    m = re.search(r"(\d+(?:\.\d+)*)$", version)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def newest_of_family(defs: Iterable[str], version: str) -> Optional[str]:
    """The newest defined version of the same family as `version` (None when none)."""
    fam = version_family(version)
    same = [d for d in defs if version_family(d) == fam and _ver_key(d)]
    return max(same, key=_ver_key) if same else None


def glibc_version_of(version: str) -> Optional[str]:
    """`GLIBC_2.27` -> `2.27`; None for GLIBC_PRIVATE and other families."""
    m = _GLIBC_VER.match(version)
    return m.group(1) if m else None


def list_output(nodes: List[Node]) -> str:
    """`ld.so --list`-style text for one tree: `\\tname => path (via)` per needed name."""
    lines = []
    for node in nodes:
        for name in node.info.needed:
            res = node.resolutions.get(name)
            if res is None:
                continue
            where = res.path or "not found"
            lines.append(f"\t{name} => {where}" + (f" ({res.via})" if res.via else ""))
    seen, out = set(), []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return "\n".join(out)
