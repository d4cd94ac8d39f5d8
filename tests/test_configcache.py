"""The loaded configuration kept between runs (npu_doctor.configcache): used only when nothing
it came from changed, only from a file this user owns, and never hiding a broken file."""

from __future__ import annotations

import os
import shutil

import pytest

from npu_doctor import check, configcache
from npu_doctor.errors import ConfigError

from conftest import case_path

RULE = '''[[rule]]
id = "site-thermal-note"
severity = "info"
title = "Site note"
explain = "A site rule."
when = [{ fact = "os.kernel", exists = true }]
message = "{message_text}"
'''


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(d))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    return d


def _site_rules(tmp_path, text="kernel seen"):
    d = tmp_path / "site-rules"
    d.mkdir(exist_ok=True)
    (d / "site.toml").write_text(RULE.replace("{message_text}", text))
    return str(d)


def _no_loading(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("loaded the data files although the cache was current")
    monkeypatch.setattr(check, "load_rules", refuse)


def test_a_second_load_comes_from_the_cache_and_equals_the_first(cache_dir, tmp_path, monkeypatch):
    rules_dir = _site_rules(tmp_path)
    first = check.Config.load((), [rules_dir])
    assert list(cache_dir.glob("config-*.pickle"))
    _no_loading(monkeypatch)
    second = check.Config.load((), [rules_dir])
    assert [r.id for r in second.rules.rules] == [r.id for r in first.rules.rules]
    assert [s.id for s in second.specs] == [s.id for s in first.specs]
    assert len(second.catalogs.entries()) == len(first.catalogs.entries()) > 1000
    # the cached catalogs still classify a line
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    assert second.catalogs.match_text(line, "dmesg", ("kernel",), "kernel")


def test_cached_catalogs_are_read_only_when_a_log_needs_them(cache_dir, tmp_path, monkeypatch):
    check.Config.load()
    cached = check.Config.load()
    assert isinstance(cached.catalogs, configcache.DeferredCatalogs)
    assert cached.catalogs._obj is None
    # a snapshot of sysfs files only (no kernel or runtime log): the catalogs stay unread
    from npu_doctor.host.snapshot import SnapshotHost

    report = check.run_check(SnapshotHost(str(case_path("k01-rk3588-npu-autosuspend"))), cached)
    assert report.findings and cached.catalogs._obj is None
    # a log line: read now, and the same answer as a configuration loaded from the files
    monkeypatch.setenv("NPU_DOCTOR_NO_CACHE", "1")
    fresh = check.Config.load()
    assert not isinstance(fresh.catalogs, configcache.DeferredCatalogs)
    line = "apex 0000:01:00.0: Apex performance throttled due to temperature"
    got = cached.catalogs.match_text(line, "dmesg", ("kernel",), "kernel")
    assert cached.catalogs._obj is not None
    assert got == fresh.catalogs.match_text(line, "dmesg", ("kernel",), "kernel") != []
    # of the catalogs, only those with a regex that matched the line were read: the others'
    # entries are still their pickles
    cats = cached.catalogs.loaded()._cats
    read = {c.id for c in cats if not isinstance(c, bytes)}
    assert {e["catalog"] for e in got} <= read
    assert 0 < len(read) <= 3 < len(cats)
    # and every catalog reads back whole, equal to the files
    assert [c.id for c in cached.catalogs.catalogs] == [c.id for c in fresh.catalogs.catalogs]
    assert [e.describe() for e in cached.catalogs.entries()] == \
        [e.describe() for e in fresh.catalogs.entries()]


def test_cached_log_indexes_are_read_back_per_scope_and_match_as_built(cache_dir, monkeypatch):
    from npu_doctor.catalog import chunkmatch

    check.Config.load()
    cached = check.Config.load().catalogs.loaded()
    # the per-scope indexes are blobs until a log of those scopes is matched; the one-line
    # index (explain) is not in the cache at all
    assert set(cached._chunk_blobs) == set(chunkmatch.STANDARD_SCOPES)
    assert cached._chunk_index == {} and cached._line_index is None
    built = []
    monkeypatch.setattr(chunkmatch._Index, "__init__", lambda self, *a: built.append(a))
    # real captured lines: an XDNA board's kernel log, and an NVRM Xid line
    lines = [ln for f in sorted((case_path("c2-07-xdna-wrong-firmware-mbox-magic") / "logs").iterdir())
             for ln in f.read_text().splitlines()]
    lines.append("[  7.2] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.")
    got_k = cached.match_lines(lines, "dmesg", ("kernel",), "kernel")
    got_r = cached.match_lines(lines, "app.log", ("kernel", "runtime"), "runtime")
    assert set(cached._chunk_index) == set(chunkmatch.STANDARD_SCOPES) and not built
    monkeypatch.undo()
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("NPU_DOCTOR_NO_CACHE", "1")
    fresh = check.Config.load().catalogs
    assert got_k == fresh.match_lines(lines, "dmesg", ("kernel",), "kernel") != []
    assert got_r == fresh.match_lines(lines, "app.log", ("kernel", "runtime"), "runtime") != []
    # explain's one-line lookup builds its index on first use
    assert cached.lookup(lines[-1]) and cached._line_index is not None


def test_a_changed_rules_file_is_read_afresh(cache_dir, tmp_path):
    rules_dir = _site_rules(tmp_path, "kernel seen")
    check.Config.load((), [rules_dir])
    path = os.path.join(rules_dir, "site.toml")
    st = os.stat(path)
    _site_rules(tmp_path, "kernel seen again")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    cfg = check.Config.load((), [rules_dir])
    rule = next(r for r in cfg.rules.rules if r.id == "site-thermal-note")
    assert rule.matches[0].message == "kernel seen again"


def test_a_broken_rules_file_is_still_an_error_after_a_good_load(cache_dir, tmp_path):
    rules_dir = _site_rules(tmp_path)
    check.Config.load((), [rules_dir])
    with open(os.path.join(rules_dir, "site.toml"), "a") as f:
        f.write("[[rule]\nbroken")
    with pytest.raises(ConfigError, match="site.toml"):
        check.Config.load((), [rules_dir])


def test_a_cache_file_others_can_write_is_not_used(cache_dir, tmp_path, monkeypatch):
    check.Config.load((), [])
    (path,) = cache_dir.glob("config-*.pickle")
    os.chmod(path, 0o666)
    called = []
    real = check.load_rules
    monkeypatch.setattr(check, "load_rules", lambda *a: called.append(1) or real(*a))
    check.Config.load((), [])
    assert called  # loaded from the data files, not from a file anyone could have written


def test_a_corrupt_or_foreign_cache_file_is_a_miss(cache_dir, tmp_path):
    check.Config.load((), [])
    (path,) = cache_dir.glob("config-*.pickle")
    k = configcache.key((), [])
    path.write_bytes(b"not a pickle at all")
    assert configcache.load(k) is None
    shutil.copyfile(__file__, path)
    assert configcache.load(k) is None
    cfg = check.Config.load((), [])  # and the run goes on, rewriting it
    assert cfg.rules.rules and configcache.load(k) is not None


def test_no_cache_when_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv("NPU_DOCTOR_NO_CACHE", "1")
    check.Config.load((), [])
    assert not cache_dir.exists() or not list(cache_dir.glob("config-*.pickle"))
