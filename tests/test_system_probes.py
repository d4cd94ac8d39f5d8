"""Core system probes (kernel, arch, libc, cpu, user, limits, kernel modules) and the
memlock-limit-low rule: on the real board cases, on this live host, on fixture snapshots built
from real files, and on bad input."""

from __future__ import annotations

import os
import platform
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from npu_doctor import registry
from npu_doctor.facts import Facts
from npu_doctor.host import LiveHost, SnapshotHost
from npu_doctor.parsers.proc import (
    cpu_busy_percent,
    elf_arch,
    parse_cpu_list,
    parse_cpuinfo,
    parse_ldd_version,
    parse_libc_banner,
    parse_limits,
    parse_loadavg,
    parse_modules,
)
from npu_doctor.probe_runner import _run_one
from npu_doctor.probes import CommandCache, ProbeSpec, load_signatures
from npu_doctor.rules import RuleSet, evaluate, load_rule_file

from conftest import REPO, case_path, check_json, copy_case, finding_ids, make_snapshot

registry.load_all()


def probe(host, collector, args=None, **options):
    """Run one collector as the engine does; returns its ProbeResult."""
    spec = ProbeSpec(id=collector, collector=collector, args=args or {})
    return _run_one(spec, host, CommandCache(host), options)


def write(snap: Path, path: str, text) -> None:
    make_snapshot(snap, files={path: text})


def add_command(snap: Path, argv, stdout="", stderr="", returncode=0) -> None:
    with open(snap / "commands.toml", "a") as f:
        f.write("\n[[command]]\nargv = [%s]\nreturncode = %d\nstdout = '''%s'''\nstderr = '''%s'''\n"
                % (", ".join('"%s"' % a for a in argv), returncode, stdout, stderr))


# -- kernel and arch ------------------------------------------------------------------------
def test_kernel_release_of_a_real_rock5b():
    res = probe(SnapshotHost(str(case_path("c1-04"))), "kernel")
    assert res.status == "ok"
    assert res.facts.get("kernel.release") == "6.1.43-20-rk2312"
    assert res.facts.source_of("kernel.release") == "/proc/sys/kernel/osrelease"


def test_kernel_and_arch_on_the_live_host():
    host = LiveHost()
    res = probe(host, "kernel")
    assert res.facts.get("kernel.release") == platform.release()
    assert probe(host, "arch").facts.get("arch") == platform.machine()


def test_kernel_release_from_uname_when_the_snapshot_has_no_proc(tmp_path):
    snap = tmp_path / "s"
    (snap / "fs").mkdir(parents=True)
    add_command(snap, ["uname", "-r"], "5.15.148-tegra\n")
    add_command(snap, ["uname", "-m"], "aarch64\n")
    host = SnapshotHost(str(snap))
    assert probe(host, "kernel").facts.get("kernel.release") == "5.15.148-tegra"
    res = probe(host, "arch")
    assert res.facts.get("arch") == "aarch64"
    assert res.facts.source_of("arch") == "$ uname -m"


def test_arch_from_the_elf_header_of_a_real_shell(tmp_path):
    snap = tmp_path / "s"
    write(snap, "/bin/sh", Path(os.path.realpath("/bin/sh")).read_bytes())
    res = probe(SnapshotHost(str(snap)), "arch")
    assert res.facts.get("arch") == platform.machine()
    assert "ELF header" in res.facts.source_of("arch")


def test_arch_from_proc_sys_kernel_arch(tmp_path):
    snap = tmp_path / "s"
    write(snap, "/proc/sys/kernel/arch", "aarch64\n")
    assert probe(SnapshotHost(str(snap)), "arch").facts.get("arch") == "aarch64"


def test_arch_unknown_is_absent_not_a_guess():
    # the RK3588 cases hold no uname, arch file or binary: arch must stay unknown
    res = probe(SnapshotHost(str(case_path("k01"))), "arch")
    assert res.status == "no_data"
    assert res.facts.get("arch") is None


def test_elf_arch_of_a_compiled_object(tmp_path):
    src = tmp_path / "a.c"
    src.write_text("int main(void){return 0;}\n")
    out = tmp_path / "a.out"
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    subprocess.run(["gcc", "-o", str(out), str(src)], check=True)
    assert elf_arch(out.read_bytes()[:64]) == platform.machine()
    assert elf_arch(b"#!/bin/sh\n" + b"\0" * 30) is None
    assert elf_arch(b"\x7fELF") is None


# -- libc -----------------------------------------------------------------------------------
def test_libc_on_the_live_host_matches_confstr():
    res = probe(LiveHost(), "libc")
    got = os.confstr("CS_GNU_LIBC_VERSION")
    if not got:
        pytest.skip("not a glibc host")
    name, version = got.split()
    assert res.facts.get("libc.name") == name
    assert res.facts.get("libc.version") == version
    build = res.facts.get("libc.build")
    if build and shutil.which("ldd"):  # the distribution build, as ldd prints it
        out = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout
        assert build in out.splitlines()[0]


def test_libc_from_the_banner_in_a_real_libc_so(tmp_path):
    libcs = [p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
                         "/lib64/libc.so.6", "/usr/lib/libc.so.6") if os.path.exists(p)]
    if not libcs or not os.confstr("CS_GNU_LIBC_VERSION"):
        pytest.skip("no glibc libc.so.6 here")
    snap = tmp_path / "s"
    write(snap, "/lib/x86_64-linux-gnu/libc.so.6", Path(libcs[0]).read_bytes())
    res = probe(SnapshotHost(str(snap)), "libc")
    assert res.facts.get("libc.name") == "glibc"
    assert res.facts.get("libc.version") == os.confstr("CS_GNU_LIBC_VERSION").split()[1]
    assert res.facts.source_of("libc.version") == "/lib/x86_64-linux-gnu/libc.so.6"


def test_libc_banner_kept_by_the_files_identity(tmp_path, monkeypatch):
    """A live check reads a libc.so.6 banner once; a changed file is read again."""
    from npu_doctor.collectors import libc as libc_collector

    libcs = [p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
                         "/lib64/libc.so.6", "/usr/lib/libc.so.6") if os.path.exists(p)]
    if not libcs or not os.confstr("CS_GNU_LIBC_VERSION"):
        pytest.skip("no glibc libc.so.6 here")
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    copy = tmp_path / "lib" / "libc.so.6"
    copy.parent.mkdir()
    shutil.copyfile(libcs[0], copy)
    monkeypatch.setattr(libc_collector, "LIBC_GLOBS", (str(copy),))
    first = probe(LiveHost(), "libc").facts.get("libc.build")
    assert first and (tmp_path / "cache" / "libc-banners.json").is_file()
    reads = []
    real = LiveHost.read_bytes

    def counting(self, path, *a, **k):
        reads.append(path)
        return real(self, path, *a, **k)
    monkeypatch.setattr(LiveHost, "read_bytes", counting)
    assert probe(LiveHost(), "libc").facts.get("libc.build") == first
    assert str(copy) not in reads
    # the same path, another build of the library: read again, its own banner
    data = copy.read_bytes()
    at = data.find(b"GNU C Library (") + len(b"GNU C Library (")
    end = data.find(b")", at)
    other = b"Test GLIBC " + os.confstr("CS_GNU_LIBC_VERSION").split()[1].encode() + b"-77"
    copy.write_bytes(data[:at] + other[:end - at].ljust(end - at, b"x") + data[end:])
    assert probe(LiveHost(), "libc").facts.get("libc.build") != first
    assert str(copy) in reads


def test_ldd_version_outputs_of_several_libcs():
    # this machine's Debian 12 `ldd --version` (first line)
    assert parse_ldd_version("ldd (Debian GLIBC 2.36-9+deb12u14) 2.36\nCopyright (C) 2022 Free Software Foundation, Inc.\n") == {
        "name": "glibc", "version": "2.36", "build": "2.36-9+deb12u14"}
    # glibc built from source: https://github.com/sgerrand/alpine-pkg-glibc/issues/46
    assert parse_ldd_version("ldd (GNU libc) 2.25\nCopyright (C) 2017 Free Software Foundation, Inc.\n") == {
        "name": "glibc", "version": "2.25"}
    # Ubuntu: https://github.com/ipfs/kubo/pull/3698
    assert parse_ldd_version("ldd (Ubuntu GLIBC 2.23-0ubuntu5) 2.23")["version"] == "2.23"
    # musl ldd prints its banner on stderr: https://github.com/sgerrand/alpine-pkg-glibc/issues/46
    assert parse_ldd_version("musl libc (x86_64)\nVersion 1.1.15\nDynamic Program Loader\n") == {
        "name": "musl", "version": "1.1.15"}
    # newer musl refuses --version: https://github.com/appsignal/appsignal-nodejs/issues/369
    assert parse_ldd_version("/lib/ld-musl-x86_64.so.1: cannot load --version: No such file or directory\n") == {
        "name": "musl"}
    with pytest.raises(ValueError):
        parse_ldd_version("command not found")


def test_libc_banner_of_old_and_new_glibc():
    # glibc 2.17 (CentOS 7) and 2.36 (Debian 12) banners as strings(1) shows them
    old = b"\0GNU C Library (GNU libc) stable release version 2.17, by Roland McGrath et al.\n\0"
    assert parse_libc_banner(old) == {"name": "glibc", "version": "2.17"}
    new = b"xx GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\n"
    assert parse_libc_banner(new) == {"name": "glibc", "version": "2.36", "build": "2.36-9+deb12u14"}
    assert parse_libc_banner(b"\x7fELF nothing here") is None


def test_libc_from_musl_ldd_in_a_snapshot(tmp_path):
    snap = tmp_path / "s"
    (snap / "fs").mkdir(parents=True)
    add_command(snap, ["ldd", "--version"], "", "musl libc (x86_64)\nVersion 1.1.22\nDynamic Program Loader\n", 1)
    res = probe(SnapshotHost(str(snap)), "libc")
    assert res.facts.get("libc.name") == "musl"
    assert res.facts.get("libc.version") == "1.1.22"


def test_libc_absent_in_a_snapshot_without_one():
    res = probe(SnapshotHost(str(case_path("c1-04"))), "libc")
    assert res.status == "no_data"
    assert res.facts.get("libc") is None


# -- cpu ------------------------------------------------------------------------------------
def test_cpu_count_and_load_of_the_busy_rk3588():
    res = probe(SnapshotHost(str(case_path("k04"))), "cpu")
    assert res.status == "ok"
    assert res.facts.get("cpu.count") == 8
    assert res.facts.get("cpu.loadavg") == [7.84, 7.62, 7.15]
    assert res.facts.get("cpu.load_percent") == 98.0
    assert res.facts.source_of("cpu.count") == "/sys/devices/system/cpu/online"


def test_cpu_load_of_the_idle_rk3588():
    res = probe(SnapshotHost(str(case_path("k05"))), "cpu")
    assert res.facts.get("cpu.load_percent") == pytest.approx(0.42 / 8 * 100, abs=0.1)


def test_cpu_on_the_live_host_never_sleeps_by_default():
    t0 = time.monotonic()
    res = probe(LiveHost(), "cpu")
    assert time.monotonic() - t0 < 0.5
    assert res.facts.get("cpu.busy_percent") is None
    assert res.facts.get("cpu.count") >= 1
    assert res.facts.get("cpu.load_percent") == pytest.approx(
        os.getloadavg()[0] / res.facts.get("cpu.count") * 100, abs=25)


def test_cpu_sample_on_the_live_host_measures_a_window():
    t0 = time.monotonic()
    res = probe(LiveHost(), "cpu", sample_s=0.3)
    assert time.monotonic() - t0 >= 0.3
    busy = res.facts.get("cpu.busy_percent")
    assert 0.0 <= busy <= 100.0
    assert res.facts.get("cpu.load_percent") == busy
    assert res.facts.get("cpu.load_source") == "proc-stat"


def test_cpu_busy_from_two_real_proc_stat_readings_in_a_snapshot(tmp_path):
    snap = copy_case("k04", tmp_path / "snap")
    first = Path("/proc/stat").read_text()
    x = 0
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # keep one CPU busy between the readings
        x += 1
    second = Path("/proc/stat").read_text()
    write(snap, "/proc/stat", first)
    write(snap, "/proc/stat.1", second)
    res = probe(SnapshotHost(str(snap)), "cpu")
    busy = res.facts.get("cpu.busy_percent")
    assert busy is not None and busy > 0
    assert res.facts.get("cpu.load_percent") == busy
    # only one reading: no window, the load average stands
    os.unlink(snap / "fs/proc/stat.1")
    res = probe(SnapshotHost(str(snap)), "cpu")
    assert res.facts.get("cpu.busy_percent") is None
    assert res.facts.get("cpu.load_percent") == 98.0


def test_cpu_stat_readings_out_of_order_are_a_probe_error(tmp_path):
    snap = copy_case("k04", tmp_path / "snap")
    text = Path("/proc/stat").read_text()
    write(snap, "/proc/stat", text)
    write(snap, "/proc/stat.1", text)  # the same reading twice: no time passed
    res = probe(SnapshotHost(str(snap)), "cpu")
    assert res.status == "error"
    assert "not later" in res.error


def test_garbage_loadavg_is_an_error_not_a_traceback(tmp_path):
    snap = copy_case("k04", tmp_path / "snap")
    write(snap, "/proc/loadavg", "\x00\xff garbage\n")
    res = probe(SnapshotHost(str(snap)), "cpu")
    assert res.status == "ok"  # count still known
    assert res.facts.get("cpu.count") == 8
    assert res.facts.get("cpu.load_percent") is None


def test_loadavg_and_cpu_list_parsers():
    assert parse_loadavg("7.84 7.62 7.15 9/310 4242\n") == {
        "loadavg": [7.84, 7.62, 7.15], "running": 9, "tasks": 310}
    with pytest.raises(ValueError):
        parse_loadavg("1.0 x 2")
    assert parse_cpu_list("0-7") == list(range(8))
    assert parse_cpu_list("0-3,5,7-8\n") == [0, 1, 2, 3, 5, 7, 8]
    with pytest.raises(ValueError):
        parse_cpu_list("3-1")


# /proc/cpuinfo of a Radxa Rock 5B (RK3588), first CPUs of each cluster:
# https://github.com/hrw/arm-socs-table/issues/18 (little cores 0xd05 then big cores 0xd0b)
RK3588_CPUINFO = "".join(
    f"processor\t: {i}\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n"
    f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: {'0x2' if i < 4 else '0x4'}\nCPU part\t: {'0xd05' if i < 4 else '0xd0b'}\nCPU revision\t: 0\n\n"
    for i in range(8))

# Raspberry Pi 3 on a 32-bit kernel: https://github.com/raspberrypi/documentation/issues/916
PI3_V7_CPUINFO = """processor       : 0
model name      : ARMv7 Processor rev 4 (v7l)
BogoMIPS        : 38.40
Features        : half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32
CPU implementer : 0x41
CPU architecture: 7
CPU variant     : 0x0
CPU part        : 0xd03
CPU revision    : 4

processor       : 1
model name      : ARMv7 Processor rev 4 (v7l)
BogoMIPS        : 38.40
Features        : half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32
CPU implementer : 0x41
CPU architecture: 7
CPU variant     : 0x0
CPU part        : 0xd03
CPU revision    : 4

Hardware        : BCM2835
Revision        : a52082
Serial          : 00000000
"""

# Snapdragon 845 (old arm64 kernel with a leading `Processor` line):
# https://github.com/hrw/arm-socs-table/issues/10 — Qualcomm Kryo parts are not in the table
SDM845_CPUINFO = """Processor\t: AArch64 Processor rev 12 (aarch64)
processor\t: 0
BogoMIPS\t: 38.40
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp
CPU implementer\t: 0x51
CPU architecture: 8
CPU variant\t: 0x7
CPU part\t: 0x803
CPU revision\t: 12

processor\t: 1
BogoMIPS\t: 38.40
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp
CPU implementer\t: 0x51
CPU architecture: 8
CPU variant\t: 0x7
CPU part\t: 0x803
CPU revision\t: 12
"""


def test_cpuinfo_of_arm_and_x86_layouts():
    assert parse_cpuinfo(RK3588_CPUINFO) == {"count": 8, "model": "4x Cortex-A55 + 4x Cortex-A76"}
    pi = parse_cpuinfo(PI3_V7_CPUINFO)
    assert pi == {"count": 2, "model": "2x Cortex-A53", "hardware": "BCM2835"}
    assert parse_cpuinfo(SDM845_CPUINFO) == {"count": 2, "model": "AArch64 Processor rev 12 (aarch64)"}
    live = Path("/proc/cpuinfo").read_text()
    got = parse_cpuinfo(live)
    assert got["count"] == live.count("\nprocessor") + live.startswith("processor")
    if platform.machine() == "x86_64":
        first_model = next(ln for ln in live.splitlines() if ln.startswith("model name")).split(":", 1)[1].strip()
        assert got["model"] == " ".join(first_model.split())
    with pytest.raises(ValueError):
        parse_cpuinfo("garbage without processors")


def test_cpu_count_from_cpuinfo_when_no_cpu_list(tmp_path):
    snap = tmp_path / "s"
    write(snap, "/proc/cpuinfo", RK3588_CPUINFO)
    write(snap, "/proc/loadavg", "4.00 3.00 2.00 1/100 5\n")
    res = probe(SnapshotHost(str(snap)), "cpu")
    assert res.facts.get("cpu.count") == 8
    assert res.facts.get("cpu.model") == "4x Cortex-A55 + 4x Cortex-A76"
    assert res.facts.get("cpu.load_percent") == 50.0


def test_proc_stat_busy_percent():
    a = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n"
    b = "cpu  150 0 150 900 0 0 0 0 0 0\n"
    assert cpu_busy_percent(a, b) == 50.0
    with pytest.raises(ValueError):
        cpu_busy_percent(b, a)
    with pytest.raises(ValueError):
        cpu_busy_percent("intr 1 2", b)


# -- user -----------------------------------------------------------------------------------
def test_user_of_the_intel_npu_case():
    res = probe(SnapshotHost(str(case_path("k06"))), "user")
    assert res.facts.get("user.uid") == 1000
    assert res.facts.get("user.name") == "user"
    assert res.facts.get("user.groups") == ["user", "adm", "sudo"]
    assert res.facts.get("user.group_ids") == [1000, 4, 27]
    assert "render" not in res.facts.get("user.groups")


def test_user_groups_resolved_from_etc_group_when_id_prints_numbers(tmp_path):
    snap = copy_case("k06", tmp_path / "snap")
    text = (snap / "commands.toml").read_text().replace(
        "uid=1000(user) gid=1000(user) groups=1000(user),4(adm),27(sudo)",
        "uid=1000 gid=1000 groups=1000,4,992,5000")
    (snap / "commands.toml").write_text(text)
    res = probe(SnapshotHost(str(snap)), "user")
    assert res.facts.get("user.group_ids") == [1000, 4, 992, 5000]
    assert res.facts.get("user.groups") == ["user", "adm", "render", "5000"]


def test_user_on_the_live_host():
    res = probe(LiveHost(), "user")
    assert res.facts.get("user.uid") == os.getuid()
    assert res.facts.get("user.gid") == os.getgid()
    assert os.getgid() in res.facts.get("user.group_ids")
    assert len(res.facts.get("user.groups")) == len(res.facts.get("user.group_ids"))


def test_garbage_id_output_is_a_probe_error(tmp_path):
    snap = copy_case("k06", tmp_path / "snap")
    text = (snap / "commands.toml").read_text().replace(
        "uid=1000(user) gid=1000(user) groups=1000(user),4(adm),27(sudo)", "id: cannot find name for user ID 1000")
    (snap / "commands.toml").write_text(text)
    res = probe(SnapshotHost(str(snap)), "user")
    assert res.status == "error"
    assert res.error.startswith("cannot tell the invoking user")
    assert res.facts.get("user") is None


def test_user_unknown_without_id_output():
    res = probe(SnapshotHost(str(case_path("k01"))), "user")
    assert res.status == "no_data"
    assert res.facts.get("user") is None


# -- limits ---------------------------------------------------------------------------------
def test_memlock_on_the_live_host_matches_getrlimit():
    res = probe(LiveHost(), "limits")
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY:
        assert res.facts.get("limits.memlock_unlimited") is True
        assert res.facts.get("limits.memlock_bytes") is None
    else:
        assert res.facts.get("limits.memlock_bytes") == soft


def test_memlock_from_a_real_limits_file_and_unlimited(tmp_path):
    real = Path("/proc/self/limits").read_text()
    snap = tmp_path / "s"
    write(snap, "/proc/self/limits", real)
    host = SnapshotHost(str(snap))
    row = parse_limits(real)["Max locked memory"]
    res = probe(host, "limits")
    if row["soft"] == "unlimited":
        assert res.facts.get("limits.memlock_unlimited") is True
    else:
        assert res.facts.get("limits.memlock_bytes") == row["soft"]
    lines = [ln for ln in real.splitlines() if ln.startswith("Max locked memory")]
    unlimited = real.replace(lines[0], "Max locked memory         unlimited            unlimited            bytes     ")
    write(snap, "/proc/self/limits", unlimited)
    res = probe(host, "limits")
    assert res.facts.get("limits.memlock_unlimited") is True
    assert res.facts.get("limits.memlock_bytes") is None


def test_garbage_limits_file_is_a_probe_error(tmp_path):
    snap = tmp_path / "s"
    write(snap, "/proc/self/limits", "garbage\n")
    res = probe(SnapshotHost(str(snap)), "limits")
    assert res.status == "error" and "Limit" in res.error
    # a directory where the file should be: unreadable, so unknown
    os.unlink(snap / "fs/proc/self/limits")
    (snap / "fs/proc/self/limits").mkdir()
    res = probe(SnapshotHost(str(snap)), "limits")
    assert res.status == "no_data"


def _memlock_rules():
    rules, _ = load_rule_file(str(REPO / "rules" / "system.toml"))
    return RuleSet([r for r in rules if r.id == "memlock-limit-low"])


def _facts(**tree) -> Facts:
    f = Facts()
    for k, v in tree.items():
        f.set(k.replace("__", "."), v)
    return f


def test_memlock_rule_needs_a_pinning_runtime_a_low_limit_and_a_normal_user():
    rs = _memlock_rules()
    xdna = [{"vendor": "amd-xdna", "name": "NPU Krackan"}]
    low = _facts(accelerators=xdna, limits__memlock_bytes=8 * 1024 * 1024, user__uid=1000)
    found = evaluate(rs, low, [])
    assert [f.id for f in found] == ["memlock-limit-low"]
    assert "8388608" in found[0].message
    assert {x["kind"] for x in found[0].fixes} == {"now", "persist", "doc"}
    assert not evaluate(rs, _facts(accelerators=xdna, limits__memlock_bytes=8 << 20, user__uid=0), [])
    assert not evaluate(rs, _facts(accelerators=xdna, limits__memlock_unlimited=True, user__uid=1000), [])
    assert not evaluate(rs, _facts(accelerators=xdna, limits__memlock_bytes=64 << 20, user__uid=1000), [])
    rk = [{"vendor": "rknpu", "name": "rknpu"}]
    assert not evaluate(rs, _facts(accelerators=rk, limits__memlock_bytes=8 << 20, user__uid=1000), [])


def test_memlock_from_the_xrt_failure_of_c2_08():
    host = SnapshotHost(str(case_path("c2-08")))
    sigs = load_signatures()
    res = probe(host, "command_signatures",
                {"commands": [["xrt-smi", "examine"]], "signatures": ["mmap-locked-eagain"]},
                signatures=sigs)
    events = res.facts.get("log_events")
    assert len(events) == 1
    assert events[0]["len_bytes"] == "67108864"
    assert events[0]["scope"] == "command"
    found = evaluate(_memlock_rules(), res.facts, [])
    assert [f.id for f in found] == ["memlock-limit-low"]
    assert found[0].severity == "error"
    assert "67108864" in found[0].message


def test_c2_08_reports_memlock_not_permissions():
    report = check_json(case_path("c2-08"))
    ids = finding_ids(report)
    assert "memlock-limit-low" in ids
    assert "device-node-permission" not in ids


# -- kernel modules -------------------------------------------------------------------------
# Real /proc/modules lines: the `tail /proc/modules` example after
# https://access.redhat.com/documentation/en-US/Red_Hat_Enterprise_Linux/4/html/Reference_Guide/s2-proc-modules.html
# (as quoted in a public Go parser), a mainline ib_core line from an OFED write-up, and an
# out-of-tree module tagged (OE) from a CTF write-up.
PROC_MODULES = """ttm 98304 1 cirrus, Live 0x0000000000000000
drm_kms_helper 155648 1 cirrus, Live 0x0000000000000000
psmouse 131072 0 - Live 0x0000000000000000
ib_core 401408 0 - Live 0x0000000000000000
kagent 12288 0 - Live 0x0000000000000000 (OE)
"""


def test_loaded_modules_and_versions(tmp_path):
    snap = tmp_path / "s"
    write(snap, "/proc/modules", PROC_MODULES)
    write(snap, "/sys/module/ib_core/version", "")  # empty: no version known
    write(snap, "/sys/module/hailo_pci/version", "4.23.0\n")  # built in: versioned, not in /proc/modules
    write(snap, "/sys/module/psmouse/parameters/proto", "auto\n")
    res = probe(SnapshotHost(str(snap)), "kernel_modules")
    d = res.facts.get("drivers")
    assert d["kagent"] == {"loaded": True}
    assert d["ttm"]["loaded"] is True
    assert d["hailo_pci"] == {"version": "4.23.0", "source": "/sys/module/hailo_pci/version"}
    assert "version" not in d["ib_core"]
    assert parse_modules(PROC_MODULES)[-1] == "kagent"
    with pytest.raises(ValueError):
        parse_modules("not a module table\n")


def test_modules_from_initstate_when_proc_modules_is_missing():
    res = probe(SnapshotHost(str(case_path("k06"))), "kernel_modules")
    assert res.facts.get("drivers.intel_vpu.loaded") is True


def test_modules_on_the_live_host_read_only_version_files():
    res = probe(LiveHost(), "kernel_modules")
    if res.status == "no_data":
        pytest.skip("no /proc/modules or /sys/module here")
    for name, rec in res.facts.get("drivers").items():
        if "version" in rec:
            assert Path(f"/sys/module/{name}/version").read_text().strip() == rec["version"]


# -- end to end -----------------------------------------------------------------------------
def test_c1_04_kernel_and_os_facts_end_to_end():
    facts = check_json(case_path("c1-04"))["facts"]
    assert facts["kernel"]["release"] == "6.1.43-20-rk2312"
    assert facts["os"]["id"] == "debian"
    assert "arch" not in facts and "libc" not in facts  # not in the snapshot: unknown


def test_live_check_reports_this_machine():
    import json

    from conftest import run_cli

    proc = run_cli("check", "--format", "json", "--fail-on", "never")
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)["facts"]
    assert facts["kernel"]["release"] == platform.release()
    assert facts["arch"] == platform.machine()
    assert facts["cpu"]["count"] >= 1
    assert facts["user"]["uid"] == os.getuid()
    libc = os.confstr("CS_GNU_LIBC_VERSION")
    if libc:
        assert facts["libc"]["version"] == libc.split()[1]
