"""Fix hints that work as written (issue 11): the hint fits the context (snapshot or live,
root or not, where npu-doctor is installed), one udev rule file name everywhere, `fix
--format json`, and --select/--ignore with comma lists and shell patterns."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest

from npu_doctor.cli.selfcmd import self_argv, self_command
from npu_doctor.tomlcompat import tomllib

from conftest import REPO, case_path, run_cli

SHIPPED_RULE = "70-npu-doctor-runtime-pm.rules"


def test_one_udev_rule_name_everywhere():
    assert (REPO / "npu_doctor/deploy/systemd" / SHIPPED_RULE).is_file()
    texts = []
    for path in glob.glob(str(REPO / "rules/*.toml")):
        for rule in tomllib.loads(Path(path).read_text()).get("rule", []):
            texts += [f.get("text", "") for f in rule.get("fix", []) if isinstance(f, dict)]
    runtime_pm = [t for t in texts if "power/control" in t and "udev" in t]
    assert runtime_pm, "no make-it-stay text for runtime PM found"
    for t in runtime_pm:
        assert SHIPPED_RULE in t and "70-npu-runtime-pm.rules" not in t
    assert "70-npu-runtime-pm.rules" not in (REPO / "README.md").read_text()


@pytest.mark.cases
def test_fix_on_a_snapshot_does_not_tell_to_apply_here():
    proc = run_cli("fix", "--snapshot", str(case_path("k01-rk3588-npu-autosuspend")))
    assert proc.returncode == 0
    assert "fix --apply`" not in proc.stdout.replace("npu-doctor fix --apply` to perform", "")
    assert "sudo npu-doctor fix --apply" not in proc.stdout
    assert "echo on | sudo tee /sys/devices/platform/fdab0000.npu/power/control" in proc.stdout


@pytest.mark.cases
def test_fix_format_json():
    proc = run_cli("fix", "--snapshot", str(case_path("k01-rk3588-npu-autosuspend")),
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    [w] = doc["writes"]
    assert w == {"rule": "runtime-autosuspend", "subject": w["subject"],
                 "path": "/sys/devices/platform/fdab0000.npu/power/control",
                 "current": "auto", "value": "on"}
    assert doc["applied"] is False and doc["host"]["source"] == "snapshot"
    assert "snapshot" in doc["hint"]
    none = run_cli("fix", "--snapshot", str(case_path("k05-rk3588-healthy")), "--format", "json")
    assert json.loads(none.stdout)["writes"] == []


def test_sudo_hint_names_the_executable_by_absolute_path(tmp_path):
    venv_bin = tmp_path / "venv/bin"
    venv_bin.mkdir(parents=True)
    exe = venv_bin / "npu-doctor"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    # a venv or pipx script: not on sudo's secure_path, so the absolute path
    assert self_command("fix", "--apply", is_root=False, argv0=str(exe)) == \
        f"sudo {exe} fix --apply"
    # root already: no sudo
    assert not self_command("fix", "--apply", is_root=True, argv0=str(exe)).startswith("sudo")
    # a system install on secure_path: the plain name works under sudo
    assert self_command("fix", "--apply", is_root=False, argv0="/usr/bin/npu-doctor") == \
        "sudo npu-doctor fix --apply"
    # python -m npu_doctor: the interpreter by absolute path
    assert self_argv("/x/npu_doctor/__main__.py") == [os.path.abspath(sys.executable), "-m",
                                                      "npu_doctor"]


@pytest.mark.cases
@pytest.mark.parametrize("cmd", ["check", "fix"])
def test_select_and_ignore_take_comma_lists_and_globs(cmd):
    snap = str(case_path("k02-rk3588-soc-thermal-throttling"))
    fmt = ["--format", "json"]
    full = json.loads(run_cli("check", "--snapshot", snap, *fmt).stdout)
    ids = {f["id"] for f in full["findings"]}
    assert any(i.startswith("thermal-") for i in ids), ids
    proc = run_cli(cmd, "--snapshot", snap, "--select", "thermal-*,runtime-autosuspend", *fmt)
    assert proc.returncode in (0, 1), proc.stderr
    if cmd == "check":
        got = {f["id"] for f in json.loads(proc.stdout)["findings"]}
        assert got and all(i.startswith("thermal-") or i == "runtime-autosuspend" for i in got)
        rest = json.loads(run_cli(cmd, "--snapshot", snap, "--ignore", "thermal-*", *fmt).stdout)
        assert not any(f["id"].startswith("thermal-") for f in rest["findings"])
    bad = run_cli(cmd, "--snapshot", snap, "--select", "nosuch-*")
    assert bad.returncode == 2 and "matches no rule id" in bad.stderr
