"""Where the shipped data lives: `probes/` and `rules/` inside the installed package.

In a wheel they are force-included as `npu_doctor/probes` and `npu_doctor/rules` and found
with importlib.resources; in a source checkout (editable install, tests) they sit beside the
package at the repository root.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, List

from .errors import ConfigError


def shipped_dir(kind: str) -> str:
    """Absolute path of the shipped `probes` or `rules` directory."""
    # plain paths first (a wheel's npu_doctor/<kind>, a checkout's <root>/<kind>): looking
    # them up costs a stat, importlib.resources an import (~7 ms at start-up)
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, kind), os.path.join(os.path.dirname(here), kind)):
        if os.path.isdir(cand):
            return cand
    if sys.version_info >= (3, 9):
        from importlib.resources import files

        res = files("npu_doctor").joinpath(kind)
        if res.is_dir():
            return str(res)
    raise ConfigError(f"npu-doctor installation is incomplete: no {kind}/ directory found")


def data_files(kind: str, extra_dirs: Iterable[str] = ()) -> List[str]:
    """Sorted `*.toml` files of the shipped dir, then of each extra dir (in the order given).

    Raises ConfigError for an extra dir that does not exist.
    """
    out: List[str] = []
    for d in [shipped_dir(kind), *extra_dirs]:
        if not os.path.isdir(d):
            what = "not a directory" if os.path.exists(d) else "no such directory"
            raise ConfigError(f"--{kind} {d}: {what}")
        out.extend(os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".toml"))
    return out
