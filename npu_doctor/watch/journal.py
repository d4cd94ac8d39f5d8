"""journald's native protocol, without libsystemd: structured `watch` events.

Protocol (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/): one AF_UNIX datagram per entry to
/run/systemd/journal/socket; each field is `NAME=value\\n`, or, when the value holds a
newline, `NAME\\n` + the value's length as 64-bit little-endian + the value + `\\n`. Field
names are upper-case letters, digits and `_`, not starting with `_` (those are trusted fields
journald adds itself).

A service's stdout is connected to the journal when `$JOURNAL_STREAM` (`<device>:<inode>`,
set by systemd) names the file stdout is (systemd.exec(5), "$JOURNAL_STREAM"); then events go
here with their fields, so `journalctl NPU_DOCTOR_EVENT=throttling-start` or
`journalctl MESSAGE_ID=d268423c36d6448a86cdbd5cc0d555ec` finds them.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import TYPE_CHECKING, Dict, Optional

from ..lazyregex import lazy

if TYPE_CHECKING:  # pragma: no cover
    from .events import Event

SOCKET_PATH = "/run/systemd/journal/socket"
IDENTIFIER = "npu-doctor"
PRIORITY = {"error": 3, "warning": 4, "info": 6}

#: One fixed 128-bit id per event kind (`journalctl MESSAGE_ID=...`). Never change one.
MESSAGE_IDS = {
    "throttling-start": "d268423c36d6448a86cdbd5cc0d555ec",
    "throttling-end": "b55d4d9974ef474b80c68aa213006982",
    "runtime-suspend": "c566eab1989042db8c4240509b775cb7",
    "runtime-resume": "82b4632587554055ae5ca8aef98fea0e",
    "device-added": "9d0256c874c2460189c549f67ba7270b",
    "device-removed": "1117ff22d0df4558bf281ad1c7b0317a",
    "fallback-suspected": "b0b9168a4f9f417da1651987acb142bc",
    "fallback-cleared": "e4b05bdc16c348cb993d626a7b9b89a7",
    "finding-raised": "13477da851634ce780ed2e3bf9acab4b",
    "finding-cleared": "8cc8a46fdd104e78a36c2e5355f6600f",
    "probe-failed": "7b16127bcf9a45a7ac216cae212414af",
    "config-reloaded": "0e680c7644ea46c18cf74bec365ada9a",
    "config-rejected": "59dce27243d94a3f8092511da42a4af8",
    "textfile-failed": "635416e6fddb4484865d75d8052f9354",
    "textfile-cleared": "fd12fce2c26b400fba8d5131745b4303",
}

_BAD_NAME = lazy(r"[^A-Z0-9_]")


def field_name(key: str) -> str:
    """`temp_c` -> `NPU_DOCTOR_TEMP_C` (journal field names: A-Z, 0-9, _)."""
    return "NPU_DOCTOR_" + _BAD_NAME.sub("_", key.upper()).strip("_")


def stream_is_journal(fd: int = 1, environ: Optional[Dict[str, str]] = None) -> bool:
    """True when `$JOURNAL_STREAM` names the file open on `fd` (stdout by default)."""
    env = os.environ if environ is None else environ
    dev, sep, ino = (env.get("JOURNAL_STREAM") or "").partition(":")
    if not sep or not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return st.st_dev == int(dev) and st.st_ino == int(ino)


def encode(fields: Dict[str, str]) -> bytes:
    """One native-protocol datagram for these fields (names already valid)."""
    out = bytearray()
    for name, value in fields.items():
        raw = str(value).encode("utf-8", "replace")
        if b"\n" in raw:
            out += name.encode("ascii") + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
        else:
            out += name.encode("ascii") + b"=" + raw + b"\n"
    return bytes(out)


def event_fields(ev: "Event") -> Dict[str, str]:
    """The journal entry of a watch event: MESSAGE, PRIORITY, MESSAGE_ID, SYSLOG_IDENTIFIER,
    NPU_DOCTOR_EVENT / _SUBJECT / _SEVERITY, and each of its numbers as NPU_DOCTOR_<NAME>."""
    fields = {
        "MESSAGE": f"{ev.event} {ev.subject}: {ev.message}",
        "PRIORITY": str(PRIORITY.get(ev.severity, 6)),
        "SYSLOG_IDENTIFIER": IDENTIFIER,
        "NPU_DOCTOR_EVENT": ev.event,
        "NPU_DOCTOR_SUBJECT": ev.subject,
        "NPU_DOCTOR_SEVERITY": ev.severity,
    }
    if ev.event in MESSAGE_IDS:
        fields["MESSAGE_ID"] = MESSAGE_IDS[ev.event]
    for key, value in ev.fields.items():
        if value is not None:
            fields.setdefault(field_name(key), str(value))
    return fields


class JournalSender:
    """Sends entries to the journal socket; `send()` never raises and says whether it sent
    (the caller then prints the line to stdout instead)."""

    def __init__(self, path: str = SOCKET_PATH) -> None:
        self.path = path
        self._sock: Optional[socket.socket] = None

    def send(self, fields: Dict[str, str]) -> bool:
        """Send one entry (native protocol datagram); False when the socket refused it (the
        caller then writes the line to stdout instead). Never raises."""
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.sendto(encode(fields), self.path)
            return True
        except OSError:   # no journald, socket gone, entry too large: the stdout line is kept
            return False
