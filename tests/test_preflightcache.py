"""The library preflight kept between live checks (npu_doctor.linker.preflightcache): reused
while every directory searched and every file read is unchanged, redone on any change.
Libraries are real ELF objects gcc builds here."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_doctor import check
from npu_doctor.host import open_host
from npu_doctor.linker import ldso

from test_libraries import GCC, cc, write_probe_override

pytestmark = pytest.mark.skipif(GCC is None, reason="gcc not installed")


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(d))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    return d


@pytest.fixture()
def sdk(tmp_path):
    """sdk/libsdk.so needs libdep.so.1, found through RUNPATH $ORIGIN/../dep."""
    cc(tmp_path / "dep/libdep.so.1", "int dep(void){return 1;}\n", "-Wl,-soname,libdep.so.1")
    cc(tmp_path / "sdk/libsdk.so", "extern int dep(void);\nint sdk(void){return dep();}\n",
       f"-L{tmp_path / 'dep'}", "-l:libdep.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../dep",
       "-Wl,-soname,libsdk.so")
    return tmp_path


def _libraries(sdk_dir: Path):
    probes = sdk_dir / "probes"
    if not probes.is_dir():  # once: the configuration is keyed by its files' identity
        write_probe_override(probes, [f"{sdk_dir}/sdk/*.so"])
    config = check.Config.load([str(probes)], [])
    spec = [s for s in config.specs if s.id == "libraries"]
    res = check.run_check(open_host(), config, select=["missing-shared-library"])
    assert spec
    facts = res.facts.to_dict()
    return {r["path"]: r for r in facts.get("libraries", [])}, res


def _sdk_record(sdk_dir: Path, recs):
    return recs[f"{sdk_dir}/sdk/libsdk.so"]


def _refuse_resolving(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("resolved a tree although nothing changed")
    monkeypatch.setattr(ldso.Resolver, "tree", refuse)


def test_an_unchanged_machine_reuses_the_records(cache_dir, sdk, monkeypatch):
    first, _ = _libraries(sdk)
    assert _sdk_record(sdk, first)["missing"] == []
    assert list(cache_dir.glob("library-preflight-*.json"))
    _refuse_resolving(monkeypatch)
    second, _ = _libraries(sdk)
    assert second == first


def test_a_removed_dependency_is_found_missing(cache_dir, sdk):
    _libraries(sdk)
    (sdk / "dep/libdep.so.1").rename(sdk / "libdep.so.1.moved")
    recs, res = _libraries(sdk)
    assert _sdk_record(sdk, recs)["missing"] == ["libdep.so.1"]
    assert any(f.id == "missing-shared-library" for f in res.findings)


def test_a_dependency_put_in_place_is_found(cache_dir, sdk):
    (sdk / "dep/libdep.so.1").rename(sdk / "libdep.so.1.away")
    assert _sdk_record(sdk, _libraries(sdk)[0])["missing"] == ["libdep.so.1"]
    (sdk / "libdep.so.1.away").rename(sdk / "dep/libdep.so.1")
    assert _sdk_record(sdk, _libraries(sdk)[0])["missing"] == []


def test_a_rebuilt_library_is_read_again(cache_dir, sdk):
    _libraries(sdk)
    # the same path, now also needing a library that is nowhere
    cc(sdk / "extra/libextra.so.2", "int extra(void){return 2;}\n", "-Wl,-soname,libextra.so.2")
    cc(sdk / "sdk/libsdk.so", "extern int dep(void);\nextern int extra(void);\n"
       "int sdk(void){return dep()+extra();}\n", f"-L{sdk / 'dep'}", f"-L{sdk / 'extra'}",
       "-l:libdep.so.1", "-l:libextra.so.2", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../dep",
       "-Wl,-soname,libsdk.so")
    assert _sdk_record(sdk, _libraries(sdk)[0])["missing"] == ["libextra.so.2"]


def test_a_changed_ld_library_path_is_a_new_state(cache_dir, sdk, monkeypatch):
    (sdk / "dep/libdep.so.1").rename(sdk / "libdep.so.1")  # only LD_LIBRARY_PATH finds it now
    assert _sdk_record(sdk, _libraries(sdk)[0])["missing"] == ["libdep.so.1"]
    monkeypatch.setenv("LD_LIBRARY_PATH", str(sdk))
    assert _sdk_record(sdk, _libraries(sdk)[0])["missing"] == []


def test_a_snapshot_is_never_kept(cache_dir, tmp_path):
    case = Path(__file__).parent / "cases"
    snap = next(case.glob("x212-*"))
    check.run_check(open_host(str(snap)), check.Config.load())
    assert not list(cache_dir.glob("library-preflight-*"))


def test_a_corrupt_cache_file_is_an_empty_one(cache_dir, sdk):
    first, _ = _libraries(sdk)
    for f in cache_dir.glob("library-preflight-*.json"):
        f.write_text('{"states": [{"config": ')
    assert _libraries(sdk)[0] == first
