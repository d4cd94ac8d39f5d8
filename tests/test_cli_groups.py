"""CLI edges a newcomer met (issue 11): a command group run bare prints its short usage on
stdout and exits 0; `rules list | head -1` and `rules explain X | head -1` exit 0 like
`check | head -1`; `service install --root DIR` prints the paths it wrote under DIR, records
no "/." and leaves no empty directory on uninstall; a second uninstall has nothing to do."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, run_cli


@pytest.mark.parametrize("group,sub", [("rules", "explain"), ("service", "uninstall")])
def test_bare_group_prints_short_usage_and_exits_0(group, sub):
    proc = run_cli(group)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith(f"Usage: npu-doctor {group} COMMAND")
    assert f"  {sub} " in proc.stdout and len(proc.stdout.splitlines()) < 10


@pytest.mark.parametrize("args", [["rules", "list"], ["rules", "explain", "runtime-autosuspend"],
                                  ["rules", "list", "--format", "json"]])
def test_rules_output_into_a_closed_pipe_exits_0(args):
    # `| head -c 1`: the reader goes away after one byte, mid-output
    cmd = (f"{sys.executable} -m npu_doctor {' '.join(args)} | head -c 1 >/dev/null; "
           "echo ${PIPESTATUS[0]}")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=str(REPO),
                         timeout=60)
    assert out.stdout.strip() == "0", out.stderr
    assert "Traceback" not in out.stderr


def test_service_root_paths_dirs_and_repeat_uninstall(tmp_path):
    root = tmp_path / "image"
    res = run_cli("service", "install", "--root", str(root))
    assert res.returncode == 0, res.stderr
    assert f"wrote {root}/etc/systemd/system/npu-doctor.service" in res.stdout
    assert all(str(root) in ln for ln in res.stdout.splitlines() if ln.startswith(("wrote", "created")))
    dirs = json.loads((root / "etc/npu-doctor/installed.json").read_text())["dirs"]
    assert "/." not in dirs and "/" not in dirs and "/etc/npu-doctor" in dirs
    res = run_cli("service", "uninstall", "--root", str(root))
    assert res.returncode == 0, res.stderr
    assert root.is_dir() and list(root.iterdir()) == []     # nothing left, root itself kept
    again = run_cli("service", "uninstall", "--root", str(root))
    assert again.returncode == 0 and "nothing to remove" in again.stdout
