"""`npu-doctor explain`'s lookup: the catalog entries a code (`Xid 79`, `-8005`), a mnemonic
(`HAILO_TIMEOUT`), a pasted log line or a fragment of a message stands for."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from .logtext import strip_prefix
from .schema import SCOPES, Entry


def lookup(cs: Any, query: str) -> List[Tuple[Entry, Dict[str, str]]]:
    """(entry, named groups) for each entry of the CatalogSet cs that a code (`Xid 79`,
    `-8005`, `62`), a mnemonic (`HAILO_TIMEOUT`) or a pasted log line stands for; line
    matches first, then codes and mnemonics, then whole-word fragments of examples and
    meanings. Never raises."""
    q = query.strip()
    hits = cs.match_line(strip_prefix(q), SCOPES)
    if any(e.rule for e, _ in hits):
        hits = [h for h in hits if h[0].rule]  # the meaning of the line, not its small print
    if hits:
        return [(e, cs.enrich(e, g)) for e, g in hits]
    out: List[Tuple[Entry, Dict[str, str]]] = []
    alias, code = _split_alias(q)
    for cat in cs.catalogs:
        if alias and not any(a.lower() == alias.lower() for a in cat.code_aliases):
            continue
        e = cat.by_code(_norm_code(code)) or cat.by_mnemonic(code)
        if e is not None:
            out.append((e, {}))
    if not out and len(q) >= 6:
        # a fragment of a message: the entries whose examples or meaning contain it
        # whole words only: `EINVAL` is not the middle of `captureInvalidated`
        word = fragment_regex(q)
        out = [(e, {}) for e in cs.entries()
               if any(word.search(x) for x in e.examples) or word.search(e.meaning)]
    return out


def fragment_regex(query: str) -> "re.Pattern[str]":
    """The whole-word, case-blind regex `lookup` finds a message fragment with (`EINVAL`, not
    the middle of `captureInvalidated`)."""
    return re.compile(r"(?<![\w])" + re.escape(query.strip()) + r"(?![\w])", re.IGNORECASE)


def _split_alias(q: str) -> Tuple[str, str]:
    m = re.match(r"^([A-Za-z][\w ]*?)[ :#]+(-?\w+)$", q)
    if m and not re.match(r"^[A-Z0-9_]+$", q):
        return m.group(1), m.group(2)
    return "", q


def _norm_code(code: str) -> str:
    c = code.strip()
    if re.match(r"^[+-]?\d+$", c):
        return str(int(c))
    if re.match(r"^0x[0-9a-fA-F]+$", c):
        return str(int(c, 16))
    return c
