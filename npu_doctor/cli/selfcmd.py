"""How to run this very npu-doctor again, as root: `sudo` resets PATH to its secure_path
(/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin on Debian and Ubuntu), which
misses a venv's or pipx's bin directory, so a hint names the executable by absolute path."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import List, Optional

#: sudo's default secure_path on Debian/Ubuntu (sudoers) and RHEL (/usr/sbin:/usr/bin first)
SECURE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def self_argv(argv0: Optional[str] = None) -> List[str]:
    """The argv that starts this npu-doctor: `[/abs/bin/npu-doctor]` for a console script,
    `[/abs/python, -m, npu_doctor]` when run as a module or from a path sudo would not find."""
    argv0 = argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")
    base = os.path.basename(argv0)
    if base in ("__main__.py", "-m", "-c", "") or base.endswith(".py"):
        return [os.path.abspath(sys.executable), "-m", "npu_doctor"]
    path = argv0 if os.sep in argv0 else (shutil.which(argv0) or "")
    if not path:
        return [os.path.abspath(sys.executable), "-m", "npu_doctor"]
    return [os.path.abspath(path)]


def self_command(*args: str, root: bool = True, is_root: Optional[bool] = None,
                 argv0: Optional[str] = None) -> str:
    """A shell command line that runs this npu-doctor with args: prefixed with `sudo` (and
    the absolute path, when the executable is not on sudo's secure_path) when `root` is
    wanted and this process is not root already."""
    argv = self_argv(argv0)
    if is_root is None:
        is_root = os.geteuid() == 0
    if root and not is_root:
        on_secure = len(argv) == 1 and os.path.dirname(argv[0]) in SECURE_PATH
        if on_secure and os.path.basename(argv[0]) == "npu-doctor":
            argv = ["npu-doctor"]
        return " ".join(shlex.quote(a) for a in ["sudo"] + argv + list(args))
    if len(argv) == 1 and shutil.which("npu-doctor") == argv[0]:
        argv = ["npu-doctor"]
    return " ".join(shlex.quote(a) for a in argv + list(args))
