"""Small typed errors, psutil-style.

`HostError` and its subclasses come from `Host` methods: a probe catches them and turns them
into a probe status. `ConfigError` and `SnapshotError` stop the run with exit status 2 and a
one-line message; they never reach the user as a traceback.
"""

from __future__ import annotations


class NpuDoctorError(Exception):
    """Base of every error npu-doctor raises on purpose."""


class HostError(NpuDoctorError):
    """Something on the host (live or snapshot) could not be read or run."""

    def __init__(self, path: str, reason: str = "") -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if reason else path)


class NotFound(HostError):
    """The file, directory or command does not exist on this host."""


class AccessDenied(HostError):
    """The file exists but this user may not read it (EACCES/EPERM)."""


class CommandNotFound(NotFound):
    """The command is not installed (live) or not listed in commands.toml (snapshot)."""


class ConfigError(NpuDoctorError):
    """A probe spec, rules file or lockfile is invalid. Exit status 2.

    The message is one line naming the file, the entry (rule or probe id) and what is wrong.
    """


class SnapshotError(NpuDoctorError):
    """A snapshot is missing, unreadable or malformed. Exit status 2."""


class ModelError(NpuDoctorError):
    """A model file that cannot be read (missing, truncated, not a model). Exit status 2."""
