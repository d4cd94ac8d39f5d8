"""stdout/stderr that never turn an edge into a traceback: an encoding that lacks the report's
marks (`PYTHONIOENCODING=ascii`, a C locale) gets ASCII stand-ins; a closed pipe (`| head`)
is a quiet exit 0; any other failed write to stdout (`> /dev/full`) is one line and exit 2."""

from __future__ import annotations

import codecs
import errno
import os
import sys
from typing import Any, Callable, NoReturn

#: ASCII stand-ins for the few non-ASCII characters npu-doctor prints itself.
_ASCII = {"✓": "ok", "✗": "x", "—": "-", "–": "-", "°": "", "×": "x", "§": "S", "…": "...",
          "→": "->", "≥": ">=", "≤": "<=", "µ": "u"}
_HANDLER = "npu_doctor_ascii"


def _fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start:err.end]
    return "".join(_ASCII.get(ch, "?") for ch in bad), err.end


def install() -> None:
    """Make stdout and stderr write anything: characters their encoding lacks become ASCII
    stand-ins (or `?`) instead of raising UnicodeEncodeError."""
    try:
        codecs.lookup_error(_HANDLER)
    except LookupError:
        codecs.register_error(_HANDLER, _fallback)
    for stream in (sys.stdout, sys.stderr):
        reconf = getattr(stream, "reconfigure", None)
        if reconf is None:
            continue
        try:
            reconf(errors=_HANDLER)
        except (ValueError, OSError, TypeError):
            pass


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def guarded(fn: Callable[[], Any]) -> "NoReturn":
    """Run fn (which ends with sys.exit) and flush stdout; a broken pipe is exit 0, any other
    error writing stdout is one line on stderr and exit 2."""
    try:
        try:
            fn()
        except SystemExit:
            # click turns EPIPE into exit 1 (our "findings" status) after wrapping stdout in
            # its PacifyFlushWrapper; a closed pipe is a quiet 0 here, for every command
            if "PacifyFlushWrapper" in type(sys.stdout).__name__:
                _silence_stdout()
                sys.exit(0)
            raise
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(0)
    except OSError as e:
        if e.errno == errno.EPIPE:
            _silence_stdout()
            sys.exit(0)
        _silence_stdout()
        reason = e.strerror or str(e)
        try:
            sys.stderr.write(f"npu-doctor: error: cannot write output ({reason})\n")
        except OSError:
            pass
        sys.exit(2)
    sys.exit(0)
