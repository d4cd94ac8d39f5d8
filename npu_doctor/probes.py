"""The probe engine: probe specs (data) run concurrently against a Host.

A probe spec is a `[[probe]]` table in `probes/*.toml`:

```toml
[[probe]]
id = "os-release"            # stable, kebab-case
area = "system"              # the report line it belongs to
title = "Operating system"
collector = "os_release"     # named collector (npu_doctor.collectors), or:
# read = "/etc/os-release"   # a file ...
# run = ["npu-smi", "info"]  # ... or a command (argv, never a shell)
# parser = "os_release"      # pure parser for read/run output
# into = "os"                # where the parsed dict goes in the facts tree
timeout_s = 5                # whole-probe limit (and each command's)
fast = false                 # sampled by `watch` every interval
[probe.args]                 # free-form, passed to the collector as ctx.args
```

Each probe ends `ok`, `no_data` (nothing of that kind on this host: not an error) or `error`
(missing tool, permission denied, timeout, unparsable output) with a reason and a duration.
A failing probe never stops the run.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import registry
from .datafiles import read_toml
from .errors import AccessDenied, ConfigError, HostError
from .facts import Facts
from .host import CommandResult, Host
from .lazyregex import LazyRegex, compile_checked
from .resources import data_files

SPEC_KEYS = {"id", "area", "title", "collector", "read", "run", "parser", "into", "timeout_s",
             "fast", "args", "description", "override"}
DEFAULT_TIMEOUT_S = 5.0
#: Longest any one command may run by default (seconds); a hung vendor tool costs this.
COMMAND_TIMEOUT_S = 15.0


class NoData(Exception):
    """Raised by a collector: nothing of this kind exists on this host (status no_data)."""


class ProbeError(Exception):
    """Raised by a collector or parser: the probe could not produce its facts."""


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class ProbeSpec:
    """One `[[probe]]` of probes/*.toml: a collector, or a file to read / argv to run and the
    parser of its output; `timeout_s` in seconds, `fast` = part of `watch`'s samples."""

    id: str
    area: str = "system"
    title: str = ""
    collector: Optional[str] = None
    read: Optional[str] = None
    run: Optional[List[str]] = None
    parser: Optional[str] = None
    into: Optional[str] = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    fast: bool = False
    args: Dict[str, Any] = field(default_factory=dict)
    file: str = ""
    override: bool = False


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class ProbeResult:
    """What one probe did: status ok | no_data | error, its facts, and how long it ran (s)."""

    id: str
    status: str  # ok | no_data | error
    error: Optional[str] = None
    error_kind: Optional[str] = None  # missing-tool | access-denied | timeout | parse | failed
    duration_s: float = 0.0
    facts: Facts = field(default_factory=Facts)
    area: str = "system"

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.id, "status": self.status,
                             "duration_s": round(self.duration_s, 4)}
        if self.error:
            d["error"] = self.error
        if self.error_kind:
            d["error_kind"] = self.error_kind
        return d


class CommandCache:
    """Runs each argv once per check, shared by the probes of that check (thread-safe).

    Hangs cost one timeout: each argv runs with one limit whoever asks (the timeout_s of the
    `run = [...]` spec of that argv, else the call site's `timeout`, else COMMAND_TIMEOUT_S;
    a probe stops waiting at its own timeout_s, in probe_runner), and once a command of this check has timed out, commands started later
    get only what is left of COMMAND_TIMEOUT_S from the start of the check (at least
    MIN_LATE_TIMEOUT_S), so tools hung one after another do not add up. `inside()` tells the
    runner how many probe threads are blocked in a command for over BLOCKED_AFTER_S, so a
    blocked worker does not hold the probes queued behind it.
    """

    MIN_LATE_TIMEOUT_S = 1.0
    BLOCKED_AFTER_S = 0.1

    def __init__(self, host: Host) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._results: Dict[Tuple[str, ...], Any] = {}
        self._events: Dict[Tuple[str, ...], threading.Event] = {}
        self._t0 = time.monotonic()
        self._hung = False
        self._inside: Dict[int, float] = {}
        #: argv -> its limit, from the `run = [...]` specs (their timeout_s, at most
        #: COMMAND_TIMEOUT_S); see limit_from()
        self.limits: Dict[Tuple[str, ...], float] = {}
        #: results whose output was cut (CommandResult.cut): the `truncated` facts
        self.cut: List[CommandResult] = []

    def limit_from(self, specs: Iterable["ProbeSpec"]) -> None:
        """Take each `run = [...]` spec's timeout_s as the limit of its argv, whichever probe
        runs that argv (the smallest when two specs run the same one)."""
        for spec in specs:
            if spec.run:
                key = tuple(spec.run)
                lim = min(spec.timeout_s, COMMAND_TIMEOUT_S)
                self.limits[key] = min(lim, self.limits.get(key, lim))

    def blocked(self) -> int:
        """Threads waiting in a command for longer than BLOCKED_AFTER_S."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for t in self._inside.values() if now - t > self.BLOCKED_AFTER_S)

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        key = tuple(argv)
        me = threading.get_ident()
        timeout = self.limits.get(key, timeout)
        with self._lock:
            ev = self._events.get(key)
            owner = ev is None
            if owner:
                ev = self._events[key] = threading.Event()
            if self._hung:
                timeout = min(timeout, max(self.MIN_LATE_TIMEOUT_S,
                                           self._t0 + COMMAND_TIMEOUT_S - time.monotonic()))
            self._inside[me] = time.monotonic()
        try:
            if owner:
                try:
                    ran = self._results[key] = self.host.run(argv, timeout=timeout)
                    if ran.timed_out:
                        self._hung = True
                    if ran.cut:
                        self.cut.append(ran)
                except HostError as e:
                    self._results[key] = e
                finally:
                    ev.set()  # type: ignore[union-attr]  # created above when owner
            else:
                ev.wait(timeout + 1.0)  # type: ignore[union-attr]
        finally:
            with self._lock:
                self._inside.pop(me, None)
        res = self._results.get(key)
        if isinstance(res, HostError):
            raise res
        if res is None:
            raise ProbeError(f"{' '.join(argv)}: no result")
        return res


class ProbeContext:
    """What a collector gets: the host, its spec, a facts partial, and recording helpers."""

    def __init__(self, host: Host, spec: ProbeSpec, commands: CommandCache,
                 options: Optional[Dict[str, Any]] = None) -> None:
        self.host = host
        self.spec = spec
        self.args = spec.args
        #: run-wide options: sample_s (the --sample window in seconds, 0 = never sleep)
        self.options = options or {}
        self.facts = Facts()
        self._commands = commands

    def read(self, path: str) -> Optional[str]:
        """Stripped text of a file or None when missing; AccessDenied is recorded and None
        returned, so one unreadable file does not sink the whole probe."""
        try:
            return self.host.read_text(path).strip().strip("\x00")
        except AccessDenied:
            self.denied(path)
            return None
        except HostError:
            return None

    def read_raw(self, path: str) -> str:
        """Whole text of a file. Raises NotFound, AccessDenied, HostError."""
        return self.host.read_text(path)

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        """Run a command (cached per check). Raises CommandNotFound.

        The default limit is COMMAND_TIMEOUT_S for every probe that asks (one limit per argv);
        the probe itself stops waiting at its timeout_s (probe_runner).
        """
        return self._commands.run(list(argv), timeout or COMMAND_TIMEOUT_S)

    def denied(self, path: str, check: Optional[str] = None) -> None:
        """Record that something could not be read as this user (insufficient-privileges)."""
        lst = self.facts.data.setdefault("access", {}).setdefault("denied", [])
        if not any(d.get("path") == path for d in lst):
            lst.append({"path": path, "probe": self.spec.id, "check": check or self.spec.title})


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Signature:
    """A log line that means something: `[[signature]]` in probes/*.toml.

    ```toml
    [[signature]]
    id = "glibc-version-not-found"      # what log_events[].signature will say
    scope = "runtime"                   # kernel (dmesg) | runtime (logs/, --log) | any
    regex = "version `(?P<needed>GLIBC_[0-9.]+)' not found \\(required by (?P<by>[^)]+)\\)"
    unless = "..."                      # optional: a line this regex finds is not an event
    [signature.fields]                  # constant fields added to each event
    family = "glibc"
    ```
    Every match becomes a `log_events[]` fact: {signature, scope, source, line_no, line,
    ...named groups, ...fields}. `unless` names the contexts where the same words are expected
    noise (a loader that tries optional plugins and logs each one it cannot open).
    """

    id: str
    scope: str
    regex: LazyRegex
    fields: Dict[str, Any]
    file: str = ""
    unless: Optional[LazyRegex] = None
    #: the regex's literal prefilter needles (catalog.logtext.literal_needles; None: none, try
    #: every line), found at load so a configuration read back from the cache has them
    needles: Optional[List[str]] = field(init=False, default=None)

    def __post_init__(self) -> None:
        from .catalog.logtext import literal_needles

        self.needles = literal_needles(self.regex.pattern, self.regex.flags)


SIGNATURE_KEYS = {"id", "scope", "regex", "fields", "description", "flags", "unless"}


def _load_signatures(data: Dict[str, Any], path: str) -> List[Signature]:
    out = []
    for n, raw in enumerate(data.get("signature", [])):
        sid = raw.get("id") if isinstance(raw, dict) else None
        where = f"{path}: signature {sid or '#' + str(n + 1)}"
        if not isinstance(raw, dict) or not isinstance(sid, str) or not sid:
            raise ConfigError(f"{where}: missing id")
        unknown = set(raw) - SIGNATURE_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        scope = raw.get("scope", "any")
        if scope not in ("kernel", "runtime", "any"):
            raise ConfigError(f"{where}: scope must be kernel, runtime or any")
        flags = re.IGNORECASE if "i" in str(raw.get("flags", "")) else 0
        if not raw.get("regex"):
            raise ConfigError(f"{where}: missing regex")
        rx = compile_checked(raw["regex"], flags, where)
        fields = raw.get("fields", {})
        if not isinstance(fields, dict):
            raise ConfigError(f"{where}: fields must be a table")
        unless = compile_checked(raw["unless"], flags, f"{where}: unless") if raw.get("unless") else None
        out.append(Signature(sid, scope, rx, dict(fields), path, unless))
    return out


def _load_spec_file(path: str) -> List[ProbeSpec]:
    data = read_toml(path)
    unknown_top = set(data) - {"probe", "signature"}
    if unknown_top:
        raise ConfigError(f"{path}: unknown table {sorted(unknown_top)[0]!r} (expected [[probe]])")
    for table in ("probe", "signature"):
        if not isinstance(data.get(table, []), list):
            raise ConfigError(f"{path}: `{table}` must be an array of tables ([[{table}]])")
    _SIGNATURES_BY_FILE[path] = _load_signatures(data, path)
    specs = []
    for n, raw in enumerate(data.get("probe", [])):
        pid = raw.get("id") if isinstance(raw, dict) else None
        where = f"{path}: probe {pid or '#' + str(n + 1)}"
        if not isinstance(raw, dict) or not isinstance(pid, str) or not pid:
            raise ConfigError(f"{where}: missing id")
        unknown = set(raw) - SPEC_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        if not raw.get("collector") and not (raw.get("read") or raw.get("run")):
            raise ConfigError(f"{where}: needs collector, read or run")
        if (raw.get("read") or raw.get("run")) and not raw.get("parser") and not raw.get("collector"):
            raise ConfigError(f"{where}: read/run needs a parser")
        if raw.get("run") is not None and not (
                isinstance(raw["run"], list) and all(isinstance(a, str) for a in raw["run"])):
            raise ConfigError(f"{where}: run must be a list of strings (argv)")
        if raw.get("collector") and raw["collector"] not in registry.COLLECTORS:
            raise ConfigError(f"{where}: unknown collector {raw['collector']!r}")
        if raw.get("parser") and raw["parser"] not in registry.PARSERS:
            raise ConfigError(f"{where}: unknown parser {raw['parser']!r}")
        try:
            timeout = float(raw.get("timeout_s", DEFAULT_TIMEOUT_S))
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: timeout_s must be a number") from None
        if not 0 < timeout <= 600:
            raise ConfigError(f"{where}: timeout_s must be more than 0 and at most 600 seconds")
        for flag in ("fast", "override"):
            if not isinstance(raw.get(flag, False), bool):
                raise ConfigError(f"{where}: {flag} must be true or false")
        if not isinstance(raw.get("args", {}), dict):
            raise ConfigError(f"{where}: args must be a table ([probe.args])")
        specs.append(ProbeSpec(
            id=pid, area=raw.get("area", "system"), title=raw.get("title", pid),
            collector=raw.get("collector"), read=raw.get("read"), run=raw.get("run"),
            parser=raw.get("parser"), into=raw.get("into"), timeout_s=timeout,
            fast=bool(raw.get("fast", False)), args=dict(raw.get("args", {})), file=path,
            override=bool(raw.get("override", False))))
    return specs


_SIGNATURES_BY_FILE: Dict[str, List[Signature]] = {}


def load_signatures(extra_dirs: Iterable[str] = ()) -> List[Signature]:
    """Every `[[signature]]` of the shipped probes/ and --probes DIRs. Raises ConfigError."""
    out: List[Signature] = []
    for path in data_files("probes", extra_dirs):
        if path not in _SIGNATURES_BY_FILE:
            _load_spec_file(path)
        out.extend(_SIGNATURES_BY_FILE[path])
    return out


def load_specs(extra_dirs: Iterable[str] = ()) -> List[ProbeSpec]:
    """All probe specs: the shipped `probes/` then each --probes DIR. Raises ConfigError,
    also for an id defined twice: a site probe replaces a shipped one only when it says
    `override = true` (one that did so silently would hide what the shipped one checks)."""
    registry.load_all()
    by_id: Dict[str, ProbeSpec] = {}
    for path in data_files("probes", extra_dirs):
        for spec in _load_spec_file(path):
            if spec.id in by_id and not spec.override:
                raise ConfigError(f"{path}: probe {spec.id}: already defined in {by_id[spec.id].file} "
                                  "(give your probe its own id, or say `override = true` to replace it)")
            if spec.override and spec.id not in by_id:
                raise ConfigError(f"{path}: probe {spec.id}: `override = true` but there is no such "
                                  "probe to replace")
            by_id[spec.id] = spec
    return list(by_id.values())


def env_override_dirs(var: str) -> List[str]:
    val = os.environ.get(var, "")
    return [d for d in val.split(os.pathsep) if d]
