"""The catalog events of a kernel log kept between runs (npu_doctor.catalog.eventcache): the
same text under the same configuration is not classified again, and anything else is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from npu_doctor import check
from npu_doctor.catalog import eventcache
from npu_doctor.catalog.matcher import CatalogSet
from npu_doctor.host import open_host

# Xid 119 five times in `dmesg` (a real report)
CASE = Path(__file__).parent / "cases" / "k15-nvidia-xid119-gsp-rpc-timeout"


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(d))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    return d


def _run(snapshot):
    config = check.Config.load()
    res = check.run_check(open_host(str(snapshot)), config)
    return res.to_json()


def _refuse_matching(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("classified a kernel log whose events were stored")
    monkeypatch.setattr(CatalogSet, "match_text", refuse)


def _strip_timing(report):
    for p in report["probes"]:
        p.pop("duration_s", None)
    report["facts"].pop("library_scan", None)
    return report


def test_the_same_log_reads_its_events_back_and_the_report_is_unchanged(cache_dir, monkeypatch):
    snap = CASE
    first = _run(snap)
    assert any(e["rule"] == "device-unresponsive" for e in first["facts"]["log_events"])
    assert list(cache_dir.glob("log-events-*.json"))
    _refuse_matching(monkeypatch)
    second = _run(snap)
    assert _strip_timing(second) == _strip_timing(first)


def test_a_changed_log_is_classified_afresh(cache_dir, tmp_path):
    snap = tmp_path / "snap"
    shutil.copytree(CASE, snap)
    cmds = snap / "commands.toml"
    original = cmds.read_text()
    cmds.write_text(original.replace("Xid (PCI:0000:9b:00): 119", "Xid (PCI:0000:9b:00): 13"))
    quiet = _run(snap)
    assert "device-unresponsive" not in {f["id"] for f in quiet["findings"]}
    cmds.write_text(original)
    loud = _run(snap)
    assert "device-unresponsive" in {f["id"] for f in loud["findings"]}


def test_another_configuration_does_not_read_the_events_of_this_one(cache_dir, tmp_path, monkeypatch):
    snap = CASE
    _run(snap)
    rules = tmp_path / "site-rules"
    rules.mkdir()
    (rules / "site.toml").write_text('''[[rule]]
id = "site-note"
severity = "info"
title = "Site note"
explain = "A site rule."
when = [{ fact = "os.kernel", exists = true }]
message = "noted"
''')
    config = check.Config.load((), [str(rules)])
    assert config.digest and config.digest != check.Config.load().digest
    calls = []
    real = CatalogSet.match_text

    def counting(self, *a, **k):
        calls.append(a[1])
        return real(self, *a, **k)
    monkeypatch.setattr(CatalogSet, "match_text", counting)
    check.run_check(open_host(str(snap)), config)
    assert calls, "the events of another configuration were used"


def test_a_corrupt_cache_file_is_an_empty_one(cache_dir, monkeypatch):
    snap = CASE
    first = _run(snap)
    for f in cache_dir.glob("log-events-*.json"):
        f.write_text('{"texts": [{"key": ')
    second = _run(snap)
    assert _strip_timing(second) == _strip_timing(first)
    # and it was written again, whole
    for f in cache_dir.glob("log-events-*.json"):
        assert json.loads(f.read_text())["texts"]


def test_off_with_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NPU_DOCTOR_NO_CACHE", "1")
    _run(CASE)
    assert not list((tmp_path / "cache").glob("log-events-*"))


def test_events_that_json_would_change_are_not_stored(cache_dir):
    eventcache.store("c0ffee", "text", "dmesg", ("kernel",), "kernel", [{"also": (1, 2)}])
    assert eventcache.lookup("c0ffee", "text", "dmesg", ("kernel",), "kernel") is None
    eventcache.store("c0ffee", "text", "dmesg", ("kernel",), "kernel", [{"also": [1, 2]}])
    assert eventcache.lookup("c0ffee", "text", "dmesg", ("kernel",), "kernel") == [{"also": [1, 2]}]
    # the source and the scopes are part of the key
    assert eventcache.lookup("c0ffee", "text", "journal", ("kernel",), "kernel") is None
    assert eventcache.lookup("c0ffee", "text", "dmesg", ("kernel", "runtime"), "kernel") is None


def test_only_the_newest_texts_are_kept(cache_dir):
    for i in range(eventcache.KEEP + 2):
        eventcache.store("c0ffee", f"text {i}", "dmesg", ("kernel",), "kernel", [{"n": i}])
    kept = [i for i in range(eventcache.KEEP + 2)
            if eventcache.lookup("c0ffee", f"text {i}", "dmesg", ("kernel",), "kernel")]
    assert kept == list(range(2, eventcache.KEEP + 2))
