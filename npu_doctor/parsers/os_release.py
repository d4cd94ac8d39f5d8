"""os-release(5): `KEY=value` lines, values optionally quoted.

Source: https://www.freedesktop.org/software/systemd/man/latest/os-release.html
"""

from __future__ import annotations

import shlex
from typing import Dict

from ..registry import parser


@parser("os_release")
def parse_os_release(text: str) -> Dict[str, str]:
    """Map of lower-cased keys (`id`, `version_id`, `pretty_name`, ...) to unquoted values.

    Raises ValueError when no KEY=value line is found.
    """
    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        try:
            parts = shlex.split(value)
            value = parts[0] if parts else ""
        except ValueError:
            value = value.strip("\"'")
        out[key.strip().lower()] = value
    if not out:
        raise ValueError("no KEY=value lines")
    return out
