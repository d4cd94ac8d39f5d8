"""The names a capture must redact that only the host itself can tell: its hostname, the
invoking user and home directory."""

from __future__ import annotations

import os
import socket
from typing import Optional

from ..host import Host


def _hostname(host: Host) -> Optional[str]:
    if host.source == "live":
        return socket.gethostname()
    for p in ("/proc/sys/kernel/hostname", "/etc/hostname"):
        try:
            v = host.read_attr(p)
        except Exception:
            v = None
        if v:
            return v
    return None


def seed_redactor(red, host: Host) -> None:
    """Teach the redactor this host's own names: hostname, user name, home directory."""
    if not red.enabled:
        return
    names = set()
    h = _hostname(host)
    if h:
        names.add(h)
    if host.source == "live":
        names.add(os.uname().nodename)
        try:
            names.add(socket.getfqdn())
        except OSError:
            pass
    for n in sorted(names):
        red.add_hostname(n)
    try:
        ident = host.identity()
        red.add_user(ident.user)
    except Exception:
        ident = None
    try:
        env = host.environ()
    except Exception:
        env = {}
    red.add_user(env.get("USER") or env.get("LOGNAME"))
    if env.get("HOME"):
        red.add_home(env["HOME"])
    if host.source == "live" and ident is not None and ident.uid is not None:
        try:
            import pwd

            pw = pwd.getpwuid(ident.uid)
            red.add_user(pw.pw_name)
            red.add_home(pw.pw_dir)
        except (ImportError, KeyError):
            pass
    for user in list(red.maps["user"]):
        red.add_home(f"/home/{user}")
