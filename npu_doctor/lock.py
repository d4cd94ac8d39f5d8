"""`npu-doctor lock` and `npu-doctor verify`: a pinned environment manifest and its drift check.

What is locked is data, not code: `npu_doctor/lockspec.toml` lists the fact paths (with `*`
for any table key and `[*]` for any list element), the keyed lists, the facts holding file
paths to hash, the Python distributions to pin, and a severity per class of difference.

Lockfile layout (TOML, written with tomli-w, schema `npu-doctor/lock/v1`)::

    [lock]
    schema = "npu-doctor/lock/v1"
    tool_version = "0.1.0"
    arch = "aarch64"                      # `arch` fact, or this machine's on a live host;
                                          # absent when unknown (verify then says so)
    digest = "sha256:..."                 # over everything else: detects truncation/corruption
    [os]                                  # every locked fact at its own path ...
    id = "debian"
    [accelerators."rknpu@/sys/devices/platform/fdab0000.npu"]   # ... list elements by key
    driver = {version = "0.9.8"}
    [drivers.rknpu]
    version = "0.9.8"
    [python.packages]
    onnxruntime = "1.17.0"
    [files."/usr/lib/librknnrt.so"]
    kind = "library"
    sha256 = "..."
    size = 7100040

Same facts in, same bytes out: keys are sorted, nothing depends on time or run order, and
there is no timestamp (a lock of an unchanged machine is byte-identical). The file is
written atomically (temp file in the same directory, fsync, rename), so a lock killed
mid-write leaves the previous file intact. An output path that is a symlink is followed and
its final target replaced (the link stays); one that exists and is not a regular file
(device, fifo, socket, directory) is refused with an `OutputPathError` (exit 2).

`verify` builds the same manifest for the host (or snapshot) now and reports each difference
as a `lock-drift` finding (rule in rules/lock.toml) with the locked and the current value and
the severity of its class. A lockfile that is unreadable, not TOML, truncated (digest
mismatch), of an unknown schema or for another architecture is a `LockfileError`
(exit status 2, one line).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from . import __version__
from .errors import ConfigError, HostError, NpuDoctorError
from .facts import Facts
from .host import Host
from .rules import SEVERITIES, Finding
from .tomlcompat import tomllib

LOCK_SCHEMA = "npu-doctor/lock/v1"
SPEC_SCHEMA = "npu-doctor/lockspec/v1"
_SCHEMA_RE = re.compile(r"^npu-doctor/lock/v(\d+)$")
#: Test hook: seconds to sleep between writing the temp file and renaming it into place.
TEST_DELAY_ENV = "NPU_DOCTOR_LOCK_TEST_DELAY_S"
HASH_CHUNK = 1 << 20
DRIFT_KINDS = ("changed", "removed", "added")

LockPath = Tuple[str, ...]


class LockfileError(NpuDoctorError):
    """The lockfile cannot be used: unreadable, not TOML, truncated, unknown schema, other
    architecture. The message is one line; the CLI exits 2."""


class OutputPathError(NpuDoctorError):
    """An output path that must not be written: it exists and is not a regular file (a
    device such as /dev/full, a fifo, a socket, a directory) or is a symlink loop. One line;
    the CLI exits 2."""


def plural(n: int, noun: str, many: Optional[str] = None) -> str:
    """`1 finding`, `2 findings`, `0 findings` (`many` for irregular plurals)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


_KIND_NAMES = (("S_ISDIR", "a directory"), ("S_ISCHR", "a character device"),
               ("S_ISBLK", "a block device"), ("S_ISFIFO", "a fifo"), ("S_ISSOCK", "a socket"),
               ("S_ISLNK", "a symlink that cannot be resolved (loop)"))


def resolve_output(path: str, what: str = "output") -> str:
    """The absolute path a file output really goes to: symlinks followed to their final target
    (which may not exist yet: a dangling link is written through). Raises OutputPathError
    when that target exists and is not a regular file, or the links loop."""
    real = os.path.realpath(os.path.abspath(path))
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return real
    except OSError as e:
        raise OutputPathError(f"{path}: cannot write {what} ({e.strerror or e})") from None
    if stat.S_ISREG(st.st_mode):
        return real
    kind = next((name for test, name in _KIND_NAMES if getattr(stat, test)(st.st_mode)),
                "a special file")
    via = f" (via symlink to {real})" if real != os.path.abspath(path) else ""
    raise OutputPathError(f"{path}: refusing to write {what}: it is {kind}{via}, not a regular "
                          "file; give a file path" + (" or `-o -` for stdout" if what == "lockfile"
                                                     else ""))


# -- the spec --------------------------------------------------------------------------------
@dataclass
class Collection:
    path: str
    key: List[str]
    prefix: Optional[str]
    cls: str


@dataclass
class PathSpec:
    facts: str
    tokens: List[str]
    cls: str
    kind: str = ""


@dataclass
class LockSpec:
    classes: Dict[str, Dict[str, str]]
    collections: Dict[str, Collection]
    fields: List[PathSpec]
    hashes: List[PathSpec]
    python_class: str
    python_packages: List[str]
    file: str = ""

    def severity(self, cls: str, kind: str) -> str:
        return self.classes.get(cls, {}).get(kind, "warning")


def default_spec_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lockspec.toml")


_TOKEN_RE = re.compile(r"\[\*\]|\[\d+\]|[^.\[\]]+")


def _pattern_tokens(pattern: str) -> List[str]:
    return _TOKEN_RE.findall(pattern)


def load_spec(path: Optional[str] = None) -> LockSpec:
    """Read a lockspec (default: the shipped one). Raises ConfigError naming file and entry."""
    path = path or default_spec_path()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    if data.get("schema") != SPEC_SCHEMA:
        raise ConfigError(f"{path}: schema must be {SPEC_SCHEMA!r}")
    classes: Dict[str, Dict[str, str]] = {}
    for name, sev in data.get("class", {}).items():
        if not isinstance(sev, dict) or set(sev) - set(DRIFT_KINDS):
            raise ConfigError(f"{path}: class {name}: keys must be {', '.join(DRIFT_KINDS)}")
        for k, v in sev.items():
            if v not in SEVERITIES:
                raise ConfigError(f"{path}: class {name}: {k} must be error, warning or info")
        classes[name] = {k: sev.get(k, "warning") for k in DRIFT_KINDS}

    def cls_of(entry: Dict[str, Any], where: str) -> str:
        c = entry.get("class")
        if c not in classes:
            raise ConfigError(f"{path}: {where}: unknown class {c!r}")
        return c

    collections = {}
    for n, c in enumerate(data.get("collection", [])):
        where = f"collection #{n + 1}"
        if not isinstance(c.get("path"), str) or not isinstance(c.get("key"), list) or not c["key"]:
            raise ConfigError(f"{path}: {where}: needs path and a non-empty key list")
        collections[c["path"]] = Collection(c["path"], [str(k) for k in c["key"]],
                                            c.get("prefix"), cls_of(c, where))
    fields = []
    for n, f in enumerate(data.get("field", [])):
        where = f"field #{n + 1}"
        if not isinstance(f.get("facts"), str) or not f["facts"]:
            raise ConfigError(f"{path}: {where}: needs facts = \"path.pattern\"")
        fields.append(PathSpec(f["facts"], _pattern_tokens(f["facts"]), cls_of(f, where)))
    hashes = []
    for n, h in enumerate(data.get("hash", [])):
        where = f"hash #{n + 1}"
        if not isinstance(h.get("facts"), str) or not h["facts"]:
            raise ConfigError(f"{path}: {where}: needs facts = \"path.pattern\"")
        hashes.append(PathSpec(h["facts"], _pattern_tokens(h["facts"]), cls_of(h, where),
                               str(h.get("kind", "file"))))
    py = data.get("python", {})
    pkgs = py.get("packages", [])
    if not isinstance(pkgs, list) or not all(isinstance(p, str) for p in pkgs):
        raise ConfigError(f"{path}: python.packages must be a list of names")
    py_cls = cls_of(py, "python") if py else "package"
    return LockSpec(classes, collections, fields, hashes, py_cls,
                    [normalize_dist_name(p) for p in pkgs], path)


# -- walking the facts tree ------------------------------------------------------------------
def element_key(coll: Optional[Collection], elem: Any, index: int) -> str:
    """Stable key of one list element: `vendor@0000:5a:00.0`, `#3` when nothing identifies it."""
    if coll is not None and isinstance(elem, dict):
        for k in coll.key:
            v = elem.get(k)
            if v is not None and v != "":
                key = str(v) if k != "index" else f"#{v}"
                if coll.prefix and elem.get(coll.prefix) is not None:
                    key = f"{elem[coll.prefix]}@{key}"
                return key
        if coll.prefix and elem.get(coll.prefix) is not None:
            return f"{elem[coll.prefix]}#{index}"
    return f"#{index}"


def _keyed(items: List[Any], coll: Optional[Collection]) -> List[Tuple[str, int, Any]]:
    """(key, index, element) with duplicate keys made unique by a `~N` suffix."""
    seen: Dict[str, int] = {}
    out = []
    for i, el in enumerate(items):
        k = element_key(coll, el, i)
        if k in seen:
            seen[k] += 1
            k = f"{k}~{seen[k]}"
        else:
            seen[k] = 1
        out.append((k, i, el))
    return out


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or (
        isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v))


def _leaves_under(node: Any, lock: LockPath, fact: str) -> Iterator[Tuple[LockPath, str, Any]]:
    if isinstance(node, dict):
        for k in sorted(node):
            yield from _leaves_under(node[k], lock + (str(k),), f"{fact}.{k}")
    elif _scalar(node):
        yield lock, fact, node


def expand(tree: Dict[str, Any], tokens: List[str], spec: LockSpec,
           ) -> Iterator[Tuple[LockPath, str, Any]]:
    """Every (lock path, fact path, value) a pattern reaches in a facts tree."""

    def walk(node: Any, i: int, lock: LockPath, fact: str, names: str):
        if node is None:
            return
        if i == len(tokens):
            yield from _leaves_under(node, lock, fact)
            return
        tok = tokens[i]
        if tok == "[*]" or (tok.startswith("[") and tok[1:-1].isdigit()):
            if not isinstance(node, list):
                return
            coll = spec.collections.get(names)
            for key, idx, el in _keyed(node, coll):
                if tok != "[*]" and idx != int(tok[1:-1]):
                    continue
                yield from walk(el, i + 1, lock + (key,), f"{fact}[{idx}]", names)
        elif tok == "*":
            if isinstance(node, dict):
                for k in sorted(node):
                    yield from walk(node[k], i + 1, lock + (str(k),),
                                    f"{fact}.{k}" if fact else str(k), names)
        elif isinstance(node, dict) and tok in node:
            yield from walk(node[tok], i + 1, lock + (tok,), f"{fact}.{tok}" if fact else tok,
                            f"{names}.{tok}" if names else tok)

    yield from walk(tree, 0, (), "", "")


# -- Python distributions --------------------------------------------------------------------
def normalize_dist_name(name: str) -> str:
    """PEP 503 normalised distribution name (`Torch_NPU` -> `torch-npu`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dirs(host: Host, extra: Sequence[str] = ()) -> List[str]:
    """Directories scanned for *.dist-info: `extra`, then those of npu_doctor.pyenv (the
    application environments, a snapshot's recorded `python_paths`, the system ones)."""
    from .pyenv import site_dirs as env_site_dirs

    out: List[str] = []
    for d in list(extra) + env_site_dirs(host):
        if d and d not in out:
            out.append(d)
    return out


def _snapshot_meta(host: Host) -> Dict[str, Any]:
    """The [snapshot] table of a snapshot's snapshot.toml ({} for a live host or none)."""
    root = getattr(host, "root", None)
    if not root or host.source == "live":
        return {}
    try:
        with open(os.path.join(root, "snapshot.toml"), "rb") as f:
            meta = tomllib.load(f).get("snapshot", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def scan_python_packages(host: Host, patterns: Sequence[str],
                         dirs: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """{normalised name: version} of the distributions matching patterns, first dir wins
    (npu_doctor.pyenv reads the folder names; a bare `NAME.egg-info` its PKG-INFO). Read
    through the Host, so a snapshot answers from its fs/."""
    from .pyenv import find_dists

    found = find_dists(host, patterns, site_dirs(host) if dirs is None else dirs)
    return {k: d.version for k, d in found.items() if d.version is not None}


# -- hashing ---------------------------------------------------------------------------------
def file_digest(host: Host, path: str) -> Optional[Tuple[str, int]]:
    """(sha256 hex, size in bytes) of a host file, or None when it cannot be read.

    Streams through `Host.open_binary`, so a snapshot hashes its own fs/ copy; a file that
    `capture` kept only in part (the byte ranges the probes read) has the board's sha256 and
    size in snapshot.toml (`[[snapshot.sparse]]`), and those are used.
    """
    sparse = _snapshot_meta(host).get("sparse", [])
    if isinstance(sparse, list) and sparse:
        try:
            real = host.realpath(path)
        except HostError:
            real = path
        for entry in sparse:
            if isinstance(entry, dict) and entry.get("path") in (path, real) and entry.get("sha256"):
                return str(entry["sha256"]), int(entry.get("size", 0))
    h = hashlib.sha256()
    size = 0
    try:
        f = host.open_binary(path)
    except HostError:
        return None
    try:
        while True:
            chunk = f.read(HASH_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        f.close()
    return h.hexdigest(), size


# -- the manifest ----------------------------------------------------------------------------
def _nest(flat: Dict[LockPath, Any]) -> Dict[str, Any]:
    root: Dict[str, Any] = {}
    for parts in sorted(flat):
        node = root
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        if not isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = flat[parts]
    return _sorted(root)


def _sorted(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _sorted(d[k]) for k in sorted(d)}
    return d


def host_arch(facts: Facts, host: Host) -> Optional[str]:
    """The machine architecture (`aarch64`): the `arch` fact, else this machine's on a live
    host; None when neither tells (a snapshot without `uname -m` nor ELF binaries)."""
    arch = facts.get("arch")
    if arch and str(arch) != "unknown":
        return str(arch)
    if host.source == "live":
        return os.uname().machine or None
    return None


def build_manifest(facts: Facts, host: Host, spec: LockSpec) -> Dict[str, Any]:
    """The lockfile content (a plain dict, keys sorted, digest included) for these facts."""
    tree = facts.to_dict()
    flat: Dict[LockPath, Any] = {}
    for fs in spec.fields:
        for lock_path, _fact, value in expand(tree, fs.tokens, spec):
            flat[lock_path] = value
    files: Dict[str, Dict[str, Any]] = {}
    for hs in spec.hashes:
        for _lp, _fact, value in expand(tree, hs.tokens, spec):
            for p in (value if isinstance(value, list) else [value]):
                if not isinstance(p, str) or not p.startswith("/") or p in files:
                    continue
                got = file_digest(host, p)
                if got is None:
                    continue
                files[p] = {"kind": hs.kind, "sha256": got[0], "size": got[1]}
    packages = python_packages(facts, host, spec)
    body = _nest(flat)
    if packages:
        body.setdefault("python", {})["packages"] = packages
    if files:
        body["files"] = {k: files[k] for k in sorted(files)}
    body = _sorted(body)
    header: Dict[str, Any] = {"schema": LOCK_SCHEMA, "tool_version": __version__}
    arch = host_arch(facts, host)
    if arch:
        header["arch"] = arch
    header["digest"] = "sha256:" + _digest(header, body)
    out = {"lock": header}
    out.update(body)
    return out


def python_packages(facts: Facts, host: Host, spec: LockSpec) -> Dict[str, str]:
    """Pinned SDK distributions: the `python.packages` fact if a probe gave one, else a scan."""
    given = facts.get("python.packages")
    if isinstance(given, dict):
        items = {normalize_dist_name(k): str(v) for k, v in given.items() if v is not None}
    elif isinstance(given, list):
        items = {normalize_dist_name(str(p["name"])): str(p["version"]) for p in given
                 if isinstance(p, dict) and p.get("name") and p.get("version")}
    else:
        return scan_python_packages(host, spec.python_packages)
    return {k: v for k, v in sorted(items.items())
            if any(fnmatch.fnmatchcase(k, p) for p in spec.python_packages)}


def _digest(header: Dict[str, Any], body: Dict[str, Any]) -> str:
    h = {k: v for k, v in header.items() if k != "digest"}
    blob = json.dumps({"lock": h, "body": body}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def dumps(manifest: Dict[str, Any]) -> bytes:
    import tomli_w

    return tomli_w.dumps(manifest).encode("utf-8")


def write_atomic(path: str, data: bytes) -> None:
    """Write data to path so that a reader (or a crash) sees the old file or the new one,
    never a mix: temp file in the same directory, fsync, os.replace, fsync of the directory.
    A symlink is followed and its final target replaced (see `resolve_output`). Raises
    OutputPathError for a target that is not a regular file, OSError otherwise."""
    path = resolve_output(path, "lockfile")
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o644 & ~umask)
        delay = os.environ.get(TEST_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# -- reading a lockfile ----------------------------------------------------------------------
def read_lockfile(path: str) -> Dict[str, Any]:
    """Parse and validate a lockfile. Raises LockfileError with a one-line reason."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise LockfileError(f"{path}: cannot read lockfile ({e.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise LockfileError(f"{path}: not a lockfile (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as e:
        raise LockfileError(f"{path}: not a valid lockfile, truncated or corrupt ({e})") from None
    header = data.get("lock")
    if not isinstance(header, dict) or "schema" not in header:
        raise LockfileError(f"{path}: not an npu-doctor lockfile (no [lock] schema); "
                            "create one with `npu-doctor lock`")
    schema = header.get("schema")
    m = _SCHEMA_RE.match(str(schema))
    if not m:
        raise LockfileError(f"{path}: unknown lockfile schema {schema!r} (expected {LOCK_SCHEMA})")
    if schema != LOCK_SCHEMA:
        raise LockfileError(
            f"{path}: lockfile schema {schema} is not supported by npu-doctor {__version__}, "
            f"which reads {LOCK_SCHEMA}; upgrade npu-doctor or re-create the lock")
    body = {k: v for k, v in data.items() if k != "lock"}
    want = str(header.get("digest", ""))
    if not want.startswith("sha256:") or want[7:] != _digest(header, _sorted(body)):
        raise LockfileError(f"{path}: lockfile is truncated, corrupt or edited by hand (digest "
                            "mismatch), so it cannot be trusted; restore it from version control, "
                            "or re-create it by running `npu-doctor lock` on the validated board")
    return data


# -- comparing -------------------------------------------------------------------------------
@dataclass
class Drift:
    path: LockPath
    kind: str            # changed | removed | added
    old: Any
    new: Any
    cls: str
    severity: str
    #: other lock paths that changed the same way (one module version seen by two probes)
    also: List[LockPath] = field(default_factory=list)

    @property
    def display(self) -> str:
        return display_path(self.path)


_BARE_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def display_path(parts: Sequence[str]) -> str:
    """TOML dotted-key form: `accelerators."rknpu@0000:01:00.0".driver.version`."""
    return ".".join(p if _BARE_RE.match(p) else json.dumps(p, ensure_ascii=False) for p in parts)


def parse_ignore(pattern: str) -> List[str]:
    """Tokens of an --ignore pattern: dotted keys, "quoted keys", `*` / `[*]` for any key."""
    toks: List[str] = []
    i, n = 0, len(pattern)
    cur = ""
    while i < n:
        c = pattern[i]
        if c == '"':
            j = pattern.find('"', i + 1)
            while j != -1 and pattern[j - 1] == "\\":
                j = pattern.find('"', j + 1)
            if j == -1:
                raise ConfigError(f"--ignore {pattern}: unterminated quote")
            cur += json.loads(pattern[i:j + 1])
            i = j + 1
        elif c == ".":
            if cur:
                toks.append(cur)
            cur = ""
            i += 1
        elif c == "[":
            j = pattern.find("]", i)
            if j == -1:
                raise ConfigError(f"--ignore {pattern}: unterminated [")
            if cur:
                toks.append(cur)
            cur = ""
            inner = pattern[i + 1:j].strip('"')
            toks.append("*" if inner in ("*", "") or inner.isdigit() else inner)
            i = j + 1
        else:
            cur += c
            i += 1
    if cur:
        toks.append(cur)
    if not toks:
        raise ConfigError("--ignore needs a lock path such as sdks.cann.version")
    return toks


def ignored(path: LockPath, patterns: Sequence[List[str]]) -> bool:
    """A pattern matches a path it is a prefix of, each token a shell pattern on one key."""
    for toks in patterns:
        if len(toks) <= len(path) and all(fnmatch.fnmatchcase(p, t) for p, t in zip(path, toks)):
            return True
    return False


def _flatten(d: Dict[str, Any], prefix: LockPath = ()) -> Dict[LockPath, Any]:
    out: Dict[LockPath, Any] = {}
    for k, v in d.items():
        p = prefix + (str(k),)
        if isinstance(v, dict):
            out.update(_flatten(v, p))
        else:
            out[p] = v
    return out


def _lock_pattern_tokens(ps: PathSpec) -> List[str]:
    return ["*" if t == "[*]" or (t.startswith("[") and t[1:-1].isdigit()) else t
            for t in ps.tokens]


def classify(path: LockPath, spec: LockSpec) -> str:
    """The class of a lock path: python/files sections, then the first [[field]] it matches."""
    if path[:2] == ("python", "packages"):
        return spec.python_class
    if path and path[0] == "files":
        return "library"
    for fs in spec.fields:
        toks = _lock_pattern_tokens(fs)
        if len(toks) <= len(path) and all(fnmatch.fnmatchcase(p, t) if t == "*" else p == t
                                          for p, t in zip(path, toks)):
            return fs.cls
    return "os"


def diff(locked: Dict[str, Any], current: Dict[str, Any], spec: LockSpec,
         ignore: Sequence[str] = ()) -> List[Drift]:
    """Every difference between two manifests, graded by the spec, ignored paths left out."""
    pats = [parse_ignore(p) for p in ignore]
    old = _flatten({k: v for k, v in locked.items() if k != "lock"})
    new = _flatten({k: v for k, v in current.items() if k != "lock"})
    drifts: List[Drift] = []
    skip_prefixes: List[LockPath] = []
    # whole keyed elements (an accelerator, a file) appearing or disappearing: one finding each
    groups: List[Tuple[LockPath, str]] = [(tuple(c.path.split(".")), c.cls)
                                          for c in spec.collections.values()]
    groups.append((("files",), "files"))
    for base, cls in groups:
        n = len(base)
        old_keys = {p[n] for p in old if p[:n] == base and len(p) > n}
        new_keys = {p[n] for p in new if p[:n] == base and len(p) > n}
        for key in sorted(old_keys ^ new_keys):
            path = base + (key,)
            skip_prefixes.append(path)
            if ignored(path, pats):
                continue
            kind = "removed" if key in old_keys else "added"
            src = old if kind == "removed" else new
            val = {p[n + 1:]: v for p, v in src.items() if p[:n + 1] == path}
            grade = cls
            if cls == "files":
                kinds = [v for p, v in val.items() if p == ("kind",)]
                grade = "firmware" if kinds and kinds[0] == "firmware" else "library"
            summary = _element_summary(val)
            drifts.append(Drift(path, kind, summary if kind == "removed" else None,
                                summary if kind == "added" else None, grade,
                                spec.severity(grade, kind)))
    for path in sorted(set(old) | set(new)):
        if any(path[:len(s)] == s for s in skip_prefixes) or ignored(path, pats):
            continue
        if path[0] == "files" and path[-1] in ("size", "kind"):
            continue  # the sha256 decides; size follows it
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        kind = "changed" if (a is not None and b is not None) else ("removed" if b is None else "added")
        cls = classify(path, spec)
        if path[0] == "files":
            fkind = old.get(path[:-1] + ("kind",)) or new.get(path[:-1] + ("kind",))
            cls = "firmware" if fkind == "firmware" else "library"
        drifts.append(Drift(path, kind, a, b, cls, spec.severity(cls, kind)))
    order = {"error": 0, "warning": 1, "info": 2}
    drifts.sort(key=lambda d: (order[d.severity], len(d.path), d.path))
    # One change seen at several paths (drivers.rknpu.version and the accelerator's
    # driver.version) is one finding that names every path.
    merged: List[Drift] = []
    by_change: Dict[str, Drift] = {}
    for d in drifts:
        sig = json.dumps([d.kind, d.cls, d.old, d.new, d.path[-1]], default=str, sort_keys=True)
        if d.kind == "changed" and sig in by_change:
            by_change[sig].also.append(d.path)
            continue
        by_change.setdefault(sig, d)
        merged.append(d)
    merged.sort(key=lambda d: (order[d.severity], d.path))
    return merged


def _element_summary(val: Dict[LockPath, Any]) -> str:
    parts = []
    for p in sorted(val):
        if p == ("sha256",):
            parts.append(f"sha256 {str(val[p])[:12]}")
        elif p[-1] in ("name", "version", "vendor"):
            parts.append(f"{'.'.join(p)}={val[p]}")
    return ", ".join(parts) or "present"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def drift_message(d: Drift) -> str:
    if d.kind == "changed":
        also = "".join(f"; also {display_path(p)}" for p in d.also)
        return f"{d.display} changed from {_fmt(d.old)} to {_fmt(d.new)} ({d.cls}{also})"
    if d.kind == "removed":
        return f"{d.display} was {_fmt(d.old)} in the lock and is now gone or unknown ({d.cls})"
    return f"{d.display} is new: {_fmt(d.new)}, not in the lock ({d.cls})"


def drift_findings(drifts: Sequence[Drift], lock_path: str, title: str = "",
                   rule_fixes: Sequence[Dict[str, Any]] = ()) -> List[Finding]:
    """One `lock-drift` finding per difference, with the locked and current value as evidence."""
    out = []
    for d in drifts:
        ev = [{"fact": display_path(p), "value": d.new, "locked": d.old, "change": d.kind,
               "class": d.cls, "source": lock_path} for p in [d.path] + d.also]
        fixes = [{"kind": "now", "text": _fix_text(d, lock_path)}] + list(rule_fixes)
        out.append(Finding("lock-drift", d.severity, title or "The environment differs from the lockfile",
                           drift_message(d), d.display, ev, fixes))
    return out


def _fix_text(d: Drift, lock_path: str) -> str:
    if d.kind == "added":
        return (f"If {d.display} belongs to the validated stack, re-lock: `npu-doctor lock -o "
                f"{lock_path}`; otherwise remove it, or `--ignore '{d.display}'`.")
    back = f"restore {d.display} to {_fmt(d.old)}" if d.kind == "changed" else \
        f"bring {d.display} back ({_fmt(d.old)})"
    return (f"If the change is intended, re-lock with `npu-doctor lock -o {lock_path}`; otherwise "
            f"{back}, or let it float with `--ignore '{d.display}'`.")


def _arch_of(manifest: Dict[str, Any]) -> Optional[str]:
    a = manifest.get("lock", {}).get("arch")
    return str(a) if a and str(a) != "unknown" else None   # "unknown": locks before 0.1.1


def check_arch(locked: Dict[str, Any], current: Dict[str, Any], lock_path: str,
               where: str = "this host") -> Optional[str]:
    """Compare the architectures of a lock and of the host now.

    Raises LockfileError (exit 2) when both are known and differ. Returns None when they
    were compared and match, else a one-line note saying why they could not be compared
    (verify prints it in its report; it is not a difference and does not change the exit
    status)."""
    a, b = _arch_of(locked), _arch_of(current)
    if a and b:
        if a != b:
            raise LockfileError(f"{lock_path}: lockfile is for architecture {a}, {where} is {b}; "
                                "a lock pins one kind of machine")
        return None
    if not a and not b:
        why = f"neither the lockfile nor {where} records one"
    elif not a:
        why = f"the lockfile records none ({where} is {b})"
    else:
        why = f"{where} does not tell it (no `uname -m`, /proc/sys/kernel/arch or ELF binary); " \
              f"the lockfile is for {a}"
    return f"architecture not compared: {why}"


def count_locked(manifest: Dict[str, Any]) -> int:
    return len(_flatten({k: v for k, v in manifest.items() if k != "lock"}))


__all__ = ["LockSpec", "LockfileError", "Drift", "load_spec", "build_manifest", "dumps",
           "write_atomic", "read_lockfile", "diff", "drift_findings", "check_arch",
           "display_path", "parse_ignore", "LOCK_SCHEMA", "OutputPathError", "resolve_output",
           "plural"]
