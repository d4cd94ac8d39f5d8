"""Catalog events of a kernel log already classified under the same configuration.

A live `check` matches the whole kernel log (`dmesg`) against the catalogs on every run, and
the log rarely changes between two checks. Classifying it needs the catalogs read back from
the configuration cache, the log-prefix pattern compiled and the kernel scope's index attached:
~25 ms of CPU, a sixth of a live check, for a result that is a function of the text and the
configuration only (CatalogSet.match_text uses nothing else).

So the events of the last few texts are kept in the user cache (npu_doctor.usercache), keyed
by the configuration (configcache.key: the package version, its source files and every data
file, by identity) in the file name, and by a BLAKE2b digest of the text, the source name and
the scopes inside it. A different text, configuration or source is classified afresh. The
events are JSON, as they are in the report. `NPU_DOCTOR_NO_CACHE=1` turns this off with the
rest of the cache.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .. import usercache

#: Texts remembered per configuration (a kernel log and, say, the journal's of a second source).
KEEP = 4
_PREFIX = "log-events-"


def _blake2b(data: bytes) -> str:
    try:  # the C module alone: hashlib also loads OpenSSL (~10 ms of a start)
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=20).hexdigest()


def config_digest(key: Any) -> str:
    """A short name for a configuration cache key (its repr is stable: strings, ints,
    tuples of file identities)."""
    return _blake2b(repr(key).encode("utf-8", "surrogatepass"))[:16]


def _text_key(text: str, source: str, scopes: Sequence[str], log_scope: str) -> str:
    head = "\0".join([source, ",".join(scopes), log_scope, ""]).encode("utf-8", "surrogatepass")
    return _blake2b(head + text.encode("utf-8", "surrogatepass"))


def _load(config: str) -> List[Dict[str, Any]]:
    got = usercache.load_json(_PREFIX + config + ".json")
    if not isinstance(got, dict) or not isinstance(got.get("texts"), list):
        return []
    return [t for t in got["texts"] if isinstance(t, dict) and isinstance(t.get("events"), list)]


def lookup(config: str, text: str, source: str, scopes: Sequence[str],
           log_scope: str) -> Optional[List[Dict[str, Any]]]:
    """The events stored for this text, or None (none stored, caching off, unreadable)."""
    if not config or not usercache.cache_path(_PREFIX):
        return None
    want = _text_key(text, source, scopes, log_scope)
    for t in _load(config):
        if t.get("key") == want:
            return t["events"]
    return None


def store(config: str, text: str, source: str, scopes: Sequence[str], log_scope: str,
          events: List[Dict[str, Any]]) -> None:
    """Remember the events of this text (the newest first; KEEP texts). Never raises; events
    that are not plain JSON data are not stored."""
    if not config or not usercache.cache_path(_PREFIX):
        return
    import json

    try:  # a tuple would come back a list: what is read back must equal what was found
        if json.loads(json.dumps(events)) != events:
            return
    except (TypeError, ValueError):
        return
    want = _text_key(text, source, scopes, log_scope)
    kept = [t for t in _load(config) if t.get("key") != want][:KEEP - 1]
    usercache.save_json(_PREFIX + config + ".json", {"texts": [{"key": want, "events": events}] + kept})
