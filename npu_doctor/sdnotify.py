"""sd_notify(3) without libsystemd: readiness, status, stopping and watchdog pings.

Protocol (systemd man page sd_notify, "Ecosystem conventions" in research/ecosystem.md):
one datagram of `KEY=VALUE` lines to the AF_UNIX socket in `$NOTIFY_SOCKET`; a leading `@`
names an abstract socket. The watchdog applies when `$WATCHDOG_USEC` is set and
`$WATCHDOG_PID` is unset or our pid; ping every half of it. Sending never raises.
"""

from __future__ import annotations

import os
import socket
from typing import Dict, Optional

_ENV_KEYS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


class Notifier:
    """Reads the systemd environment once; `send()` is a no-op without NOTIFY_SOCKET."""

    def __init__(self, environ: Optional[Dict[str, str]] = None) -> None:
        env = os.environ if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_usec: Optional[int] = int(usec) if usec.isdigit() and int(usec) > 0 else None
        if pid and pid.isdigit() and int(pid) != os.getpid():
            self.watchdog_usec = None
        self._sock: Optional[socket.socket] = None

    @property
    def watchdog_interval_s(self) -> Optional[float]:
        """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None if disabled."""
        return self.watchdog_usec / 2e6 if self.watchdog_usec else None

    def send(self, **fields: str) -> bool:
        """Send `KEY=VALUE` lines (send(READY="1", STATUS="ok")). True when sent."""
        if not self.address:
            return False
        payload = "\n".join(f"{k}={v}" for k, v in fields.items()).encode("utf-8", "replace")
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        elif not addr.startswith("/"):
            return False  # vsock and other transports are not for us
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            self._sock.sendto(payload, addr)
            return True
        except OSError:
            return False


def clean_child_environ() -> None:
    """Remove the notify variables so vendor tools we run cannot notify in our name."""
    for key in _ENV_KEYS:
        os.environ.pop(key, None)
