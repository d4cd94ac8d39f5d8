"""Text that came from the machine (zone types, log lines, vendor tool output) made safe to
print one record per line: control characters are shown escaped (`\\n`, `\\x1b`), so a value
cannot forge a journal line, move the cursor or change the terminal's colours."""

from __future__ import annotations

import re

from .lazyregex import lazy

_CONTROL_RE = lazy(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_KEEP_NL_RE = lazy(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _esc(m: "re.Match[str]") -> str:
    ch = m.group(0)
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def escape_controls(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control character (C0 except tab, DEL, C1, U+2028/9) written as an
    escape; with keep_newlines, `\\n` stays (multi-line fix commands)."""
    rx = _CONTROL_KEEP_NL_RE if keep_newlines else _CONTROL_RE
    return rx.sub(_esc, text) if rx.search(text) else text
