"""The user cache directory (npu_doctor.usercache): atomic writes, and files of removed
installations deleted once unused for STALE_S."""

from __future__ import annotations

import os
import time

from npu_doctor import usercache


def _aged(path, days):
    path.write_text("{}")
    t = time.time() - days * 86400
    os.utime(path, (t, t))
    return path


def test_writing_a_file_deletes_cache_files_unused_for_thirty_days(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    old = [_aged(tmp_path / n, 40) for n in (
        "config-1592af2d-py311.pickle", "data-cache-0a30117a.json", "regex-facts-py38-412aff3e.json",
        "command-outputs-04ecb816.json", "python-answers-53673c18.json",
        ".config-1592af2d-py311.pickle.x1y2")]  # a killed writer's temp file
    recent = _aged(tmp_path / "config-5d6bd0c8-py311.pickle", 3)
    foreign = _aged(tmp_path / "notes.json", 400)  # not a name the cache writes
    usercache.save_json("elf-cache.json", {"version": 1})
    assert not any(p.exists() for p in old)
    assert recent.exists() and foreign.exists()
    assert usercache.load_json("elf-cache.json") == {"version": 1}


def test_a_file_read_recently_is_kept_although_written_long_ago(tmp_path):
    p = _aged(tmp_path / "data-cache-0a30117a.json", 90)
    now = time.time()
    os.utime(p, (now - 86400, os.stat(p).st_mtime))  # read yesterday (atime)
    usercache.evict_stale(str(tmp_path), now=now)
    assert p.exists()
    usercache.evict_stale(str(tmp_path), now=now + usercache.STALE_S)
    assert not p.exists()


def test_an_unreadable_cache_directory_is_no_error(tmp_path):
    usercache.evict_stale(str(tmp_path / "absent"))
