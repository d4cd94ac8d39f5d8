"""The fault matrix: every input of a few real snapshots (each file under fs/, each command,
each log) × every fault kind (deleted, empty, garbage, truncated, latin-1, UTF-16, large,
denied, non-zero, timed out). Each run must complete without an exception, give a report that
serialises to JSON, and never turn a fault into a probe's internal error. In-process, so the
~1 000 runs take well under a minute."""

from __future__ import annotations

import json
import os

import pytest
import tomli_w

from npu_doctor.check import Config, run_check
from npu_doctor.host.snapshot import SnapshotHost
from npu_doctor.tomlcompat import tomllib

from conftest import copy_case

pytestmark = pytest.mark.slow

CASES = ["k02", "k06", "c1-01", "u06"]
LARGE = 9 * 1024 * 1024  # above the 8 MiB read cap

FILE_FAULTS = {
    "empty": lambda b: b"",
    "garbage": lambda b: bytes(range(256)) * 16,
    "truncated": lambda b: b[: max(1, len(b) // 3)],
    "latin-1": lambda b: b.decode("utf-8", "replace").encode("latin-1", "replace") + b"\xe9\xff",
    "utf-16": lambda b: b.decode("utf-8", "replace").encode("utf-16"),
    "large": lambda b: (b or b"x") * (LARGE // max(1, len(b)) + 1),
}


def _inputs(snap):
    files = []
    for root, _dirs, names in os.walk(snap / "fs"):
        for n in names:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                files.append(p)
    logs = [str(p) for p in (snap / "logs").rglob("*") if p.is_file()] if (snap / "logs").is_dir() else []
    cmds = []
    if (snap / "commands.toml").is_file():
        cmds = tomllib.loads((snap / "commands.toml").read_text()).get("command", [])
    return sorted(files + logs), cmds


def _run(config, snap):
    host = SnapshotHost(str(snap))
    try:
        result = run_check(host, config)
        report = json.loads(json.dumps(result.to_json(), default=str))
    finally:
        host.close()
    internal = [p for p in report["probes"] if p.get("error_kind") == "internal"]
    assert not internal, internal
    return report


@pytest.fixture(scope="module")
def config():
    return Config.load()


@pytest.mark.parametrize("case", CASES)
def test_fault_matrix(case, tmp_path, config):
    snap = copy_case(case, tmp_path / "snap")
    files, cmds = _inputs(snap)
    _run(config, snap)
    runs = 0
    meta_path = snap / "snapshot.toml"
    meta_orig = meta_path.read_bytes() if meta_path.exists() else None
    for path in files:
        with open(path, "rb") as f:
            orig = f.read()
        rel = "/" + os.path.relpath(path, snap / "fs") if path.startswith(str(snap / "fs")) else None
        for kind, fault in FILE_FAULTS.items():
            with open(path, "wb") as f:
                f.write(fault(orig))
            _run(config, snap)
            runs += 1
        os.unlink(path)
        _run(config, snap)
        with open(path, "wb") as f:
            f.write(orig)
        if rel:
            meta = tomllib.loads(meta_orig.decode()) if meta_orig else {}
            meta.setdefault("snapshot", {})["denied"] = [rel]
            meta_path.write_text(tomli_w.dumps(meta))
            _run(config, snap)
            if meta_orig is None:
                meta_path.unlink()
            else:
                meta_path.write_bytes(meta_orig)
        runs += 2
    cmd_path = snap / "commands.toml"
    for i, cmd in enumerate(cmds):
        out = cmd.get("stdout", "")
        variants = {
            "deleted": None,
            "empty": dict(cmd, stdout="", stderr=""),
            "garbage": dict(cmd, stdout="\x01\x02 garbage ### ::: 999999999999999999999999"),
            "truncated": dict(cmd, stdout=out[: len(out) // 3]),
            "large": dict(cmd, stdout=(out or "x") * (LARGE // max(1, len(out)) + 1)),
            "non-zero": dict(cmd, returncode=1, stderr="Error: something went wrong"),
            "timed-out": dict(cmd, timed_out=True, sleep_s=0, stdout="", stderr="timed out"),
        }
        for kind, variant in variants.items():
            new = [c for j, c in enumerate(cmds) if j != i] + ([variant] if variant else [])
            cmd_path.write_text(tomli_w.dumps({"command": new}))
            _run(config, snap)
            runs += 1
    if cmds:
        cmd_path.write_text(tomli_w.dumps({"command": cmds}))
    assert runs >= len(files) * 8
