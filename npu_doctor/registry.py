"""Named code that data files refer to: parsers, collectors and derivers.

- A **parser** is a pure function `text -> dict` (or list) for one vendor output format. A
  probe spec names it with `parser = "name"`; tests call it on real captured strings.
- A **collector** is `fn(ctx: ProbeContext) -> None`: it reads through `ctx` (which records
  sources) and writes facts into `ctx.facts`. A probe spec names it with `collector = "name"`.
- A **deriver** runs after all probes have merged: `fn(facts, host) -> None`, in `order`,
  for facts that combine several probes (an accelerator's temperature from its thermal zone).

Modules under `npu_doctor.parsers` and `npu_doctor.collectors` register themselves on import;
`load_all()` imports them all.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable, Dict, List, Tuple

PARSERS: Dict[str, Callable] = {}
COLLECTORS: Dict[str, Callable] = {}
DERIVERS: List[Tuple[int, str, Callable]] = []


def parser(name: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        PARSERS[name] = fn
        return fn
    return deco


def collector(name: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        COLLECTORS[name] = fn
        return fn
    return deco


def deriver(order: int = 50) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        key = f"{fn.__module__}.{fn.__name__}"
        if not any(k == key for _, k, _ in DERIVERS):
            DERIVERS.append((order, key, fn))
            DERIVERS.sort(key=lambda t: (t[0], t[1]))
        return fn
    return deco


_loaded = False


def load_all() -> None:
    """Import every parser and collector module once."""
    global _loaded
    if _loaded:
        return
    from . import collectors, parsers

    for pkg in (parsers, collectors):
        # os.listdir, not pkgutil: pkgutil's import alone costs more than the listing
        names = set()
        for d in pkg.__path__:
            for fn in os.listdir(d):
                if fn.endswith(".py") and not fn.startswith("_"):
                    names.add(fn[:-3])
                elif not fn.startswith("_") and os.path.isfile(os.path.join(d, fn, "__init__.py")):
                    names.add(fn)   # a subpackage (parsers/fallback/) imports its modules
        for name in sorted(names):
            importlib.import_module(f"{pkg.__name__}.{name}")
    _loaded = True
