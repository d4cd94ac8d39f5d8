"""`--select` / `--ignore` values: rule ids, comma lists (`a,b`) and shell patterns
(`thermal-*`), the same on check, verify, fix and watch."""

from __future__ import annotations

import fnmatch
from typing import Iterable, List

from ..errors import ConfigError

_GLOB = set("*?[")


def expand_rule_ids(values: Iterable[str], known: Iterable[str], option: str = "--select") -> List[str]:
    """The rule ids the values name, in order, without repeats.

    Each value is split at commas; a part with `*`, `?` or `[` is a shell pattern over the
    known ids and must match at least one. Raises ConfigError (one line) for an unknown id or
    a pattern that matches none; a part with a dot reads like a lock path and says so."""
    ids = sorted(set(known))
    out: List[str] = []
    for value in values:
        for part in (p.strip() for p in str(value).split(",")):
            if not part:
                continue
            if _GLOB & set(part):
                got = [i for i in ids if fnmatch.fnmatchcase(i, part)]
                if not got:
                    raise ConfigError(f"{option} {part!r} matches no rule id "
                                      "(see `npu-doctor rules list`)")
            elif part in ids:
                got = [part]
            else:
                hint = ("; lock paths go to `verify --skip-path`" if "." in part else "")
                raise ConfigError(f"unknown rule id {part!r} (see `npu-doctor rules list`){hint}")
            out.extend(i for i in got if i not in out)
    return out
