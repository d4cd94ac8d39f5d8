"""Catalogs (catalogs/*.toml): every shipped file parses, every entry is sourced, raises a
contract rule id or is benign, and matches the example messages it carries."""

from __future__ import annotations

import re

import pytest

from npu_doctor.catalog import (literal_needles, load_catalog_file, load_catalogs,
                                 split_lines, strip_prefix)
from npu_doctor.errors import ConfigError
from npu_doctor.rules import load_rules

CATALOGS = load_catalogs()
RULE_IDS = {r.id for r in load_rules().rules}
ENTRIES = CATALOGS.entries()


def _eid(e):
    return f"{e.catalog}/{e.key}"


@pytest.mark.parametrize("entry", ENTRIES, ids=_eid)
def test_entry_is_sourced_and_raises_a_known_rule(entry):
    assert re.match(r"^https://", entry.source), entry.source
    assert entry.benign or entry.rule in RULE_IDS
    assert entry.examples, "every entry carries at least one example message"


@pytest.mark.parametrize("entry", ENTRIES, ids=_eid)
def test_entry_matches_its_examples(entry):
    for ex in entry.examples:
        assert CATALOGS.entry_matches(entry, ex) is not None, ex


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.pattern is not None], ids=_eid)
def test_prefilter_never_hides_an_example(entry):
    needles = literal_needles(entry.pattern.pattern, entry.pattern.flags)
    for ex in entry.examples:
        if needles:
            assert any(n in strip_prefix(ex).lower() for n in needles), (needles, ex)


def test_every_regex_has_a_prefilter_needle():
    # a pattern without a literal of four or more characters (e.g. `Jet[Pp]ack`) is tried on
    # every line of every log: one such entry took the 100 MB log benchmark from 31 to 4 MB/s
    always = [(m.catalog.id, m.entry.key if m.entry else "code pattern") for m in CATALOGS._always]
    assert always == []


def test_prefilter_needle_is_the_literal_that_singles_out_lines():
    """Of a pattern's literals the prefilter takes the one that lets fewest lines through: a
    common log word, or a piece of one ('evice' of `[Dd]evice`), counts less than its length
    (it had every line with 'device' tried against the regex: 10 % of the log benchmark)."""
    from npu_doctor.catalog.logtext import literal_needles

    assert literal_needles(r"[Dd]evice \d+ is (?:busy|locked)") == [" is busy", " is locked"]
    # a literal-only piece (alternation, `[Dd]`) joins the literals around it: one needle per
    # string it stands for
    assert literal_needles(r"ze\w+ \(h[Dd](?:evice|river)=0x0\)") == [" (hdevice=0x0)", " (hdriver=0x0)"]
    assert literal_needles(r"[Ff]ailed to \w+: (?:error|status)") == ["failed to "]
    assert literal_needles(r"[Dd]evice (?:\+xy|-zz)") == ["device +xy", "device -zz"]
    # a driver name is a needle with the space after it: `[HailoRT]` lines, in every line of a
    # HailoRT log, are not tried against a pattern of `hailo 0000:01:00.0: ` lines (the driver
    # line pattern of the kernel catalog cost a third of the catalog pass on such a log)
    assert literal_needles(r"^(?P<module>hailo|hailo1x|rknpu) (?P<device>[0-9a-f]{4}:[0-9a-f]{2}): ") == \
        ["hailo ", "hailo1x ", "rknpu "]
    # an optional piece stands for itself or nothing; of the needles of one set, one that
    # holds another adds nothing ('status: ' holds 'status:')
    assert literal_needles(r"[Ss]tatus ?[=:] ?(?P<code>\d+)") == ["status :", "status =", "status:", "status="]
    # a runtime's own tag is in nearly every line of its log: 'rknn_' counts as a common word
    assert literal_needles(r"rknn_\w+ ?(?:fail|error)\w* ret=(?P<code>-\d+)") == [" ret="]
    # with nothing better, a common word still serves; never a needle under four characters
    assert literal_needles(r"a(?:\+x|-z)\d+ [Dd]evice") == [" device"]


def test_catalog_ids_unique_and_counted():
    ids = [c.id for c in CATALOGS.catalogs]
    assert len(ids) == len(set(ids))
    assert len(ENTRIES) >= 40


@pytest.mark.parametrize("line,msg", [
    ("[    1.428669] hailo 0000:04:00.0: Firmware file", "hailo 0000:04:00.0: Firmware file"),
    ("Mar  4 10:00:00 board kernel: [    4.4] apex 0000:01:00.0: x", "apex 0000:01:00.0: x"),
    ("2024-03-04T10:00:00+0100 board kernel: NVRM: Xid (PCI:0000:3b:00): 79", "NVRM: Xid (PCI:0000:3b:00): 79"),
    ("[Mon Mar  4 10:00:00 2024] intel_vpu 0000:00:0b.0: x", "intel_vpu 0000:00:0b.0: x"),
    ("[   12.000000] host kernel: NVRM: GPU0 x", "NVRM: GPU0 x"),
    # journalctl/rsyslog print the locale's month (amd/xdna-driver#299: Dutch `nov`)
    ("nov 04 13:18:03 mat5-test kernel: amdxdna 0000:05:00.1: x", "amdxdna 0000:05:00.1: x"),
    ("déc. 4 10:00:00 board kernel: apex 0000:01:00.0: x", "apex 0000:01:00.0: x"),
    # dmesg -H / --reltime (gds-nvidia-fs#34) and dmesg --time-format iso
    ("[Jan18 08:23] nvidia_fs: module using GPL-only symbols", "nvidia_fs: module using GPL-only symbols"),
    ("[  +0.000031] nvidia_fs: Unknown symbol x (err -2)", "nvidia_fs: Unknown symbol x (err -2)"),
    ("2024-01-18T08:23:45,123456+01:00 hailo 0000:01:00.0: x", "hailo 0000:01:00.0: x"),
    ("[x] not a prefix", "[x] not a prefix"),
    ("Error 12 10:00:00 not a prefix: x", "Error 12 10:00:00 not a prefix: x"),
    ("plain message", "plain message"),
])
def test_strip_prefix_handles_each_log_wrapping(line, msg):
    assert strip_prefix(line) == msg


def test_rsyslog_escapes_and_wrapped_lines_are_split_and_joined():
    assert split_lines("a#012b#011c") == ["a", "b\tc"]
    joined = split_lines("NVRM: GPU0 f: GSP firmware image version mismatch:\ngot version 1.2, expected version 1.3")
    assert joined[0].endswith("mismatch: got version 1.2, expected version 1.3") and joined[1] == ""


KERNEL_LOG = """\
[    4.4] intel_vpu 0000:00:0b.0: Direct firmware load for intel/vpu/vpu_37xx_v1.bin failed with error -2
[    4.5] intel_vpu 0000:00:0b.0: [drm] Firmware: intel/vpu/vpu_37xx_v0.0.bin, version: 2025
[    5.0] i2c_designware i2c_designware.0: probe with driver i2c_designware failed with error -110
[    6.0] apex 0000:01:00.0: Couldn't initialize interrupts: -28
[    6.1] apex 0000:01:00.0: Couldn't initialize interrupts: -28
"""


def test_match_text_counts_repeats_clears_fallbacks_and_ignores_other_drivers():
    evs = CATALOGS.match_text(KERNEL_LOG, "dmesg", ("kernel",), "kernel")
    by_entry = {(e["catalog"], e["entry"]): e for e in evs}
    fw = by_entry[("kernel", "firmware-load-failed")]
    assert fw["benign"] is True and "rule" not in fw  # a fallback name loaded after it
    apex = by_entry[("coral-gasket", "interrupts-init-failed")]
    assert apex["count"] == 2 and apex["rule"] == "device-unhealthy" and apex["vendor"] == "coral"
    assert apex["errno_name"] == "ENOSPC" and "(2 times)" in apex["message"]
    assert not any(e.get("driver") == "i2c_designware" for e in evs)  # not an accelerator


def test_vendor_entry_hides_the_generic_class_on_the_same_line():
    hits = CATALOGS.match_line("apex 0000:01:00.0: Couldn't initialize interrupts: -28", ("kernel",))
    assert [e.catalog for e, _ in hits] == ["coral-gasket"]


def test_bus_line_about_a_device_counts_when_an_accelerator_driver_names_that_device():
    # the PCI core prints the link-bandwidth line as "pci <bdf>" before a driver binds; the
    # hailo line after it (same device) says whose it is; a NIC's line stays silent
    bw = ("pci 0000:{}: 2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x1 link at "
          "0000:00:00.0 (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)")
    alone = CATALOGS.match_text(bw.format("01:00.0"), "dmesg", ("kernel",), "kernel")
    assert not alone
    log = "\n".join([bw.format("01:00.0"), bw.format("02:00.0"),
                      "hailo 0000:01:00.0: Probing: Device enabled"])
    evs = CATALOGS.match_text(log, "dmesg", ("kernel",), "kernel")
    link = [e for e in evs if e.get("rule") == "pcie-link-degraded"]
    assert len(link) == 1 and link[0]["module"] == "hailo" and link[0]["device"] == "0000:01:00.0"
    assert link[0]["vendor"] == "hailo" and link[0]["line_no"] == 1
    assert [e["line_no"] for e in evs] == sorted(e["line_no"] for e in evs)
    # the old PM-core wording names no driver: the accelerator line before it does
    pm = "nvidia 0000:01:00.0: enabling device (0000 -> 0003)\nPM: Device 0000:01:00.0 failed to resume async: error -5"
    got = [e for e in CATALOGS.match_text(pm, "dmesg", ("kernel",), "kernel") if e.get("rule")]
    assert [(e["entry"], e["rule"], e["module"]) for e in got] == [("pm-device-resume-failed-old", "device-unresponsive", "nvidia")]


def test_pm_core_failure_lines_are_not_probe_failures():
    for line, rule in (("amdxdna 0000:66:00.1: PM: failed to suspend async: error -19", "power-transition-failed"),
                       ("nvidia 0000:05:00.0: PM: failed to quiesce async: error -5", "power-transition-failed"),
                       ("hailo 0000:01:00.0: PM: failed to resume async: error -110", "device-unresponsive")):
        assert [e.rule for e, _ in CATALOGS.match_line(line, ("kernel",)) if e.rule] == [rule]


def test_benign_pattern_entry_hides_its_catalogs_code_lookup_on_the_line():
    # intel/linux-npu-driver#149: UNINITIALIZED from a graph append after init is not an init failure
    run = "L0 pfnAppendGraphExecute result: ZE_RESULT_ERROR_UNINITIALIZED, code 0x78000001 - driver is not initialized . "
    hits = CATALOGS.match_line(run, ("runtime",))
    assert [(e.catalog, e.key, e.rule) for e, _ in hits] == [("level-zero", "uninitialized-after-init", None)]
    init = "L0 zeInit result: ZE_RESULT_ERROR_UNINITIALIZED, code 0x78000001 - driver is not initialized"
    assert [e.rule for e, _ in CATALOGS.match_line(init, ("runtime",))] == ["runtime-init-failed"]


def test_pattern_entry_around_a_code_beats_its_catalogs_plain_code_lookup():
    # PaddlePaddle/Paddle#72458: 507008 at aclInit is the runtime failing to read the SoC, not an
    # offline model built for another SoC (what the plain code lookup of 507008 says)
    line = "Call aclInit(nullptr) failed : 507008 at file /work/PaddleCustomDevice/backends/npu/runtime/runtime.cc line 403"
    assert [(e.key, e.rule) for e, _ in CATALOGS.match_line(line, ("runtime",)) if e.rule] == [
        ("acl-init-soc-version-failed", "runtime-init-failed")]
    other = "NPU function error: aclrtSynchronizeDevice, error code is 507008"
    assert [e.rule for e, _ in CATALOGS.match_line(other, ("runtime",)) if e.rule] == ["toolkit-runtime-mismatch"]


def test_facts_templates_convert_units():
    evs = CATALOGS.match_text("Please set max locked memory (ulimit -l) to 'unlimited' (current: 8192 kbytes)",
                              "run.log", ("runtime",), "runtime")
    assert evs[0]["facts"] == {"limits.memlock_bytes": 8388608}


@pytest.mark.parametrize("query,key", [
    ("apex 0000:01:00.0: Couldn't initialize interrupts: -28", "interrupts-init-failed"),
    ("[  1.0] hailo 0000:04:00.0: Firmware file not found (/lib/firmware/hailo/hailo8_fw.bin), please", "firmware-file-not-found"),
])
def test_lookup_a_pasted_line(query, key):
    assert key in [e.key for e, _ in CATALOGS.lookup(query)]


BAD = {
    "no-source": '[catalog]\nid = "x"\n[[entry]]\nkey = "a"\npattern = "a"\nmeaning = "m"\nrule = "device-busy"\n',
    "no-rule": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "a"\nmeaning = "m"\n',
    "both": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "a"\nmeaning = "m"\nrule = "device-busy"\nbenign = true\n',
    "bad-regex": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "(a"\nmeaning = "m"\nbenign = true\n',
    "dup": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "a"\nmeaning = "m"\nbenign = true\n'
           '[[entry]]\nkey = "a"\npattern = "b"\nmeaning = "m"\nbenign = true\n',
    "wrong-type": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "a"\nmeaning = 5\nbenign = true\n',
    "no-table": '[[entry]]\nkey = "a"\n',
    "by-device-not-generic": '[catalog]\nid = "x"\nsource = "https://x"\n[[entry]]\nkey = "a"\npattern = "(?P<device>abcd)"\nmeaning = "m"\nbenign = true\nby_device = true\n',
    "by-device-no-device-group": '[catalog]\nid = "x"\nsource = "https://x"\ngeneric = true\n[[entry]]\nkey = "a"\npattern = "abcd"\nmeaning = "m"\nbenign = true\nby_device = true\n',
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_catalog_is_one_config_error(tmp_path, name):
    p = tmp_path / f"{name}.toml"
    p.write_text(BAD[name])
    with pytest.raises(ConfigError) as exc:
        load_catalog_file(str(p))
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_explain_command_finds_codes_lines_and_fragments():
    from conftest import run_cli as run

    r = run("explain", "[ 1406.3] apex 0000:01:00.0: Couldn't initialize interrupts: -28")
    assert r.returncode == 0 and "device-unhealthy" in r.stdout and "ENOSPC" in r.stdout
    r = run("explain", "RKLLM_MODEL_TOO_OLD")
    assert r.returncode == 0 and "toolkit-runtime-mismatch" in r.stdout and "https://" in r.stdout
    r = run("explain", "no such thing at all 12345")
    assert r.returncode == 1 and "nothing in the catalogs" in r.stdout
    r = run("rules", "explain", "firmware-missing")
    assert "Catalog entries that raise it" in r.stdout and "HAILO_FW_NOT_FOUND" in r.stdout


def test_templates_take_the_first_alternative_and_convert_cuda_versions():
    from npu_doctor.catalog import fill, fill_value

    assert fill("{node|node2}", {"node2": "/dev/hailo0"}) == "/dev/hailo0"
    assert fill_value("{found:cudaver}", {"found": "11040"}) == "11.4"
    assert fill_value("{found:cudaver}", {"found": "12020"}) == "12.2"
    assert fill_value("{found:cudaver}", {"found": "7"}) is None


def test_app_log_lines_raise_their_rules_and_state_facts():
    log = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update\n"
           "PermissionError: [Errno 13] Permission denied: '/dev/accel/accel0'\n"
           "max locked memory           (kbytes, -l) 64\n")
    evs = CATALOGS.match_text(log, "app.log", ("kernel", "runtime"), "runtime")
    rules = {e.get("rule") for e in evs}
    assert {"runtime-driver-mismatch", "device-node-permission"} <= rules
    facts = {k: v for e in evs for k, v in (e.get("facts") or {}).items()}
    assert facts["drivers.nvidia.cuda_version"] == "11.4" and facts["limits.memlock_bytes"] == 65536


def test_explain_names_the_signature_when_no_catalog_entry_matches():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "npu_doctor", "explain",
                        "OSError: libedgetpu.so.1: cannot open shared object file: No such file or directory"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "shared-library-not-found" in r.stdout and "--log" in r.stdout


def test_mnemonic_prefix_finds_an_entry_by_its_short_name(tmp_path):
    p = tmp_path / "pre.toml"
    p.write_text('[catalog]\nid = "pre"\nsource = "https://x"\nmnemonic_prefix = "VND_"\n'
                 "code_patterns = ['said: (?P<mnemonic>ERR_[A-Z_]+)']\n"
                 '[[entry]]\ncode = 9\nmnemonic = "VND_ERR_GONE"\nmeaning = "m"\nrule = "device-busy"\n')
    cat = load_catalog_file(str(p))
    assert cat.by_mnemonic("ERR_GONE") is cat.by_mnemonic("VND_ERR_GONE") is not None
    assert cat.by_mnemonic("ERR_OTHER") is None
    assert [e.key for e, _ in CATALOGS.lookup("Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED")] == ["9"]


@pytest.mark.parametrize("line,code,rule", [
    # HCCL's plog errNo is 0x05000000 | HcclResult: the low byte is hex (0x0b = 11)
    ("[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.356 [adapter_hccp.cc:1621] [60570][Get][IfNum]"
     "errNo[0x000000000500000b] ra get if num fail. ret[128303], num[0]", "11", "runtime-init-failed"),
    ("[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.325 [hccl_comm.cc:115] [60570][HcclComm][Init]"
     "errNo[0x0000000005000013] hccl initialize failed", "19", "runtime-init-failed"),
    ("[ERROR] HCCL(1,python):2022-12-01-03:02:29.001.104 [hccl_comm.cc:100][HcclComm][Init]"
     "errNo[0x0000000005000009] hccl initialize failed", "9", None),
])
def test_hexcode_group_reads_hccl_errno(line, code, rule):
    hits = [(e, g) for e, g in CATALOGS.match_line(line, ("runtime",)) if e.catalog == "ascend-hccl"]
    assert [str(e.code) for e, _ in hits] == [code]
    assert hits[0][0].rule == rule


def test_code_pattern_needs_code_hexcode_or_mnemonic_group(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("[catalog]\nid = \"x\"\ntitle = \"x\"\nvendor = \"ascend\"\nscope = \"runtime\"\n"
                 "source = \"https://example.invalid\"\ncode_patterns = ['errNo 0x(?P<hexcode>[0-9a-f]{2})']\n"
                 "[[entry]]\ncode = 11\nmnemonic = \"X\"\nmeaning = \"m\"\nbenign = true\n"
                 "example = [\"errNo 0x0b\"]\n")
    cat = load_catalog_file(p)
    assert cat.id == "x"
    p.write_text(p.read_text().replace("(?P<hexcode>[0-9a-f]{2})", "[0-9a-f]{2}"))
    with pytest.raises(ConfigError):
        load_catalog_file(p)


def test_errno_name_kernel_internal_codes():
    # the kernel prints its internal codes in driver-core lines (include/linux/errno.h), e.g. the
    # qnap8528 report "probe with driver qnap8528 failed with error -524"
    from npu_doctor.catalog import errno_name
    assert errno_name("-22") == "EINVAL"
    assert errno_name("-517") == "EPROBE_DEFER"
    assert errno_name("-524") == "ENOTSUPP"
    assert errno_name("-512") == "ERESTARTSYS"
    assert errno_name("-520") == "520"
    assert errno_name("-ENOENT") == "-ENOENT"
