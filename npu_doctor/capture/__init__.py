"""`npu-doctor capture`: a snapshot of exactly what the probes read and ran on this host.

`RecordingHost` wraps another Host (a `LiveHost` on a board; any Host in tests) and records
every read, open, listdir, readlink, realpath, exists/is_dir, stat, can_open, run, environ,
identity and log access while a normal `check` runs through it. `write_capture` then writes
that record in the snapshot contract (docs/architecture.md, "Contract: snapshot format"):

- `fs/`: each file read, at its real path (a file opened for seeks, such as an ELF library,
  keeps only the byte ranges the probes read, zeros elsewhere, with its real size and
  sha256 in snapshot.toml `[[snapshot.sparse]]`); every symlink met on the way kept as a symlink
  (an absolute target, or a relative one that climbs above `/`, is rewritten relative so it
  resolves inside `fs/` and never out of the tree); directories listed by a probe hold every
  name they had (names not read become empty placeholder files or directories, so globs
  and listings replay identically).
- `commands.toml`: every command run, with returncode, stdout, stderr (timed_out = true for
  a command that hung). The invoking user (`Host.identity`) becomes an `["id"]` entry.
- `stat.toml`: type, mode, owner and rdev of device nodes and of every path a probe
  stat()ed or asked to open, since a plain tree loses them.
- `environ.toml`: only the environment variables a probe looked up by name (never names
  that look like secrets: TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH, COOKIE).
- `logs/`: the files given with --log.
- `snapshot.toml`: created, tool_version, hostname (redacted), redacted, python_paths (the
  site directories `lock` scans, so `lock --snapshot` matches a live `lock`), sparse,
  denied (paths this user could not read: a SnapshotHost answers AccessDenied for them, so
  a capture made without root replays as it ran), left_out.

Redaction (npu_doctor.redact) is on by default and applied to text content, command output,
logs, environment values and paths alike, with one mapping per capture. Binary files (ELF
libraries) are copied unchanged. Files and the archive are mode 0600 (directories 0700), and
members carry no owner names. A file over the size cap, or one that could not be read, is
left out and listed (with why) in the summary and in snapshot.toml.

The output's kind is decided from its name, never guessed (`output_kind`): a name ending in
`.tar.gz` or `.tgz` is an archive (a symlink is followed and its final target replaced
atomically; a target that exists and is not a regular file is refused); an existing
directory, or a path ending in `/`, is a directory snapshot (the directory must be empty);
anything else (`out.zip`, `board`) is refused with one line naming the accepted forms.
"""

from __future__ import annotations

from ..host.recording import RecordingHost
from .output import output_kind
from .names import seed_redactor
from .run import CaptureRun, compare_runs, normalize_for_replay, run_capture
from .tree import CaptureResult
from .writer import DEFAULT_MAX_FILE_BYTES, CaptureWriter

__all__ = ["RecordingHost", "CaptureWriter", "CaptureResult", "seed_redactor", "output_kind",
           "normalize_for_replay", "compare_runs", "run_capture", "CaptureRun",
           "DEFAULT_MAX_FILE_BYTES"]
