"""Named code that data files refer to: parsers, collectors and derivers.

- A **parser** is a pure function `text -> dict` (or list) for one vendor output format. A
  probe spec names it with `parser = "name"`; tests call it on real captured strings.
- A **collector** is `fn(ctx: ProbeContext) -> None`: it reads through `ctx` (which records
  sources) and writes facts into `ctx.facts`. A probe spec names it with `collector = "name"`.
- A **deriver** runs after all probes have merged: `fn(facts, host) -> None`, for facts
  that combine several probes (an accelerator's temperature from its thermal zone). It names
  the derivers whose results it reads (`after=("link_devfreq",)`); `derivers_in_order()`
  runs each after those, and otherwise in name order, so the order is the same every run.

Modules under `npu_doctor.parsers` and `npu_doctor.collectors` register themselves on import;
`load_all()` imports them all.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable, Dict, List, Sequence, Tuple

PARSERS: Dict[str, Callable] = {}
COLLECTORS: Dict[str, Callable] = {}
#: deriver name (its function's name) -> (names it runs after, module-qualified key, function)
DERIVERS: Dict[str, Tuple[Tuple[str, ...], str, Callable]] = {}


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


def deriver(after: Sequence[str] = ()) -> Callable[[Callable], Callable]:
    """Register `fn(facts, host)` to run after the probes, and after the derivers named in
    `after` (function names)."""
    def deco(fn: Callable) -> Callable:
        key = f"{fn.__module__}.{fn.__name__}"
        old = DERIVERS.get(fn.__name__)
        if old is not None and old[1] != key:
            raise ValueError(f"deriver name {fn.__name__!r} is used by {old[1]} and {key}")
        DERIVERS[fn.__name__] = (tuple(after), key, fn)
        return fn
    return deco


def derivers_in_order() -> List[Callable]:
    """Every deriver, each after those it names, ties in module-qualified name order.
    Raises ValueError for a name no deriver has, or derivers that wait on each other."""
    for name, (after, key, _fn) in DERIVERS.items():
        missing = [a for a in after if a not in DERIVERS]
        if missing:
            raise ValueError(f"deriver {key} runs after unknown deriver(s) {missing}")
    done: List[str] = []
    left = dict(DERIVERS)
    while left:
        ready = sorted((v[1], n) for n, v in left.items() if all(a in done for a in v[0]))
        if not ready:
            raise ValueError(f"derivers wait on each other: {sorted(left)}")
        _key, name = ready[0]
        done.append(name)
        del left[name]
    return [DERIVERS[n][2] for n in done]


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
