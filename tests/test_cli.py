"""The command line: exit codes, JSON on stdout only, one-line errors, --help that teaches.

Most tests run the CLI in-process (run_cli); those about what only a real process shows
(interpreter exit status, stdout purity, signals, encoding) use run_cli_subprocess."""

from __future__ import annotations

import json

import pytest

from conftest import case_path, make_snapshot, run_cli, run_cli_subprocess


def test_version_and_help():
    out = run_cli("--version")
    assert out.returncode == 0 and "npu-doctor" in out.stdout
    helped = run_cli("check", "--help")
    assert helped.returncode == 0
    for word in ("--snapshot", "--format", "--fail-on", "--select", "--ignore", "Exit status"):
        assert word in helped.stdout


def test_live_json_report_follows_the_contract():
    out = run_cli_subprocess("check", "--format", "json", "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["schema"] == "npu-doctor/report/v1"
    assert report["host"]["source"] == "live"
    assert set(report) >= {"tool", "host", "facts", "findings", "probes"}
    for p in report["probes"]:
        assert p["status"] in ("ok", "no_data", "error")
        assert isinstance(p["duration_s"], (int, float))


def test_missing_snapshot_is_exit_2_with_one_line(tmp_path):
    out = run_cli_subprocess("check", "--snapshot", str(tmp_path / "nope"))
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "nope" in out.stderr and "Traceback" not in out.stderr


def test_corrupt_snapshot_archive_is_exit_2(tmp_path):
    bad = tmp_path / "board.tar.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    out = run_cli("check", "--snapshot", str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_broken_rules_file_is_exit_2_naming_file_and_rule(tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "site.toml").write_text('[[rule]]\nid = "my-rule"\nseverity = "warning"\ntitle = "t"\n'
                                 'explain = "e"\nwhen = [{fact = "os.id", eq = "debian"}]\n'
                                 'message = "m"\nflavour = "x"\n')
    out = run_cli("check", "--rules", str(d))
    assert out.returncode == 2
    line = out.stderr.strip()
    assert "site.toml" in line and "my-rule" in line and "flavour" in line
    assert len(line.splitlines()) == 1


def test_broken_probe_spec_is_exit_2(tmp_path):
    d = tmp_path / "probes"
    d.mkdir()
    (d / "site.toml").write_text('[[probe]]\nid = "mine"\ncollector = "no_such_collector"\n')
    out = run_cli("check", "--probes", str(d))
    assert out.returncode == 2 and "mine" in out.stderr and "no_such_collector" in out.stderr


def test_site_rule_fires_and_fail_on_sets_exit_code(tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "site.toml").write_text('[[rule]]\nid = "site-os-seen"\nseverity = "warning"\ntitle = "Seen"\n'
                                 'explain = "e"\nwhen = [{fact = "os.id", exists = true}]\n'
                                 'message = "os is {os.id}"\nevidence = ["os.id"]\n')
    snap = case_path("k05-rk3588-healthy")
    base = ("check", "--snapshot", str(snap), "--rules", str(d))
    assert run_cli_subprocess(*base).returncode == 0                      # default --fail-on error
    assert run_cli_subprocess(*base, "--fail-on", "warning").returncode == 1
    assert run_cli(*base, "--fail-on", "warning", "--ignore", "site-os-seen").returncode == 0
    out = run_cli(*base, "--format", "json", "--select", "site-os-seen", "--fail-on", "never")
    report = json.loads(out.stdout)
    assert [f["id"] for f in report["findings"]] == ["site-os-seen"]
    assert report["findings"][0]["evidence"][0]["source"] == "/etc/os-release"


def test_unknown_rule_id_in_select_is_usage_error():
    out = run_cli("check", "--select", "no-such-rule")
    assert out.returncode == 2 and "no-such-rule" in out.stderr


def test_no_color_and_non_tty_text_has_no_escape_codes():
    out = run_cli("check", "--fail-on", "never", env={"NO_COLOR": "1"})
    assert "\x1b[" not in out.stdout
    forced = run_cli("check", "--fail-on", "never", "--color", "always")
    assert "\x1b[" in forced.stdout


def test_rules_list_and_explain():
    lst = run_cli("rules", "list")
    assert lst.returncode == 0 and "probe-failed" in lst.stdout
    ex = run_cli("rules", "explain", "probe-failed")
    assert ex.returncode == 0 and "probe-failed" in ex.stdout
    bad = run_cli("rules", "explain", "no-such-rule")
    assert bad.returncode == 2 and "no-such-rule" in bad.stderr


def test_probe_with_missing_hanging_failing_and_garbage_commands(tmp_path):
    """Each bad command gives a probe status, and the rest of the report still comes."""
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "site.toml").write_text(
        '[[probe]]\nid = "t-missing"\nrun = ["no-such-tool"]\nparser = "os_release"\ninto = "t.missing"\n'
        '[[probe]]\nid = "t-hang"\nrun = ["hang"]\nparser = "os_release"\ninto = "t.hang"\ntimeout_s = 0.3\n'
        '[[probe]]\nid = "t-fail"\nrun = ["fail"]\nparser = "os_release"\ninto = "t.fail"\n'
        '[[probe]]\nid = "t-garbage"\nrun = ["garbage"]\nparser = "os_release"\ninto = "t.garbage"\n')
    snap = make_snapshot(tmp_path / "snap", files={"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'},
                         commands=[{"argv": ["hang"], "timed_out": True},
                                   (["fail"], 3, "", "fail: device not ready"),
                                   (["garbage"], 0, "\x00\x01 %%%")])
    out = run_cli("check", "--snapshot", str(snap), "--probes", str(probes), "--format", "json",
                  "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    status = {p["id"]: p for p in report["probes"]}
    assert status["t-missing"]["status"] == "no_data"
    assert status["t-hang"]["status"] == "error" and "timed out" in status["t-hang"]["error"]
    assert status["t-fail"]["status"] == "error" and "exited 3" in status["t-fail"]["error"]
    assert status["t-garbage"]["status"] == "error" and "unparsable" in status["t-garbage"]["error"]
    failed = {f["subject"] for f in report["findings"] if f["id"] == "probe-failed"}
    assert failed == {"t-hang", "t-fail", "t-garbage"}
    assert report["facts"]["os"]["id"] == "debian"


def test_python_dash_m_entry_point():
    out = run_cli_subprocess("--help")
    assert out.returncode == 0 and "check" in out.stdout
    assert out.stdout.startswith("Usage: npu-doctor ")  # the console script's name, not `python -m`


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_stdout_that_cannot_encode_unicode_gets_a_whole_report(fmt):
    """PYTHONIOENCODING=ascii (or a latin-1 locale): no UnicodeEncodeError halfway through;
    JSON stays lossless (\\u escapes), text replaces what it cannot show."""
    snap = case_path("k02-rk3588-soc-thermal-throttling")
    out = run_cli_subprocess("check", "--snapshot", str(snap), "--format", fmt, "--fail-on", "never",
                             env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stdout.isascii()
    if fmt == "json":
        report = json.loads(out.stdout)
        assert "thermal-throttling" in {f["id"] for f in report["findings"]}
        assert "°" in json.dumps(report, ensure_ascii=False)  # escaped, not lost
    else:
        assert "thermal" in out.stdout.lower()


def test_rules_explain_shows_matrix_rows_with_their_sources():
    out = run_cli("rules", "explain", "runtime-driver-mismatch")
    assert out.returncode == 0, out.stderr
    assert "Matrix cuda-toolkit-min-driver" in out.stdout
    body = out.stdout.split("\nMatrix ", 1)[1]
    rows = [ln for ln in body.splitlines() if ln.startswith("  ") and not ln.startswith(("   ", "  ["))]
    sources = [ln for ln in out.stdout.splitlines() if ln.strip().startswith("source:")]
    assert rows and len(sources) == len(rows)
    assert all("http" in s for s in sources)


def test_every_matrix_row_has_a_source():
    from npu_doctor.rules import load_rules

    rs = load_rules()
    assert rs.matrices
    for mid, rows in rs.matrices.items():
        for row in rows:
            assert row.get("source"), (mid, row)


def _snap(tmp_path, name, **files):
    """A snapshot whose metadata files (commands_toml=..., stat_toml=...) hold these exact,
    usually broken, bytes: make_snapshot only writes valid ones."""
    d = tmp_path / name
    d.mkdir()
    for fn, content in files.items():
        (d / fn.replace("_toml", ".toml")).write_bytes(content)
    return d


def test_corrupt_snapshot_metadata_is_one_line_exit_2(tmp_path):
    cases = [
        _snap(tmp_path, "binary", commands_toml=bytes(range(256)) * 2),
        _snap(tmp_path, "scalar", commands_toml=b"command = 3\n"),
        _snap(tmp_path, "rc", commands_toml=b'[[command]]\nargv = ["x"]\nreturncode = "zero"\n'),
        _snap(tmp_path, "meta", snapshot_toml=bytes(range(128, 256))),
        _snap(tmp_path, "stat", stat_toml=b"path = 5\n"),
        _snap(tmp_path, "argv", commands_toml=b'[[command]]\nargv = []\nreturncode = 0\n'),
        _snap(tmp_path, "statkind", stat_toml=b'[[path]]\npath = "/dev/x"\ntype = "weird"\n'),
        _snap(tmp_path, "statmode", stat_toml=b'[[path]]\npath = "/dev/x"\ntype = "char"\nmode = 5\n'),
        _snap(tmp_path, "empty"),
    ]
    for snap in cases:
        out = run_cli("check", "--snapshot", str(snap))
        assert out.returncode == 2, (snap.name, out.stdout[-300:], out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
        assert str(snap) in out.stderr


def test_rules_and_probes_files_of_the_wrong_shape_are_exit_2(tmp_path):
    for kind, text in (("rules", b"rule = 5\n"), ("rules", bytes(range(200, 256))),
                       ("probes", b"probe = 5\n"),
                       ("probes", b'[[probe]]\nid = "thermal"\ncollector = "os_release"\n'),
                       ("probes", b'[[probe]]\nid = "mine"\ncollector = "os_release"\ntimeout_s = -1\n')):
        d = tmp_path / f"{kind}-{abs(hash(text))}"
        d.mkdir()
        (d / "site.toml").write_bytes(text)
        out = run_cli("check", f"--{kind}", str(d))
        assert out.returncode == 2, (text, out.stderr)
        assert "site.toml" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_log_option_must_name_a_readable_file(tmp_path):
    for bad in (tmp_path / "missing.log", tmp_path):
        out = run_cli("check", "--log", str(bad))
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
        assert "--log" in out.stderr


def test_interrupt_exits_130_without_a_traceback(tmp_path):
    import os
    import selectors
    import signal
    import subprocess
    import sys
    import time

    snap = _snap(tmp_path, "hang", commands_toml=b'[[command]]\nargv = ["dmesg"]\ntimed_out = true\n')
    # A suite started as a background job (`pytest &`) inherits SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler: give the child the default disposition, as
    # a terminal's Ctrl-C would find it. The product itself must not reset it.
    proc = subprocess.Popen([sys.executable, "-m", "npu_doctor", "check", "--snapshot", str(snap)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, NPU_DOCTOR_PROGRESS="1"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Interrupt once the check is provably under way (its progress line), not after a guess.
    err_head = b""
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + 60
    while b"probing: waiting for" not in err_head and time.monotonic() < deadline:
        if sel.select(timeout=max(0.0, deadline - time.monotonic())):
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            err_head += chunk
    sel.close()
    assert b"probing: waiting for" in err_head, err_head
    proc.send_signal(signal.SIGINT)
    _out, err_tail = proc.communicate(timeout=10)
    err = (err_head + err_tail).decode("utf-8", "replace")
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err


def test_utf16_and_compressed_logs_are_read(tmp_path):
    import gzip

    src = next((case_path("c3-14-ort-verbose-node-placements") / "logs").iterdir())
    text = src.read_text()
    u16 = tmp_path / "run-powershell.log"
    u16.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    gz = tmp_path / "run.log.1.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    import bz2
    import lzma

    bz = tmp_path / "run.log.2.bz2"
    bz.write_bytes(bz2.compress(text.encode()))
    xz = tmp_path / "run.log.3.xz"
    xz.write_bytes(lzma.compress(text.encode()))
    for log in (u16, gz, bz, xz):
        out = run_cli("check", "--log", str(log), "--format", "json", "--fail-on", "never",
                      "--select", "cpu-fallback-logged")
        report = json.loads(out.stdout)
        assert report["facts"]["fallback"]["count"] == 39, log.name
        assert [f["id"] for f in report["findings"]] == ["cpu-fallback-logged"]


def test_verbose_lists_libraries_like_ld_so(tmp_path):
    import shutil
    import subprocess

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    build = tmp_path / "build"
    build.mkdir()
    (build / "dep.c").write_text("int dep(void) { return 1; }\n")
    (build / "rt.c").write_text("int dep(void); int rknn_init(void) { return dep(); }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(build / "libnpudep.so"), str(build / "dep.c")], check=True)
    lib = tmp_path / "snap/fs/usr/lib/librknnrt.so"
    lib.parent.mkdir(parents=True)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib), str(build / "rt.c"), "-L", str(build),
                    "-lnpudep"], check=True)
    out = run_cli("check", "--snapshot", str(tmp_path / "snap"), "-v", "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("ld.so --list", 1)[1]
    assert "/usr/lib/librknnrt.so" in section
    assert "libnpudep.so => not found" in section


def test_a_site_probe_replaces_a_shipped_one_only_when_it_says_so(tmp_path):
    d = tmp_path / "probes"
    d.mkdir()
    snap = case_path("k02-rk3588-soc-thermal-throttling")
    (d / "site.toml").write_text('[[probe]]\nid = "thermal"\noverride = true\ncollector = "os_release"\n')
    out = run_cli("check", "--snapshot", str(snap), "--probes", str(d), "--format", "json", "--fail-on", "never")
    assert out.returncode == 0, out.stderr
    assert "thermal" not in json.loads(out.stdout)["facts"]  # the site's probe ran instead
    (d / "site.toml").write_text('[[probe]]\nid = "no-such"\noverride = true\ncollector = "os_release"\n')
    out = run_cli("check", "--snapshot", str(snap), "--probes", str(d))
    assert out.returncode == 2 and "no such probe to replace" in out.stderr


def test_the_data_cache_never_serves_a_changed_rules_file(tmp_path):
    cache = tmp_path / "cache"
    env = {"NPU_DOCTOR_CACHE_DIR": str(cache), "NPU_DOCTOR_NO_CACHE": None}  # the cache on
    d = tmp_path / "rules"
    d.mkdir()
    rule = ('[[rule]]\nid = "site-note"\nseverity = "info"\ntitle = "t"\nexplain = "e"\n'
            'when = [{fact = "os.id", exists = true}]\nmessage = "%s"\n')
    snap = case_path("k05-rk3588-healthy")
    args = ("check", "--snapshot", str(snap), "--rules", str(d), "--format", "json",
            "--select", "site-note", "--fail-on", "never")
    for word in ("first", "second-and-longer"):
        (d / "site.toml").write_text(rule % word)
        out = run_cli(*args, env=env)
        assert [f["message"] for f in json.loads(out.stdout)["findings"]] == [word]
    from npu_doctor.datafiles import _CACHE_NAME

    assert (cache / _CACHE_NAME).is_file()
    (cache / _CACHE_NAME).write_text("{not json")
    out = run_cli(*args, env=env)
    assert [f["message"] for f in json.loads(out.stdout)["findings"]] == ["second-and-longer"]


def test_check_freezes_start_up_and_runs_with_the_collector_on():
    """The console entry point turns the cyclic collector off for start-up; once the
    configuration is loaded it is frozen out of the collector's reach and the collector is on
    again (npu_doctor.main, cli.common.config_loaded)."""
    import subprocess
    import sys

    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: sys.stderr.write('GC %s %d\\n' % (gc.isenabled(), gc.get_freeze_count())))\n"
            "sys.argv = ['npu-doctor', 'check', '--snapshot', sys.argv[1], '--format', 'json']\n"
            "from npu_doctor.main import main\nmain()\n")
    p = subprocess.run([sys.executable, "-c", code, str(case_path("k01-rk3588-npu-autosuspend"))],
                       capture_output=True, text=True, timeout=120)
    assert json.loads(p.stdout)["findings"]
    enabled, frozen = [ln for ln in p.stderr.splitlines() if ln.startswith("GC ")][-1].split()[1:]
    assert enabled == "True" and int(frozen) > 10000
