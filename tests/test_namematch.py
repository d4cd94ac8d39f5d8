"""Name patterns: the fast path (sets, startswith/endswith) gives fnmatch's answer exactly."""

from __future__ import annotations

import fnmatch
import itertools
import os
from pathlib import Path

import pytest

from npu_doctor.collectors.frameworks import RELEVANT_PACKAGES
from npu_doctor.namematch import NamePatterns, any_match, filter_names
from npu_doctor.parsers.dpkg import parse_dpkg_query, select
from npu_doctor.probes import load_specs
from npu_doctor.tomlcompat import tomllib

CASES = Path(os.environ.get("NPU_DOCTOR_CASES", Path(__file__).resolve().parents[2] / "shared" / "cases"))
DPKG_CASE = CASES / "c1-04-rknpu-driver-096-needs-098"


def _dpkg_names():
    if not (DPKG_CASE / "commands.toml").is_file():
        pytest.skip("shared cases not available")
    with open(DPKG_CASE / "commands.toml", "rb") as f:
        cmds = tomllib.load(f)["command"]
    out = next(c["stdout"] for c in cmds if c["argv"] == ["dpkg-query", "-W"])
    return parse_dpkg_query(out)


def _shipped_patterns():
    pats = set(RELEVANT_PACKAGES)
    for spec in load_specs():
        for key in ("keep", "match", "python_distributions"):
            v = spec.args.get(key)
            if isinstance(v, list):
                pats.update(x for x in v if isinstance(x, str))
    return sorted(pats)


def test_select_equals_fnmatch_on_a_real_package_list():
    pkgs = _dpkg_names()
    pats = _shipped_patterns() + ["lib?ze*", "rockchip-[mn]pu*", "*-dkms", "nvidia-*-server", "*"]
    want = [n for n in sorted(pkgs) if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    assert [d["name"] for d in select(pkgs, pats)] == want
    assert len(want) == len(pkgs)  # "*" keeps all: the list is not trivially empty


@pytest.mark.parametrize("pattern", ["libcuda.so*", "*.so", "lib*.so.1", "nvidia-*", "exact-name",
                                     "a*b*c", "lib?.so", "[!.]*", "x[", "*", "**", "libze_*.so*",
                                     "*b*", "a**c", "*.so.*", "lib*so*1"])
def test_each_pattern_shape_agrees_with_fnmatch(pattern):
    names = ["libcuda.so", "libcuda.so.1", "a.so", ".so", "libx.so.1", "lib.so.1", "nvidia-smi",
             "nvidia-", "exact-name", "exact-name2", "abc", "aXbYc", "ac", "lib1.so", "x[", "",
             ".hidden", "b"]
    names += ["libze_loader.so.1", "libze_.so", "libze_loader.so", "abcabc", "aabbcc", "so.so.so"]
    m = NamePatterns([pattern])
    for n in names:
        assert m.match(n) == fnmatch.fnmatchcase(n, pattern), (pattern, n)
    assert filter_names(names, pattern) == fnmatch.filter(names, pattern)


def test_any_match_over_combinations():
    pats = ["torch-*", "*-dkms", "lib*.so", "onnxruntime"]
    names = ["torch-npu", "torch", "amdxdna-dkms", "libze.so", "lib.so", "onnxruntime", "onnxruntime-gpu"]
    for k in range(len(pats) + 1):
        for combo in itertools.combinations(pats, k):
            for n in names:
                assert any_match(n, combo) == any(fnmatch.fnmatchcase(n, p) for p in combo)


def test_host_glob_equals_stdlib_glob(tmp_path):
    import glob as stdglob

    from npu_doctor.host import LiveHost

    for d in ("class/devfreq/fdab0000.npu", "class/devfreq/dmc", "class/accel/accel0", "lib/x"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("lib/x/libcuda.so.1", "lib/x/libcuda.so", "lib/x/libze_loader.so.1.2", "lib/x/.hidden.so"):
        (tmp_path / f).write_text("")
    host = LiveHost()
    for pattern in ("class/*", "class/devfreq/*npu*", "class/*/*", "lib/x/libcuda.so*", "lib/x/*.so",
                    "lib/x/lib?e*", "lib/x/[lm]*", "class/accel/accel[0-9]", "lib/x/libze_*.so*",
                    "lib/x/*.so.*"):
        full = str(tmp_path / pattern)
        assert host.glob(full) == sorted(stdglob.glob(full)), pattern


def test_star_patterns_agree_with_fnmatch_on_every_small_case():
    # every pattern of up to 5 characters over {a, b, *} against every name of up to 5 over {a, b}
    names = [""] + ["".join(p) for k in range(1, 6) for p in itertools.product("ab", repeat=k)]
    pats = ["".join(p) for k in range(1, 6) for p in itertools.product("ab*", repeat=k)]
    for pat in pats:
        assert filter_names(names, pat) == fnmatch.filter(names, pat), pat
        m = NamePatterns([pat])
        assert [n for n in names if m.match(n)] == [n for n in names if fnmatch.fnmatchcase(n, pat)], pat


@pytest.mark.parametrize("pattern", ["libcuda.so*", "lib*.so.1", "nvidia-*", "libze_*.so*", "a*b*c"])
def test_presorted_names_give_fnmatchs_answer(pattern):
    names = sorted(["libcuda.so", "libcuda.so.1", "libx.so.1", "lib.so.1", "nvidia-smi", "nvidia-",
                    "libze_loader.so.1", "libze_.so", "abc", "aXbYc", "ac", "b", "zz"])
    assert filter_names(names, pattern, presorted=True) == fnmatch.filter(names, pattern)


def test_each_caller_of_the_dpkg_parse_gets_its_own_dict():
    pkgs = _dpkg_names()
    pkgs["injected"] = "1.0"
    pkgs.pop(next(iter(sorted(pkgs))))
    again = _dpkg_names()
    assert "injected" not in again and len(again) == len(pkgs)
