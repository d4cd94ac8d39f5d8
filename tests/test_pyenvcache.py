"""An application interpreter's answer remembered between runs (npu_doctor.pyenvcache): used
only while the interpreter, its environment variables and its site directories are unchanged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from npu_doctor.host import LiveHost
from npu_doctor.pyenv import query


@pytest.fixture()
def venv(tmp_path):
    d = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True, timeout=120)
    return d


@pytest.fixture()
def counting_host(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    host = LiveHost()
    calls = []
    real = host.run

    def run(argv, timeout=10.0):
        calls.append(list(argv))
        return real(argv, timeout=timeout)
    host.run = run  # type: ignore[method-assign]
    return host, calls


def _site(venv):
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def test_second_query_is_remembered_and_equal(venv, counting_host):
    host, calls = counting_host
    exe = str(venv / "bin" / "python")
    first = query(host, exe)
    second = query(host, exe)
    assert len(calls) == 1 and first.sites == second.sites and str(_site(venv)) in first.sites
    assert "earlier run" in second.source and first.version == second.version


def test_a_new_pth_file_or_pythonpath_is_asked_afresh(venv, counting_host, tmp_path, monkeypatch):
    host, calls = counting_host
    exe = str(venv / "bin" / "python")
    query(host, exe)
    extra = tmp_path / "extra-site"
    extra.mkdir()
    (_site(venv) / "extra.pth").write_text(str(extra) + "\n")
    got = query(host, exe)
    assert len(calls) == 2 and str(extra) in got.sites
    other = tmp_path / "on-pythonpath"
    other.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(other))
    got = query(host, exe)
    assert len(calls) == 3 and str(other) in got.sites
    assert str(other) in query(host, exe).sites and len(calls) == 3


def test_a_recreated_venv_is_asked_afresh(venv, counting_host):
    host, calls = counting_host
    exe = str(venv / "bin" / "python")
    query(host, exe)
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text() + "# recreated\n")
    query(host, exe)
    assert len(calls) == 2


def test_capture_runs_the_interpreter(venv, tmp_path, monkeypatch):
    from npu_doctor.capture import RecordingHost

    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    exe = str(venv / "bin" / "python")
    query(LiveHost(), exe)  # remembered now
    rec = RecordingHost(LiveHost())
    query(rec, exe)
    assert any(argv[0] == exe for argv in rec.commands)
