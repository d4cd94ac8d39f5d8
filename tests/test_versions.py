"""The one version normaliser: per vendor format, ordering and range lists.

Version strings are verbatim from vendor files and tools (../shared/research/matrices.md §9
lists where each one was seen).
"""

from __future__ import annotations

import pytest

from npu_doctor import versions
from npu_doctor.versions import compare, display, in_range_list, normalize, prefix_match, split_build


def ordered(*vs: str) -> None:
    for a, b in zip(vs, vs[1:]):
        assert compare(a, b) == -1, f"{a} should sort before {b}"
        assert compare(b, a) == 1, f"{b} should sort after {a}"


def test_ascend_driver_rc_and_hotfix_order():
    ordered("23.0.rc3", "24.1.rc1", "24.1.rc1.1", "24.1.rc2", "24.1.rc2.2", "24.1.rc3",
            "24.1.0", "24.1.0.1", "25.0.rc1")
    # docs print RC upper-case, files lower-case: the same version
    assert compare("24.1.RC1", "24.1.rc1") == 0
    # a build number (b020) does not move the release
    assert compare("23.0.rc2.b020", "23.0.rc2") == 0


def test_cann_t_builds_alpha_beta_rc():
    ordered("8.0.T6", "8.0.T63", "8.0.RC1.alpha001", "8.0.RC1.beta1", "8.0.RC1",
            "8.0.RC2.alpha003", "8.0.RC2", "8.0.0", "8.0.1", "8.1.T6", "8.1.RC1")
    assert display("8.0.RC2.alpha003") == "8.0.RC2.alpha003"


def test_semver_beta_and_pep440_tags():
    ordered("9.2.0-beta.1", "9.2.0-beta.2", "9.2.0", "9.2.1")
    ordered("2.0.0b0", "2.0.0")
    ordered("1.32.1-rc1", "1.32.1")
    ordered("2024.2.0.dev20240513", "2024.2.0")
    assert compare("v0.9.8", "0.9.8") == 0


def test_ascend_inner_version_vrc():
    assert normalize("V100R001C21SPC002B220") is not None
    ordered("V100R001C13", "V100R001C17B214", "V100R001C21", "V100R001C21SPC001",
            "V100R001C21SPC002B220", "V100R001C30")


@pytest.mark.parametrize("version,text,want", [
    ("7.3.0", "[7.0.0,7.5.99]", True),
    ("7.0.0", "[7.0.0,7.5.99]", True),
    ("7.5.99", "[7.0.0,7.5.99]", True),
    ("7.6.0", "[7.0.0,7.5.99]", False),
    ("6.9.9", "[7.0.0,7.5.99]", False),
    ("7.0.RC1", "[7.0.0,7.5.99]", False),  # an RC is before 7.0.0
    ("6.4.5", "[6.4.0,6.4.99],[7.0.0,8.9.9]", True),
    ("8.0.0", "[6.4.0,6.4.99],[7.0.0,8.9.9]", True),
    ("6.5.0", "[6.4.0,6.4.99],[7.0.0,8.9.9]", False),
    # a trailing-dot upper bound is a prefix: every 24.1.* release, pre-releases included
    ("24.1.rc2.2", "[24.1,24.1.]", True),
    ("24.1.0", "[24.1,24.1.]", True),
    ("24.1.rc1", "[24.1,24.1.]", True),
    ("24.10.0", "[24.1,24.1.]", False),
    ("24.2.rc1", "[24.1,24.1.]", False),
    ("23.0.rc3", "[24.1,24.1.]", False),
    ("V100R001C15SPC001B100", "[V100R001C13,V100R001C19],[V100R001C30]", True),
    ("V100R001C19SPC002", "[V100R001C13,V100R001C19],[V100R001C30]", True),
    ("V100R001C30SPC100B010", "[V100R001C13,V100R001C19],[V100R001C30]", True),
    ("V100R001C21", "[V100R001C13,V100R001C19],[V100R001C30]", False),
])
def test_in_range_list(version, text, want):
    assert in_range_list(version, text) is want


def test_in_range_list_unreadable_is_unknown():
    assert in_range_list("7.0.0", "7.0.0-7.5.99") is None
    assert in_range_list("7.0.0", "[7.0.0,7.5.99] junk") is None
    assert in_range_list("not-a-version", "[7.0.0,7.5.99]") is None
    assert in_range_list(None, "[7.0.0,7.5.99]") is None


def test_build_hash_and_date_are_split_off():
    assert split_build("1.6.0 (9a7b5d24c@2023-12-13T17:31:11)") == ("1.6.0", "9a7b5d24c@2023-12-13T17:31:11")
    assert display("1.6.0 (9a7b5d24c@2023-12-13T17:31:11)") == "1.6.0"
    assert compare("1.6.0 (9a7b5d24c@2023-12-13T17:31:11)", "1.6.0") == 0
    ordered("1.5.2", "1.6.0 (9a7b5d24c@2023-12-13T17:31:11)", "2.0.0b0 (35a6907d79@2024-03-24T10:31:14)",
            "2.3.2 (429f97ae6b@2025-04-09T09:09:27)")
    assert split_build("4.23.0") == ("4.23.0", None)


def test_l4t_release_line():
    line = "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023"
    assert display(line) == "35.4.1"
    assert display("# R32 (release), REVISION: 1.0, GCID: 14531094, BOARD: t186ref") == "32.1.0"
    assert compare(line, "35.4.1") == 0
    ordered("32.1.0", "32.7.1", "35.2.1", "35.4.1", "36.4.3")
    # dpkg nvidia-l4t-core version carries a build date
    assert compare("36.4.3-20250107174145", "36.4.3") == 1
    assert prefix_match("36.4.3-20250107174145", "36.4.3")
    assert compare("32.5", "32.5.0") == 0


def test_nvidia_driver_numeric_per_component():
    # the minor is not a decimal fraction: 124 > 26
    ordered("570.26", "570.124.06", "575.51.03")
    ordered("450.51.05", "450.51.06", "455.23")
    assert compare("535.104.05", "535.104.5") == 0
    assert versions.major_minor("570.124.06") == "570.124"


def test_cuda_version_forms():
    assert display("12.4 Update 1") == "12.4.1"
    ordered("12.4", "12.4 Update 1", "12.4.2")
    ordered("11.0.1 RC", "11.0.1")
    assert compare("V12.9.86", "12.9.86") == 0
    assert versions.major_minor("12.4.1") == "12.4"


def test_jetpack_release_words():
    ordered("5.0 PRE-DP", "5.0 DP", "5.0.1 DP", "5.0.2 GA", "5.1")
    ordered("6.0 DP", "6.0 EA", "6.0", "6.1", "6.1 (rev1)", "6.2")
    assert compare("5.0.2 GA", "5.0.2") == 0


def test_edgetpu_compiler_schemes():
    # 2.x.<changelist> came before 14.1: numeric order is release order ...
    ordered("2.0.267685300", "2.1.302470888", "14.1.317412892", "15.0.340273435", "16.0.384591198")
    # ... and the changelist (third field) grows across both schemes
    cls = [int(v.split(".")[2]) for v in ("2.1.302470888", "14.1.317412892", "16.0.384591198")]
    assert cls == sorted(cls)
    # the runtime version is a different number: compiler 2.1 is not "older than runtime 14"
    # in any meaningful sense; only compiler-vs-compiler orderings are asserted


def test_driver_build_date_suffix():
    ordered("2.18.0", "2.19.0", "2.19.0_20250101", "2.19.0_20250330", "2.20.0")
    assert display("2.19.0_20250330") == "2.19.0_20250330"


def test_prefix_match_is_per_component():
    assert prefix_match("24.1.rc2.2", "24.1")
    assert prefix_match("24.1.RC2", "24.1.rc2")
    assert not prefix_match("24.10.0", "24.1")
    assert not prefix_match(None, "24.1")


@pytest.mark.parametrize("junk", ["", "   ", "unknown", "N/A", "abc.def"])
def test_unreadable_is_none_never_raises(junk):
    assert normalize(junk) is None
    assert compare(junk, "1.0") is None
