"""Outputs of commands that only report on files, reused while those files are unchanged
(npu_doctor.host.cmdcache), with real binaries gcc builds in the test."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from npu_doctor.host import LiveHost

GCC = shutil.which("gcc")  # the real one: a test puts a wrapper script named gcc on PATH
pytestmark = pytest.mark.skipif(GCC is None, reason="needs gcc to build a tool")

TOOL = r'''
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *f = fopen(getenv("RUNS_FILE"), "a"); if (f) { fputs("run\n", f); fclose(f); }
    printf("cmake version %s\n", VERSION);
    return 0;
}
'''


def _build(d, version):
    src = d / "tool.c"
    src.write_text("#include <stdlib.h>\n" + TOOL)
    out = d / "cmake"
    tmp = d / ".cmake.new"
    subprocess.run([GCC, f'-DVERSION="{version}"', "-o", str(tmp), str(src)], check=True, timeout=120)
    os.replace(tmp, out)  # a new inode, as an upgrade installs it
    return out


@pytest.fixture()
def tool_env(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runs = tmp_path / "runs"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RUNS_FILE", str(runs))
    monkeypatch.setenv("NPU_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NPU_DOCTOR_NO_CACHE", raising=False)
    return bin_dir, runs


def _runs(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_version_output_reused_until_the_binary_changes(tool_env):
    bin_dir, runs = tool_env
    _build(bin_dir, "3.25.1")
    host = LiveHost()
    first = host.run(["cmake", "--version"])
    second = host.run(["cmake", "--version"])
    assert first.stdout == second.stdout == "cmake version 3.25.1\n" and _runs(runs) == 1
    assert "earlier run" in second.source and second.returncode == 0
    _build(bin_dir, "3.28.3")  # upgraded
    assert host.run(["cmake", "--version"]).stdout == "cmake version 3.28.3\n" and _runs(runs) == 2


def test_scripts_other_commands_and_capture_always_run(tool_env):
    from npu_doctor.capture import RecordingHost

    bin_dir, runs = tool_env
    script = bin_dir / "gcc"
    script.write_text("#!/bin/sh\necho run >> \"$RUNS_FILE\"\necho 'gcc (wrapper) 12.2.0'\n")
    script.chmod(0o755)
    host = LiveHost()
    host.run(["gcc", "--version"])
    host.run(["gcc", "--version"])
    assert _runs(runs) == 2  # a wrapper script may choose another compiler each time
    _build(bin_dir, "3.25.1")
    host.run(["cmake", "--help"])
    host.run(["cmake", "--help"])
    assert _runs(runs) == 4  # not a version query
    host.run(["cmake", "--version"])
    rec = RecordingHost(LiveHost())
    rec.run(["cmake", "--version"])
    assert _runs(runs) == 6  # capture records this moment's run


def test_turned_off_by_no_cache(tool_env, monkeypatch):
    bin_dir, runs = tool_env
    _build(bin_dir, "3.25.1")
    monkeypatch.setenv("NPU_DOCTOR_NO_CACHE", "1")
    host = LiveHost()
    host.run(["cmake", "--version"])
    host.run(["cmake", "--version"])
    assert _runs(runs) == 2
