"""The lockfile itself: schema, digest, serialisation and validated reading."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict

from .. import __version__
from ..errors import NpuDoctorError
from ..tomlcompat import tomllib
from ..lazyregex import lazy

LOCK_SCHEMA = "npu-doctor/lock/v1"
_SCHEMA_RE = lazy(r"^npu-doctor/lock/v(\d+)$")


class LockfileError(NpuDoctorError):
    """The lockfile cannot be used: unreadable, not TOML, of the wrong shape, unknown schema,
    other architecture. The message is one line; the CLI exits 2. (A digest that does not
    match is not an error: see `digest_state`.)"""



def _sorted(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _sorted(d[k]) for k in sorted(d)}
    return d

def _digest(header: Dict[str, Any], body: Dict[str, Any]) -> str:
    h = {k: v for k, v in header.items() if k != "digest"}
    blob = json.dumps({"lock": h, "body": body}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def dumps(manifest: Dict[str, Any]) -> bytes:
    import tomli_w

    return tomli_w.dumps(manifest).encode("utf-8")

# -- reading a lockfile ----------------------------------------------------------------------
def read_lockfile(path: str) -> Dict[str, Any]:
    """Parse and validate a lockfile (schema, shape; the digest is only reported, by
    `digest_state`). Raises LockfileError with a one-line reason."""
    from ..safeio import CAP_LOCKFILE, loads_toml, read_regular

    try:
        raw = read_regular(path, CAP_LOCKFILE)
    except OSError as e:
        raise LockfileError(f"{path}: cannot read lockfile ({e.strerror})") from None
    try:
        data = loads_toml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise LockfileError(f"{path}: not a lockfile (not UTF-8 text)") from None
    except (tomllib.TOMLDecodeError, ValueError) as e:
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
    check_shape(data, path)
    return data


def digest_state(data: Dict[str, Any]) -> str:
    """`ok` (the file is as npu-doctor wrote it), `edited` (the digest differs: edited by hand
    or by another tool since) or `missing` (no digest line). Advisory: a lockfile is a
    reviewable manifest, and `verify` compares what it says whatever its digest."""
    header = data.get("lock", {})
    want = str(header.get("digest", "") or "")
    if not want:
        return "missing"
    body = {k: v for k, v in data.items() if k != "lock"}
    return "ok" if want.startswith("sha256:") and want[7:] == _digest(header, _sorted(body)) \
        else "edited"


def with_digest(data: Dict[str, Any]) -> Dict[str, Any]:
    """The lockfile dict with its [lock] digest recomputed (after `lock --update` or
    `verify --accept` changed pins)."""
    header = {k: v for k, v in data.get("lock", {}).items() if k != "digest"}
    body = _sorted({k: v for k, v in data.items() if k != "lock"})
    header["digest"] = "sha256:" + _digest(header, body)
    out: Dict[str, Any] = {"lock": header}
    out.update(body)
    return out


_SCALARS = (str, int, float, bool)


def check_shape(data: Dict[str, Any], path: str) -> None:
    """Raise LockfileError (one line naming the key) unless the lockfile has the shape
    npu-doctor writes: [lock] a table of strings, every other top-level key a table, every
    leaf a string, number, boolean or a list of those (`accelerators = "x"` is refused)."""
    header = data["lock"]
    for k, v in header.items():
        if not isinstance(v, str):
            raise LockfileError(f"{path}: lock.{k} must be a string, not {type(v).__name__}")

    def walk(node: Any, where: str, depth: int) -> None:
        if depth > 12:
            raise LockfileError(f"{path}: {where}: nested too deep for a lockfile")
        for k, v in node.items():
            w = f"{where}.{k}"
            if isinstance(v, dict):
                walk(v, w, depth + 1)
            elif isinstance(v, list):
                if not all(isinstance(x, _SCALARS) for x in v):
                    raise LockfileError(f"{path}: {w} must be a list of values, not of tables")
            elif not isinstance(v, _SCALARS):
                raise LockfileError(f"{path}: {w} has an unsupported type {type(v).__name__}")

    for k, v in data.items():
        if k == "lock":
            continue
        if not isinstance(v, dict):
            raise LockfileError(f"{path}: {k} must be a table ([{k}] ...), not "
                                f"{type(v).__name__}; re-create the lock with `npu-doctor lock`")
        walk(v, k, 1)
    for sect in ("accelerators", "files"):
        for k, v in data.get(sect, {}).items():
            if not isinstance(v, dict):
                raise LockfileError(f"{path}: {sect}.{k} must be a table, not {type(v).__name__}")
