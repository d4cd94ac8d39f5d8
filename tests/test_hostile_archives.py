"""Hostile snapshot archives: refused with one line, nothing written outside the extraction
directory — with tarfile's extraction filters present and with them removed (Python 3.8.0-3.8.16,
3.9.0-3.9.16, 3.10.0-3.10.11, 3.11.0-3.11.3 have none)."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from npu_doctor.errors import SnapshotError
from npu_doctor.host import archive
from npu_doctor.host.snapshot import SnapshotHost

from conftest import run_cli


def _add(tf: tarfile.TarFile, name: str, data: bytes = b"", **kw) -> None:
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    else:
        tf.addfile(ti)


def _archive(path, members) -> str:
    with tarfile.open(path, "w:gz") as tf:
        _add(tf, "commands.toml", b"")
        for m in members:
            _add(tf, *m[:2], **(m[2] if len(m) > 2 else {}))
    return str(path)


@pytest.fixture(params=["current", "no-filter"])
def tar_mode(request, monkeypatch):
    """Run each archive twice: as this Python's tarfile is, and as one without filters."""
    if request.param == "no-filter":
        for attr in ("tar_filter", "data_filter", "fully_trusted_filter"):
            monkeypatch.delattr(tarfile, attr, raising=False)
        monkeypatch.delattr(tarfile.TarFile, "extraction_filter", raising=False)

    def no_extractall(*a, **k):  # our own extraction must not depend on it
        raise AssertionError("extractall used")

    monkeypatch.setattr(tarfile.TarFile, "extractall", no_extractall)
    return request.param


def _hostile(outside: str):
    sym = {"type": tarfile.SYMTYPE}
    hard = {"type": tarfile.LNKTYPE}
    return {
        "absolute name": [(outside + "/pwned", b"x")],
        "dot-dot": [("fs/../../pwned", b"x")],
        "through a symlink": [("fs/x", b"", dict(sym, linkname=outside)), ("fs/x/pwned", b"x")],
        "through a relative symlink": [("fs/x", b"", dict(sym, linkname="../../../../../../" + outside)),
                                       ("fs/x/pwned", b"x")],
        "symlink outside fs": [("logs", b"", dict(sym, linkname=outside))],
        "commands.toml symlink": [("top/commands.toml", b"", dict(sym, linkname=outside + "/victim"))],
        "hard link out": [("fs/h", b"", dict(hard, linkname=outside + "/victim")), ("fs/h", b"x")],
        "hard link dot-dot": [("fs/h", b"", dict(hard, linkname="../victim")), ("fs/h", b"x")],
        "char device": [("fs/dev/null", b"", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3})],
        "fifo": [("fs/fifo", b"", {"type": tarfile.FIFOTYPE})],
    }


@pytest.mark.parametrize("kind", sorted(_hostile("/x")))
def test_hostile_archive_is_refused_and_writes_nothing_outside(tmp_path, tar_mode, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious")
    arc = _archive(tmp_path / "evil.tar.gz", _hostile(str(outside))[kind])
    with pytest.raises(SnapshotError) as e:
        SnapshotHost(arc)
    assert "evil.tar.gz" in str(e.value) and "\n" not in str(e.value)
    assert sorted(os.listdir(outside)) == ["victim"] and victim.read_text() == "precious"


def test_hard_link_to_an_earlier_member_is_a_copy_not_a_write_through(tmp_path, tar_mode):
    arc = _archive(tmp_path / "ok.tar.gz", [
        ("fs/etc/a", b"first"),
        ("fs/etc/b", b"", {"type": tarfile.LNKTYPE, "linkname": "fs/etc/a"}),
        ("fs/etc/b", b"second"),
    ])
    host = SnapshotHost(arc)
    assert host.read_text("/etc/a") == "first" and host.read_text("/etc/b") == "second"
    host.close()


def test_sysfs_style_links_are_kept(tmp_path, tar_mode):
    arc = _archive(tmp_path / "ok.tar.gz", [
        ("fs/sys/devices/npu/power/control", b"auto"),
        ("fs/sys/class/devfreq/abs", b"", {"type": tarfile.SYMTYPE, "linkname": "/sys/devices/npu"}),
        ("fs/sys/class/devfreq/rel", b"", {"type": tarfile.SYMTYPE, "linkname": "../../devices/npu"}),
    ])
    host = SnapshotHost(arc)
    assert host.read_attr("/sys/class/devfreq/abs/power/control") == "auto"
    assert host.read_attr("/sys/class/devfreq/rel/power/control") == "auto"
    host.close()


def test_tar_bomb_and_member_flood_are_refused(tmp_path, tar_mode, monkeypatch):
    monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", 1 << 20)
    big = _archive(tmp_path / "bomb.tar.gz", [("fs/zero", b"\0" * (2 << 20))])
    with pytest.raises(SnapshotError, match="more than 1 MiB"):
        SnapshotHost(big)
    monkeypatch.setattr(archive, "MAX_MEMBERS", 50)
    many = _archive(tmp_path / "many.tar.gz", [(f"fs/f{i}", b"x") for i in range(60)])
    with pytest.raises(SnapshotError, match="more than 50 members"):
        SnapshotHost(many)


def test_cli_hostile_archive_is_exit_2_one_line(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    arc = _archive(tmp_path / "evil.tar.gz", _hostile(str(outside))["through a symlink"])
    out = run_cli("check", "--snapshot", arc)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "symlink" in out.stderr
    assert os.listdir(outside) == []
