"""ELF reading and ld.so-style resolution on real ELF files that gcc builds here.

Every resolution test is checked against the real dynamic loader of this machine (the library
is dlopen()ed in a child process), so the tests fail if npu-doctor and ld.so disagree.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.linker import elf as elfmod
from npu_doctor.linker.elf import ElfError, NotElf, read_elf
from npu_doctor.linker.ldso import (
    Resolver,
    glibc_version_of,
    list_output,
    newest_of_family,
    parse_ld_so_cache,
    parse_ldconfig_p,
    version_family,
)

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc not installed")
X86_64 = os.uname().machine == "x86_64"


def cc(out: Path, src: str, *flags: str) -> Path:
    """Compile C source `src` into the shared object `out` with extra gcc flags."""
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.with_suffix(out.suffix + ".c")
    c.write_text(src)
    subprocess.run([GCC, "-shared", "-fPIC", "-o", str(out), str(c), *flags], check=True,
                   capture_output=True, text=True)
    c.unlink()
    return out


def dlopen(path: Path, env: dict = None, call: str = None) -> subprocess.CompletedProcess:
    """Load a library with the real dynamic loader in a child process (optionally call a
    `const char *fn(void)` and print its result)."""
    code = ("import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\n"
            + (f"f = lib.{call}; f.restype = ctypes.c_char_p; print(f().decode())\n" if call else ""))
    e = dict(os.environ)
    e.pop("LD_LIBRARY_PATH", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, env=e)


PROV_SRC = "int old_fn(void){return 1;}\nint new_fn(void){return 2;}\n"
PROV_OLD_SRC = "int old_fn(void){return 1;}\n"
CONS_SRC = ("#include <unistd.h>\nextern int old_fn(void); extern int new_fn(void);\n"
            "int cons(void){return old_fn()+new_fn()+(int)getpid();}\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A provider defining GLIBC_2.17 and GLIBC_2.99 (version script), a consumer linked to
    both with RUNPATH $ORIGIN/../prov, and a consumer whose DT_NEEDED is then deleted."""
    if GCC is None:
        pytest.skip("gcc not installed")
    root = tmp_path_factory.mktemp("elf")
    (root / "v2.map").write_text("GLIBC_2.17 { global: old_fn; local: *; };\n"
                                 "GLIBC_2.99 { global: new_fn; } GLIBC_2.17;\n")
    (root / "v1.map").write_text("GLIBC_2.17 { global: old_fn; local: *; };\n")
    prov = cc(root / "prov/libvprov.so.1", PROV_SRC, "-Wl,-soname,libvprov.so.1",
              f"-Wl,--version-script={root / 'v2.map'}")
    cons = cc(root / "cons/libcons.so", CONS_SRC, f"-L{root / 'prov'}", "-l:libvprov.so.1",
              "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../prov", "-Wl,-soname,libcons.so")
    gone = cc(root / "gone/libgone.so.1", "int gone(void){return 3;}\n", "-Wl,-soname,libgone.so.1")
    needs_gone = cc(root / "cons/libneedsgone.so", "extern int gone(void);\nint g(void){return gone();}\n",
                    f"-L{root / 'gone'}", "-l:libgone.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN")
    gone.unlink()
    return {"root": root, "prov": prov, "cons": cons, "needs_gone": needs_gone}


# -- reading ---------------------------------------------------------------------------------
@needs_gcc
def test_reads_needed_soname_runpath_and_versions(built):
    host = LiveHost()
    cons = read_elf(host, str(built["cons"]))
    assert cons.soname == "libcons.so"
    assert "libvprov.so.1" in cons.needed and "libc.so.6" in cons.needed
    assert cons.runpath == ["$ORIGIN/../prov"] and cons.rpath == []
    assert {n.version for n in cons.version_needs["libvprov.so.1"]} == {"GLIBC_2.17", "GLIBC_2.99"}
    prov = read_elf(host, str(built["prov"]))
    assert prov.soname == "libvprov.so.1"
    assert prov.has_version_defs and set(prov.version_defs) == {"GLIBC_2.17", "GLIBC_2.99"}
    assert cons.elf_class == 64 if sys.maxsize > 2**32 else 32


@needs_gcc
def test_stripped_section_headers_read_through_pt_dynamic(built, tmp_path):
    """sstrip-style file (no section header table): ld.so only needs PT_DYNAMIC, so do we."""
    data = bytearray(built["cons"].read_bytes())
    assert data[4] == 2, "64-bit build expected"
    fmt = "<" if data[5] == 1 else ">"
    struct.pack_into(fmt + "Q", data, 0x28, 0)        # e_shoff
    struct.pack_into(fmt + "HHH", data, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    stripped = tmp_path / "libstripped.so"
    stripped.write_bytes(bytes(data))
    a, b = read_elf(LiveHost(), str(built["cons"])), read_elf(LiveHost(), str(stripped))
    assert b.needed == a.needed and b.runpath == a.runpath and b.soname == a.soname
    assert {k: [v.version for v in vs] for k, vs in b.version_needs.items()} == \
           {k: [v.version for v in vs] for k, vs in a.version_needs.items()}
    pa = tmp_path / "p.so"
    data = bytearray(built["prov"].read_bytes())
    struct.pack_into(fmt + "Q", data, 0x28, 0)
    struct.pack_into(fmt + "HHH", data, 0x3A, 0, 0, 0)
    pa.write_bytes(bytes(data))
    assert set(read_elf(LiveHost(), str(pa)).version_defs) == {"GLIBC_2.17", "GLIBC_2.99"}


def test_not_elf_and_truncated(tmp_path):
    script = tmp_path / "libc.so"
    script.write_text("/* GNU ld script */\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n")
    with pytest.raises(NotElf):
        read_elf(LiveHost(), str(script))
    trunc = tmp_path / "libtrunc.so"
    real = Path("/lib/x86_64-linux-gnu/libc.so.6") if Path("/lib/x86_64-linux-gnu/libc.so.6").exists() \
        else Path(sys.executable)
    trunc.write_bytes(real.read_bytes()[:200])
    with pytest.raises((NotElf, ElfError)):
        read_elf(LiveHost(), str(trunc))


@needs_gcc
def test_cache_per_file_identity(built, tmp_path):
    lib = tmp_path / "libc1.so"
    shutil.copy(built["prov"], lib)
    host = LiveHost()
    read_elf(host, str(lib))
    hits = elfmod.STATS["cache_hits"]
    read_elf(host, str(lib))
    assert elfmod.STATS["cache_hits"] == hits + 1
    time.sleep(0.01)
    shutil.copy(built["cons"], lib)  # same path, new content and mtime: parsed again
    assert read_elf(host, str(lib)).soname == "libcons.so"


def test_reads_only_a_small_part_of_a_large_library():
    """The biggest shared object on this machine is read with seeks: a few KB, not the file."""
    cands = []
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if os.path.isdir(d):
            for n in os.listdir(d):
                p = os.path.join(d, n)
                if ".so" in n and os.path.isfile(p) and not os.path.islink(p):
                    cands.append((os.path.getsize(p), p))
    if not cands:
        pytest.skip("no shared objects to measure")
    size, path = max(cands)
    elfmod.clear_cache()
    before = elfmod.STATS["bytes_read"]
    read_elf(LiveHost(), path)
    used = elfmod.STATS["bytes_read"] - before
    assert used < max(256 * 1024, size // 20), (path, size, used)


# -- version helpers -------------------------------------------------------------------------
def test_version_families():
    assert version_family("GLIBC_2.27") == "GLIBC"
    assert version_family("GLIBCXX_3.4.29") == "GLIBCXX"
    assert version_family("CXXABI_1.3.13") == "CXXABI"
    assert newest_of_family(["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.3", "GLIBC_PRIVATE"],
                            "GLIBC_2.27") == "GLIBC_2.17"
    assert glibc_version_of("GLIBC_2.27") == "2.27"
    assert glibc_version_of("GLIBC_PRIVATE") is None and glibc_version_of("GLIBCXX_3.4") is None


# -- symbol versions -------------------------------------------------------------------------
@needs_gcc
def test_symbol_version_unsatisfied_when_provider_lacks_it(built, tmp_path):
    root = tmp_path / "t"
    shutil.copytree(built["root"] / "cons", root / "cons")
    (root / "prov").mkdir()
    shutil.copy(built["prov"], root / "prov")
    cons = root / "cons/libcons.so"
    nodes = Resolver(LiveHost(), environ={}).tree(str(cons))
    assert nodes[0].missing == [] and nodes[0].unsatisfied == []
    assert dlopen(cons).returncode == 0
    # the provider is replaced by a build that only defines GLIBC_2.17
    cc(root / "prov/libvprov.so.1", PROV_OLD_SRC, "-Wl,-soname,libvprov.so.1",
       f"-Wl,--version-script={built['root'] / 'v1.map'}")
    nodes = Resolver(LiveHost(), environ={}).tree(str(cons))
    assert nodes[0].unsatisfied == [{
        "version": "GLIBC_2.99", "library": "libvprov.so.1",
        "provider": str(root / "prov/libvprov.so.1"), "basis": "version_d",
        "provided_max": "GLIBC_2.17"}]
    real = dlopen(cons)
    assert real.returncode != 0 and "GLIBC_2.99' not found" in real.stderr


@needs_gcc
def test_missing_needed_is_reported_like_ld_so(built):
    nodes = Resolver(LiveHost(), environ={}).tree(str(built["needs_gone"]))
    assert nodes[0].missing == ["libgone.so.1"]
    res = nodes[0].resolutions["libgone.so.1"]
    assert res.path is None
    assert f"RUNPATH {built['needs_gone'].parent}" in res.tried and "ld.so.cache" in res.tried
    real = dlopen(built["needs_gone"])
    assert "libgone.so.1: cannot open shared object file" in real.stderr
    assert "libgone.so.1 => not found" in list_output(nodes)


# -- search order ----------------------------------------------------------------------------
def _which_lib(path: Path, tag: str, *flags: str) -> Path:
    return cc(path, f'const char *which(void){{return "{tag}";}}\n', "-Wl,-soname," + path.name, *flags)


@pytest.fixture()
def dup_dirs(tmp_path):
    """Two directories, each with its own libdup.so.1 that says where it is from."""
    if GCC is None:
        pytest.skip("gcc not installed")
    a = _which_lib(tmp_path / "A/libdup.so.1", "A")
    b = _which_lib(tmp_path / "B/libdup.so.1", "B")
    return tmp_path, a, b


def _consumer(path: Path, dep_dir: Path, *link: str) -> Path:
    return cc(path, 'extern const char *which(void);\nconst char *via(void){return which();}\n',
              f"-L{dep_dir}", "-l:libdup.so.1", *link)


def test_runpath_origin_expanded(dup_dirs):
    root, a, _b = dup_dirs
    cons = _consumer(root / "app/lib/libapp.so", root / "A",
                     "-Wl,--enable-new-dtags,-rpath,${ORIGIN}/../../A")
    info = read_elf(LiveHost(), str(cons))
    assert info.runpath == ["${ORIGIN}/../../A"]
    res = Resolver(LiveHost(), environ={}).tree(str(cons))[0].resolutions["libdup.so.1"]
    assert res.path == str(root / "A/libdup.so.1") and res.via == "runpath"
    assert dlopen(cons, call="via").stdout.strip() == "A"


def test_rpath_beats_ld_library_path_but_runpath_does_not(dup_dirs):
    root, _a, _b = dup_dirs
    env = {"LD_LIBRARY_PATH": str(root / "B")}
    rp = _consumer(root / "c1/librp.so", root / "A", "-Wl,--disable-new-dtags,-rpath," + str(root / "A"))
    run = _consumer(root / "c2/librun.so", root / "A", "-Wl,--enable-new-dtags,-rpath," + str(root / "A"))
    assert read_elf(LiveHost(), str(rp)).rpath == [str(root / "A")]
    assert read_elf(LiveHost(), str(run)).runpath == [str(root / "A")]
    r = Resolver(LiveHost(), environ=env)
    got_rp = r.tree(str(rp))[0].resolutions["libdup.so.1"]
    got_run = r.tree(str(run))[0].resolutions["libdup.so.1"]
    assert (got_rp.via, got_rp.path) == ("rpath", str(root / "A/libdup.so.1"))
    assert (got_run.via, got_run.path) == ("ld_library_path", str(root / "B/libdup.so.1"))
    assert dlopen(rp, env, call="via").stdout.strip() == "A"
    assert dlopen(run, env, call="via").stdout.strip() == "B"


def test_rpath_is_inherited_runpath_is_not(dup_dirs):
    """A's DT_RPATH serves the libraries it loads; a DT_RUNPATH only serves its own needs."""
    root, _a, _b = dup_dirs
    _consumer(root / "A/libmid.so", root / "A")  # no path of its own; needs libdup.so.1
    link = [f"-L{root / 'A'}", "-l:libmid.so"]
    src = "extern const char *via(void);\nconst char *top(void){return via();}\n"
    top_rp = cc(root / "t1/libtop.so", src, *link, "-Wl,--disable-new-dtags,-rpath," + str(root / "A"))
    top_run = cc(root / "t2/libtop.so", src, *link, "-Wl,--enable-new-dtags,-rpath," + str(root / "A"))
    r = Resolver(LiveHost(), environ={})
    n_rp = {n.path: n for n in r.tree(str(top_rp))}
    assert n_rp[str(root / "A/libmid.so")].resolutions["libdup.so.1"].via == "rpath"
    assert all(not n.missing for n in n_rp.values())
    n_run = {n.path: n for n in r.tree(str(top_run))}
    assert n_run[str(root / "A/libmid.so")].missing == ["libdup.so.1"]
    assert dlopen(top_rp, call="top").stdout.strip() == "A"
    assert "libdup.so.1: cannot open shared object file" in dlopen(top_run).stderr


@pytest.mark.skipif(not X86_64, reason="needs an x86-64 host for gcc -m32")
def test_wrong_class_candidate_earlier_on_the_path_is_skipped(dup_dirs):
    root, _a, _b = dup_dirs
    w = root / "W"
    w.mkdir()
    try:
        cc(w / "libdup.so.1", 'const char *which(void){return "W";}\n', "-m32", "-nostdlib",
           "-Wl,-soname,libdup.so.1")
    except subprocess.CalledProcessError:
        pytest.skip("gcc cannot build 32-bit objects here")
    assert read_elf(LiveHost(), str(w / "libdup.so.1")).elf_class == 32
    cons = _consumer(root / "c/libc32.so", root / "A",
                     f"-Wl,--enable-new-dtags,-rpath,{w}:{root / 'A'}")
    res = Resolver(LiveHost(), environ={}).tree(str(cons))[0].resolutions["libdup.so.1"]
    assert res.path == str(root / "A/libdup.so.1")
    assert res.skipped and "ELF32 i686" in res.skipped[0] and str(w) in res.skipped[0]
    assert dlopen(cons, call="via").stdout.strip() == "A"


# -- loader cache ----------------------------------------------------------------------------
def _ldconfig_p(cache: str = None) -> str:
    argv = ["ldconfig", "-p"] + (["-C", cache] if cache else [])
    exe = shutil.which("ldconfig") or "/sbin/ldconfig"
    return subprocess.run([exe] + argv[1:], capture_output=True, text=True).stdout


@pytest.mark.skipif(not os.path.exists("/etc/ld.so.cache"), reason="no /etc/ld.so.cache")
def test_ld_so_cache_matches_ldconfig_p():
    entries = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes())
    text = _ldconfig_p()
    if not text:
        pytest.skip("ldconfig not available")
    listed = parse_ldconfig_p(text)
    assert [(e.name, e.path) for e in entries] == [(e.name, e.path) for e in listed]
    assert [e.flags for e in entries] == [e.flags for e in listed]


@pytest.mark.parametrize("fmt", ["old", "compat", "new"])
def test_ld_so_cache_formats_written_by_ldconfig(tmp_path, fmt):
    """ldconfig -c old|compat|new writes ld.so-1.7.0, old+new, and glibc-ld.so.cache1.1."""
    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    libdir = next((d for d in ("/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/lib")
                   if os.path.exists(os.path.join(d, "libc.so.6"))), None)
    if exe is None or libdir is None:
        pytest.skip("ldconfig or libc not found")
    conf, cache = tmp_path / "ld.conf", tmp_path / "ld.so.cache"
    conf.write_text(libdir + "\n")
    r = subprocess.run([exe, "-c", fmt, "-C", str(cache), "-f", str(conf)], capture_output=True, text=True)
    if r.returncode != 0 or not cache.exists():
        pytest.skip(f"ldconfig -c {fmt} not supported here: {r.stderr.strip()[:100]}")
    data = cache.read_bytes()
    assert data.startswith(b"ld.so-1.7.0" if fmt in ("old", "compat") else b"glibc-ld.so.cache1.1")
    entries = parse_ld_so_cache(data)
    listed = parse_ldconfig_p(_ldconfig_p(str(cache)))
    assert {(e.name, e.path) for e in entries} == {(e.name, e.path) for e in listed}
    assert any(e.name == "libc.so.6" and e.path == f"{libdir}/libc.so.6" for e in entries)


def test_bad_cache_is_a_value_error():
    with pytest.raises(ValueError):
        parse_ld_so_cache(b"garbage" * 10)
    with pytest.raises(ValueError):
        parse_ld_so_cache(b"glibc-ld.so.cache1.1" + b"\xff" * 40)
    with pytest.raises(ValueError):
        parse_ld_so_cache(b"ld.so-1.7.0\x00\x05")
    if os.path.exists("/etc/ld.so.cache"):
        data = Path("/etc/ld.so.cache").read_bytes()
        for n in range(0, len(data), max(1, len(data) // 97)):
            try:
                parse_ld_so_cache(data[:n])
            except ValueError:
                pass


def test_ldconfig_p_text_of_other_architectures():
    # aarch64 lines as Ubuntu 24.04 prints them (`docker run ubuntu:24.04 ldconfig -p` on arm64);
    # hwcap and OS ABI forms from glibc elf/cache.c print_entry.
    text = ("82 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibzstd.so.1 (libc6,AArch64) => /lib/aarch64-linux-gnu/libzstd.so.1\n"
            "\tlibc.so.6 (libc6,AArch64, OS ABI: Linux 3.7.0) => /lib/aarch64-linux-gnu/libc.so.6\n"
            "\tlibfoo.so.1 (libc6,x86-64, hwcap: \"x86-64-v3\") => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libfoo.so.1\n"
            "\tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6\n"
            "\tlibc.so.6 (libc6,hard-float) => /lib/arm-linux-gnueabihf/libc.so.6\n"
            "Cache generated by: ldconfig (Ubuntu GLIBC 2.39-0ubuntu8) stable release version 2.39\n")
    entries = parse_ldconfig_p(text)
    assert [e.name for e in entries] == ["libzstd.so.1", "libc.so.6", "libfoo.so.1", "libc.so.6", "libc.so.6"]
    assert entries[1].accepts(64, "EM_AARCH64") and not entries[1].accepts(64, "EM_X86_64")
    assert entries[2].hwcap and entries[2].accepts(64, "EM_X86_64")
    assert entries[3].accepts(32, "EM_386") and not entries[3].accepts(64, "EM_X86_64")
    assert entries[4].accepts(32, "EM_ARM") and not entries[4].accepts(64, "EM_AARCH64")


# -- through a snapshot ----------------------------------------------------------------------
@needs_gcc
def test_snapshot_resolution_uses_captured_ldconfig_p(built, tmp_path):
    """fs/ holds the SDK library only; `ldconfig -p` says where the system libraries are.
    Requirements on those are `unverified` (for the libc.version fallback), not missing."""
    fs = tmp_path / "fs/opt/sdk"
    fs.mkdir(parents=True)
    shutil.copy(built["cons"], fs / "libcons.so")
    (tmp_path / "commands.toml").write_text(
        "[[command]]\nargv = [\"ldconfig\", \"-p\"]\nreturncode = 0\nstdout = '''"
        "3 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibvprov.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libvprov.so.1\n"
        "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
        "\tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6\n'''\n")
    host = SnapshotHost(str(tmp_path))
    r = Resolver(host)
    assert r.cache_source == "$ ldconfig -p"
    nodes = r.tree("/opt/sdk/libcons.so")
    node = nodes[0]
    assert node.missing == [] and node.unsatisfied == []
    # the $ORIGIN/../prov RUNPATH is tried inside the snapshot, then the captured cache
    res = node.resolutions["libvprov.so.1"]
    assert res.path == "/usr/lib/x86_64-linux-gnu/libvprov.so.1" and not res.captured
    assert "RUNPATH /opt/prov" in res.tried
    assert {(u["version"], u["library"]) for u in node.unverified} >= {
        ("GLIBC_2.99", "libvprov.so.1"), ("GLIBC_2.17", "libvprov.so.1")}
    # without any loader cache in the snapshot a miss is unknown, not missing
    (tmp_path / "commands.toml").write_text("")
    node = Resolver(SnapshotHost(str(tmp_path))).tree("/opt/sdk/libcons.so")[0]
    assert node.missing == [] and set(node.unknown) >= {"libvprov.so.1", "libc.so.6"}


@needs_gcc
def test_corrupt_files_give_elf_errors_not_tracebacks(built, tmp_path):
    """Truncations and flipped bytes of a real library: read_elf succeeds or raises
    NotElf/ElfError, and the resolver treats the file as unusable."""
    import random
    data = built["cons"].read_bytes()
    rng = random.Random(1234)
    p = tmp_path / "libbad.so"
    outcomes = {"ok": 0, "error": 0}
    for i in range(150):
        buf = bytearray(data)
        if i % 3 == 0:
            buf = buf[:rng.randrange(0, len(buf))]
        else:
            for _ in range(rng.randrange(1, 40)):
                j = rng.randrange(0, min(len(buf), 4096) if i % 2 else len(buf))
                buf[j] = rng.randrange(256)
        p.write_bytes(bytes(buf))
        elfmod.clear_cache()
        try:
            read_elf(LiveHost(), str(p))
            outcomes["ok"] += 1
        except (NotElf, ElfError):
            outcomes["error"] += 1
        Resolver(LiveHost(), environ={}, cache_entries=[]).elf(str(p))  # never raises
    assert outcomes["error"] > 0 and outcomes["ok"] > 0


def _elf_hash(name: bytes) -> int:
    """The SysV ELF hash ld.so compares in vna_hash (gABI, "Hash Table")."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


@needs_gcc
@pytest.mark.skipif(not X86_64, reason="patches an x86-64 build")
def test_newer_glibc_than_the_system_one_against_the_real_libc(tmp_path):
    """A library whose libc.so.6 requirement says GLIBC_9.9.9 (the string and vna_hash of its
    GLIBC_2.2.5 need patched, as a binary built on a far newer distribution would carry):
    unsatisfied against this machine's real libc.so.6, exactly as ld.so refuses it."""
    from elftools.elf.elffile import ELFFile
    lib = cc(tmp_path / "libnewer.so", "#include <unistd.h>\nint f(void){return (int)getpid();}\n")
    old, new = b"GLIBC_2.2.5", b"GLIBC_9.9.9"
    data = bytearray(lib.read_bytes())
    with open(lib, "rb") as fh:
        elf = ELFFile(fh)
        vr = elf.get_section_by_name(".gnu.version_r")
        dynstr = elf.get_section_by_name(".dynstr")
        vn_pos, str_off = vr["sh_offset"], dynstr["sh_offset"]
        patched = False
        for verneed, auxes in vr.iter_versions():
            aux_pos = vn_pos + verneed.entry["vn_aux"]
            for aux in auxes:
                if aux.name == old.decode() and verneed.name == "libc.so.6":
                    name_at = str_off + aux.entry["vna_name"]
                    assert bytes(data[name_at:name_at + len(old)]) == old
                    data[name_at:name_at + len(new)] = new
                    struct.pack_into("<I", data, aux_pos, _elf_hash(new))
                    patched = True
                aux_pos += aux.entry["vna_next"]
            vn_pos += verneed.entry["vn_next"]
    if not patched:
        pytest.skip("the toolchain did not emit a GLIBC_2.2.5 need to patch")
    lib.write_bytes(bytes(data))
    node = Resolver(LiveHost(), environ={}).tree(str(lib))[0]
    bad = [u for u in node.unsatisfied if u["version"] == "GLIBC_9.9.9"]
    assert len(bad) == 1 and bad[0]["library"] == "libc.so.6" and bad[0]["basis"] == "version_d"
    libc = read_elf(LiveHost(), bad[0]["provider"])
    assert libc.soname == "libc.so.6" and bad[0]["provided_max"] == newest_of_family(libc.version_defs, "GLIBC_0")
    real = dlopen(lib)
    assert real.returncode != 0 and "version `GLIBC_9.9.9' not found" in real.stderr


@needs_gcc
def test_parse_results_are_kept_across_runs_and_dropped_when_the_file_changes(built, tmp_path):
    lib = tmp_path / "libkeep.so"
    shutil.copy(built["cons"], lib)
    env = dict(os.environ, NPU_DOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NPU_DOCTOR_NO_CACHE", None)
    code = ("import sys; from npu_doctor.linker import elf; from npu_doctor.host import LiveHost\n"
            "info = elf.read_elf(LiveHost(), sys.argv[1]); elf.save_cache()\n"
            "print(elf.STATS['parsed'], info.soname, ','.join(info.needed))")
    def run():
        return subprocess.run([sys.executable, "-c", code, str(lib)], env=env, capture_output=True,
                              text=True, check=True).stdout.split()

    first = run()
    assert first[0] == "1" and (tmp_path / "cache" / "elf-cache.json").is_file()
    second = run()
    assert second == ["0"] + first[1:]           # answered from the cache, same facts
    time.sleep(0.01)
    shutil.copy(built["prov"], lib)              # new content: parsed again
    third = run()
    assert third[0] == "1" and third[1] != first[1]
    (tmp_path / "cache" / "elf-cache.json").write_text("{broken")
    assert run()[0] == "1"                       # a broken cache is ignored, not fatal


def test_elf_errors_are_typed_under_the_package_base_error(tmp_path):
    from npu_doctor.errors import NpuDoctorError

    stub = tmp_path / "libc.so"
    stub.write_text("/* GNU ld script */\nGROUP ( /lib/libc.so.6 )\n")
    with pytest.raises(NotElf) as e:
        read_elf(LiveHost(), str(stub))
    assert isinstance(e.value, ElfError) and isinstance(e.value, NpuDoctorError)
    assert str(stub) in str(e.value)
