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
    digest = "sha256:..."                 # over everything else: tells a hand edit (advisory)
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
the severity of its class. A lockfile that is unreadable, not TOML, of the wrong shape, of
an unknown schema or for another architecture is a `LockfileError` (exit status 2, one line).
The digest is advisory: a hand-edited lockfile is compared as it stands, with one `info`
finding "edited since written" (`lock.digest`); a lockfile without a digest line says "no
digest"; a plain `lock` refuses to replace an edited one. `lock --update` and
`verify --accept PATH` (lock/review.py) rewrite only the pins that changed and renew the
digest. Kernel modules: lock/modules.py.
"""

from __future__ import annotations

from ..outputs import OutputPathError, resolve_output, write_atomic
from .drift import (Drift, check_arch, classify, count_locked, diff, display_path, drift_findings,
                    drift_message, ignored, parse_ignore)
from .lockfile import LOCK_SCHEMA, LockfileError, digest_state, dumps, read_lockfile, with_digest
from .manifest import (build_manifest, file_digest, host_arch, normalize_dist_name, python_packages,
                       scan_python_packages, site_dirs)
from .spec import LockSpec, default_spec_path, element_key, expand, load_spec

__all__ = ["Drift", "LOCK_SCHEMA", "LockSpec", "LockfileError", "OutputPathError",
           "build_manifest", "check_arch", "classify", "count_locked",
           "default_spec_path", "diff", "digest_state", "with_digest", "display_path", "drift_findings",
           "drift_message", "dumps", "element_key", "expand", "file_digest",
           "host_arch", "ignored", "load_spec", "normalize_dist_name", "parse_ignore",
           "python_packages", "read_lockfile", "resolve_output", "scan_python_packages",
           "site_dirs", "write_atomic"]
