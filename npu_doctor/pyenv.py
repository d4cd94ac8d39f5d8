"""The application's Python environments, and the one scanner of their distributions.

An *environment* is an interpreter the application runs with (`--python PATH`, repeatable),
by default the interpreter running npu-doctor plus an active `VIRTUAL_ENV` / `CONDA_PREFIX`.
Its import path comes from asking that interpreter, in a subprocess through the Host's command
runner (so `capture` records the answer and a snapshot replays it), for `sys.path` and its
`sysconfig` paths; nothing else is imported there. Everything else (dist-info folders,
METADATA, RECORD, framework files, ELF libraries) npu-doctor reads itself through the Host.

    Env      {python, origin ("--python" | "npu-doctor" | "VIRTUAL_ENV" | "CONDA_PREFIX" |
              "snapshot"), version ("3.11.7"), sys_version, prefix, base_prefix, bits,
              sites: [dirs scanned, import order], error (why the interpreter could not be
              asked; then the sites come from globbing the prefix), dists: {norm name: Dist}}
    Dist     {name (as in the folder, `onnxruntime_gpu`), norm (PEP 503, `onnxruntime-gpu`),
              version, path (the .dist-info / .egg-info folder), site (its directory)}

Sources: PEP 376 / PEP 627 (.dist-info, RECORD), PEP 503 (name normalisation), PEP 427
(escaped names in folder names), the `site` and `sysconfig` module documentation.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .errors import HostError
from .host import CommandResult, Host
from .lazyregex import lazy
from .namematch import any_match

#: Seconds an interpreter may take to answer (a cold conda env on an SD card is slow).
QUERY_TIMEOUT_S = 10.0
#: What the interpreter is asked. Constant text: snapshots match commands by exact argv.
#: repr(), read back with ast.literal_eval: importing json costs the interpreter 8 ms more
#: than the whole rest of this script.
QUERY_SCRIPT = (
    "import sys\n"
    "try:\n import sysconfig;p=sysconfig.get_paths()\n"
    "except Exception:\n p={}\n"
    "print(repr({'executable':sys.executable,'version':'%d.%d.%d'%sys.version_info[:3],"
    "'sys_version':sys.version,'implementation':sys.implementation.name,'prefix':sys.prefix,"
    "'base_prefix':getattr(sys,'base_prefix',sys.prefix),'bits':sys.maxsize.bit_length()+1,"
    "'path':sys.path,'purelib':p.get('purelib'),'platlib':p.get('platlib'),"
    "'stdlib':p.get('stdlib'),'platstdlib':p.get('platstdlib')}))\n"
)
#: Where system-wide and board-image installs put distributions (scanned after the envs).
SYSTEM_SITE_GLOBS = (
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/lib64/python3*/site-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/local/lib64/python3*/site-packages",
)
_DIST_RE = lazy(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[^-]+?)"
                r"(?:-py\d[\d.]*)?(?:-[^-]+)?\.(?:dist-info|egg-info)$")
_SO_RE = lazy(r"\.so(\.[0-9][\w.]*)?$")


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name (`Torch_NPU` -> `torch-npu`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Dist:
    """An installed distribution: its `.dist-info`/`.egg-info` folder in a site directory."""

    name: str
    norm: str
    version: Optional[str]
    path: str
    site: str

    def read(self, host: Host, fn: str, max_bytes: int = 4 * 1024 * 1024) -> Optional[str]:
        """Text of a file in the dist-info folder (METADATA, RECORD), or None."""
        try:
            return host.read_text(posixpath.join(self.path, fn), max_bytes)
        except HostError:
            return None

    def files(self, host: Host, pattern: "re.Pattern[str]", hint: str = "") -> List[str]:
        """Absolute paths of the RECORD entries matching `pattern` (PEP 376/627).

        The RECORD is filtered as text (`hint` must occur in the line) before any row is
        parsed: torch's has 16 000 lines."""
        text = self.read(host, "RECORD", 32 * 1024 * 1024)
        if not text:
            return []
        out = []
        for line in text.splitlines():
            if hint and hint not in line:
                continue
            import csv  # RECORD rows are CSV (PEP 376); only for a framework's files

            for row in csv.reader([line]):
                if row and pattern.search(row[0]):
                    out.append(posixpath.normpath(posixpath.join(self.site, row[0])))
        return out

    def shared_objects(self, host: Host) -> List[str]:
        return self.files(host, _SO_RE, ".so")


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Env:
    """An application environment: its interpreter, where it was found (`origin`), its
    import path (`sites`), version, prefix and the distributions installed there."""

    python: str
    origin: str
    sites: List[str] = field(default_factory=list)
    version: Optional[str] = None
    sys_version: Optional[str] = None
    prefix: Optional[str] = None
    base_prefix: Optional[str] = None
    bits: Optional[int] = None
    error: Optional[str] = None
    dists: Dict[str, Dist] = field(default_factory=dict)
    source: str = ""

    def to_fact(self) -> Dict[str, Any]:
        d = {"python": self.python, "origin": self.origin, "version": self.version,
             "sys_version": self.sys_version, "prefix": self.prefix, "bits": self.bits,
             "virtual_env": (self.prefix != self.base_prefix) if self.prefix and self.base_prefix else None,
             "site_packages": list(self.sites), "distributions": len(self.dists),
             "error": self.error}
        return {k: v for k, v in d.items() if v is not None}


# -- which interpreters ------------------------------------------------------------------------
_CHOSEN: "weakref.WeakKeyDictionary[Host, List[str]]" = weakref.WeakKeyDictionary()


def _base(host: Host) -> Host:
    while getattr(host, "inner", None) is not None:   # capture.RecordingHost
        host = host.inner  # type: ignore[attr-defined]
    return host


def use_interpreters(host: Host, pythons: Sequence[str]) -> None:
    """Make `pythons` (`--python`: interpreters, or environment directories) the application
    environments of `host` for every probe, lock and capture run on it."""
    _CHOSEN[_base(host)] = [str(p) for p in pythons]


def snapshot_meta(host: Host) -> Dict[str, Any]:
    """The [snapshot] table of a snapshot's snapshot.toml ({} for a live host or none): the
    snapshot host's own reading (Host.snapshot_meta), under a capture's RecordingHost too."""
    base = _base(host)
    return {} if base.source == "live" else base.snapshot_meta()


def _strings(v: Any) -> List[str]:
    return [str(x) for x in v if isinstance(x, str)] if isinstance(v, list) else []


def interpreters(host: Host) -> List[Tuple[str, str]]:
    """(interpreter path, origin) in the order they are scanned, duplicates removed."""
    chosen = _CHOSEN.get(_base(host))
    out: List[Tuple[str, str]] = []
    if chosen:
        out = [(p, "--python") for p in chosen]
    elif host.source == "live":
        out = [(sys.executable, "npu-doctor")]
    else:
        # [snapshot] python = [{path, origin}] written by capture (a bare path: "snapshot")
        for item in snapshot_meta(host).get("python") or []:
            if isinstance(item, str):
                out.append((item, "snapshot"))
            elif isinstance(item, dict) and isinstance(item.get("path"), str):
                out.append((item["path"], str(item.get("origin") or "snapshot")))
    if not chosen:
        try:
            env = host.environ()
        except HostError:
            env = {}
        for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            if env.get(var):
                out.append((posixpath.join(env[var], "bin", "python"), var))
    seen, uniq = set(), []
    for p, why in out:
        if p not in seen:
            seen.add(p)
            uniq.append((p, why))
    return uniq


# -- asking an interpreter -----------------------------------------------------------------------
Runner = Callable[..., CommandResult]


def _interpreter_of(host: Host, path: str) -> str:
    """An environment directory given instead of its interpreter -> its bin/python."""
    if host.is_dir(path):
        for cand in ("bin/python3", "bin/python"):
            p = posixpath.join(path, cand)
            if host.exists(p):
                return p
    return path


def _ask(host: Host, env: Env, exe: str, run: Runner) -> Dict[str, Any]:
    """QUERY_SCRIPT's answer ({} with env.error set when there is none)."""
    argv = [exe, "-c", QUERY_SCRIPT]
    try:
        res = run(argv, timeout=QUERY_TIMEOUT_S)
        env.source = res.source or "$ " + exe
        if res.timed_out:
            env.error = f"{exe} did not answer within {QUERY_TIMEOUT_S:g} s"
        elif res.returncode != 0:
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
            env.error = f"{exe} exited {res.returncode}: {last[0][:160]}"
        else:
            data = ast.literal_eval(res.stdout.strip().splitlines()[-1])
            if not isinstance(data, dict):
                raise ValueError("not an object")
            return data
    except HostError as e:
        env.error = f"{exe}: {e}"
    except (ValueError, SyntaxError, IndexError, MemoryError, RecursionError) as e:
        env.error = f"{exe}: unreadable answer ({e})"
    return {}


def _ask_remembered(host: Host, env: Env, exe: str, run: Runner) -> Dict[str, Any]:
    """_ask, or its answer from an earlier run while nothing it depends on changed
    (npu_doctor.pyenvcache)."""
    from . import pyenvcache

    environ = host.environ()
    data = pyenvcache.load(exe, environ)
    if data is not None:
        env.source = f"$ {exe} -c <query> (answer of an earlier run; interpreter and sites unchanged)"
        return data
    data = _ask(host, env, exe, run)
    if data:
        pyenvcache.save(exe, environ, data)
    return data


@lru_cache(maxsize=1)
def _own_sysconfig_paths() -> Dict[str, str]:
    # fixed for the life of the process; four probes ask (0.4 ms each after the import)
    import sysconfig

    try:
        return dict(sysconfig.get_paths())
    except Exception:  # a broken sysconfig data module: as the query script does
        return {}


def own_answer() -> Dict[str, Any]:
    """What QUERY_SCRIPT prints, for the interpreter running npu-doctor, from this process.
    sys.path[0] (the script's directory, '' for `-c`) is left out as the query's '' is."""
    p = _own_sysconfig_paths()
    path = list(sys.path)
    if path and not getattr(sys.flags, "safe_path", False):
        path = path[1:]
    return {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
            "sys_version": sys.version, "implementation": sys.implementation.name,
            "prefix": sys.prefix, "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "bits": sys.maxsize.bit_length() + 1, "path": path, "purelib": p.get("purelib"),
            "platlib": p.get("platlib"), "stdlib": p.get("stdlib"), "platstdlib": p.get("platstdlib")}


def query(host: Host, python: str, origin: str = "--python", run: Optional[Runner] = None) -> Env:
    """Ask one interpreter for its paths; on failure fall back to globbing its prefix."""
    exe = _interpreter_of(host, python)
    env = Env(python=exe, origin=origin)
    if origin == "npu-doctor" and exe == sys.executable and host.source == "live" \
            and _base(host) is host:
        # npu-doctor's own interpreter on this machine (not under `capture`, which records
        # the command): the answer is this process's, without starting a second interpreter
        # (~10 ms of CPU, and 20-40 ms that two probes wait for)
        data, env.source = own_answer(), f"sys.path of {exe} (this process)"
    elif host.source == "live" and _base(host) is host:
        data = _ask_remembered(host, env, exe, run or host.run)
    else:
        data = _ask(host, env, exe, run or host.run)
    if data:
        env.version = data.get("version")
        env.sys_version = str(data.get("sys_version") or "").replace("\n", " ") or None
        env.prefix, env.base_prefix = data.get("prefix"), data.get("base_prefix")
        env.bits = data.get("bits") if isinstance(data.get("bits"), int) else None
        skip = {data.get("stdlib"), data.get("platstdlib")}
        for p in _strings(data.get("path")) + [x for x in (data.get("purelib"), data.get("platlib")) if x]:
            if (p and p.startswith("/") and p not in skip and not p.endswith((".zip", "lib-dynload"))
                    and p not in env.sites):
                env.sites.append(p)
    else:
        # the interpreter cannot be run here (other architecture, snapshot without its
        # answer): its prefix is two levels above bin/python
        prefix = posixpath.dirname(posixpath.dirname(exe))
        env.prefix = prefix
        for pat in ("lib/python3*/site-packages", "lib64/python3*/site-packages",
                    "lib/python3/dist-packages"):
            env.sites.extend(host.glob(posixpath.join(prefix, pat)))
        env.source = prefix
    return env


def scan_dists(host: Host, dirs: Iterable[str], into: Optional[Dict[str, Dist]] = None) -> Dict[str, Dist]:
    """{normalised name: Dist} of the .dist-info / .egg-info folders in `dirs`; the first
    directory holding a name wins (as at import). A bare `NAME.egg-info` takes its version
    from PKG-INFO."""
    found: Dict[str, Dist] = into if into is not None else {}
    for d in dirs:
        try:
            names = host.listdir(d)
        except HostError:
            continue
        for entry in names:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            m = _DIST_RE.match(entry)
            path = posixpath.join(d, entry)
            if m:
                name, version = m.group("name"), m.group("version")
            else:
                name = entry.rsplit(".", 1)[0]
                meta = host.read_attr(posixpath.join(path, "PKG-INFO")) or ""
                vm = re.search(r"^Version:\s*(\S+)", meta, re.M)
                version = vm.group(1) if vm else None
            norm = normalize(name)
            if norm not in found:
                found[norm] = Dist(name, norm, version, path, d)
    return found


def environments(host: Host, run: Optional[Runner] = None) -> List[Env]:
    """The application environments of `host`, each with its distributions. Pass a probe's
    `ctx.run` as `run` so one check asks each interpreter once."""
    out: List[Env] = []
    seen_prefix = set()
    for python, origin in interpreters(host):
        env = query(host, python, origin, run)
        key = (env.prefix, tuple(env.sites))
        if env.prefix and key in seen_prefix:
            continue
        seen_prefix.add(key)
        env.dists = scan_dists(host, env.sites)
        out.append(env)
    return out


def site_dirs(host: Host, envs: Optional[List[Env]] = None, extra_globs: Sequence[str] = (),
              run: Optional[Runner] = None) -> List[str]:
    """Every directory scanned for distributions: the environments' import paths, the site
    directories an older snapshot recorded (`[snapshot] python_paths`), then the system-wide
    ones and `extra_globs`."""
    envs = environments(host, run) if envs is None else envs
    dirs = env_sites(envs)
    dirs += _strings(snapshot_meta(host).get("python_paths"))
    for pat in tuple(SYSTEM_SITE_GLOBS) + tuple(extra_globs):
        dirs += host.glob(pat)
    out: List[str] = []
    for d in dirs:
        if d and d not in out:
            out.append(d)
    return out


def find_dists(host: Host, patterns: Sequence[str], dirs: Sequence[str]) -> Dict[str, Dist]:
    """{normalised name: Dist} of the distributions in `dirs` (first directory wins) whose
    normalised name matches one of the fnmatch `patterns`."""
    pats = [normalize(p) if not any(c in p for c in "*?[") else p.lower() for p in patterns]
    alld = scan_dists(host, dirs)
    return {k: v for k, v in sorted(alld.items()) if any_match(k, pats)}


def env_sites(envs: Sequence[Env]) -> List[str]:
    """The import-path directories of the environments, first environment first."""
    out: List[str] = []
    for e in envs:
        out.extend(s for s in e.sites if s not in out)
    return out


__all__ = ["Dist", "Env", "normalize", "use_interpreters", "interpreters", "query", "scan_dists",
           "environments", "site_dirs", "find_dists", "env_sites", "snapshot_meta", "SYSTEM_SITE_GLOBS"]
