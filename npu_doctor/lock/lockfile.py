"""The lockfile itself: schema, digest, serialisation and validated reading."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict

from .. import __version__
from ..errors import NpuDoctorError
from ..tomlcompat import tomllib

LOCK_SCHEMA = "npu-doctor/lock/v1"
_SCHEMA_RE = re.compile(r"^npu-doctor/lock/v(\d+)$")


class LockfileError(NpuDoctorError):
    """The lockfile cannot be used: unreadable, not TOML, truncated, unknown schema, other
    architecture. The message is one line; the CLI exits 2."""



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
    """Parse and validate a lockfile. Raises LockfileError with a one-line reason."""
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
    body = {k: v for k, v in data.items() if k != "lock"}
    want = str(header.get("digest", ""))
    if not want.startswith("sha256:") or want[7:] != _digest(header, _sorted(body)):
        raise LockfileError(f"{path}: lockfile is truncated, corrupt or edited by hand (digest "
                            "mismatch), so it cannot be trusted; restore it from version control, "
                            "or re-create it by running `npu-doctor lock` on the validated board")
    return data
