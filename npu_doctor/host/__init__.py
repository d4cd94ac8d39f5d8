"""Host: the only code that touches the machine.

`LiveHost` reads `/` and runs real commands; `SnapshotHost` reads a snapshot; `RecordingHost`
(host.recording) records what the probes read for `capture`. See host.base for the interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

from .base import (OUTPUT_CAP_BYTES, READ_CAP_BYTES, CommandResult, Host, Identity, StatInfo,
                   mode_allows, parse_cap_eff, parse_id_output)
from .logfile import decode_log
from .snapshot import SnapshotHost

if TYPE_CHECKING:
    from .live import LiveHost


def __getattr__(name: str) -> Any:
    # LiveHost is imported when first named: it brings subprocess, signal and atexit, which a
    # snapshot check never needs
    if name == "LiveHost":
        from .live import LiveHost

        return LiveHost
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["OUTPUT_CAP_BYTES", "READ_CAP_BYTES", "CommandResult", "Host", "Identity", "LiveHost",
           "SnapshotHost", "StatInfo", "decode_log", "mode_allows", "open_host", "parse_cap_eff",
           "parse_id_output"]


def open_host(snapshot: Optional[str] = None, logs: Sequence[str] = ()) -> Host:
    """LiveHost, or SnapshotHost for a snapshot path. Raises SnapshotError."""
    if snapshot:
        return SnapshotHost(snapshot, extra_logs=logs)
    from .live import LiveHost

    return LiveHost(extra_logs=logs)
