"""Shared-library preflight of every accelerator SDK: `libraries[]`.

Finds the SDK's shared objects at the vendor locations of the probe spec
(`[[probe.args.location]]`: sdk + globs, `**` = any depth, bounded) and — on a live host — in
the installed Python distributions the spec names (`python_distributions`, fnmatch on the
normalised name, found through `importlib.metadata`). Each is resolved like ld.so does
(`npu_doctor.linker.ldso`) and its symbol versions checked.

One `libraries[]` record per SDK library, plus one per dependency outside the SDK that has a
problem of its own (`dependency_of` = the SDK library that pulls it in):

    {path, soname, sdk, class ("ELF64"), machine ("x86_64"), needed: [names], loaded_by,
     resolved: ["libtbb.so.12 => /x/libtbb.so.12 (rpath)", "libze_loader.so.1 => not found"],
     missing: [names], unsatisfied: [{version, library, provider, basis, provided_max}],
     unverified: [...] (snapshot: provider not captured), unknown: [names] (snapshot without
     a loader cache: cannot tell), search_path (what was tried for the first missing name),
     remedies: ["name: what installs it"], found_elsewhere: [paths], unsatisfied_text,
     severity ("warning" when every missing name only matters to an optional part)}

`library_scan` summarises the run: roots, files parsed, loader cache source, duration_ms,
cpu_ms (this probe's CPU time).
A deriver then compares `unverified` GLIBC_x.y requirements with `libc.version`
(basis "libc.version").
"""

from __future__ import annotations

import posixpath
import re
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .. import versions
from ..errors import HostError
from ..facts import Facts
from ..host import Host
from ..lazyregex import lazy
from ..namematch import any_match
from ..probes import NoData, ProbeContext
from ..registry import collector, deriver

if TYPE_CHECKING:
    from ..linker.ldso import Node

_SO_RE = lazy(r"\.so(\.[0-9][\w.]*)?$")
MAX_WALK_DIRS = 4000
MAX_DEPTH = 8


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def expand_glob(host: Host, pattern: str,
                listings: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """host.glob, plus `**` for any number of directories (bounded walk, links followed once).
    `listings`: as for Host.glob, shared by the patterns of one walk."""
    if "**" not in pattern:
        return host.glob(pattern, listings)
    base, _, rest = pattern.partition("/**/")
    if not rest:
        base, rest = pattern.rstrip("*").rstrip("/"), "*"
    out: List[str] = []
    budget = [MAX_WALK_DIRS]
    for start in host.glob(base, listings) if any(c in base for c in "*?[") else [base]:
        seen = set()
        stack = [(start, 0)]
        while stack and budget[0] > 0:
            d, depth = stack.pop()
            real = host.realpath(d)
            if real in seen:
                continue
            seen.add(real)
            budget[0] -= 1
            out.extend(host.glob(posixpath.join(d, rest), listings))
            if depth >= MAX_DEPTH:
                continue
            try:
                names = host.listdir(d)
            except HostError:
                continue
            for n in reversed(names):
                p = posixpath.join(d, n)
                if not n.startswith(".") and host.is_dir(p):
                    stack.append((p, depth + 1))
    return sorted(set(out))


def _python_libraries(ctx: ProbeContext, patterns: List[str]) -> List[Tuple[str, str]]:
    """(sdk, path) of shared objects in the distributions of the application environments
    (npu_doctor.pyenv) whose name matches, from their RECORD."""
    from ..pyenv import env_sites, environments, find_dists

    sites = env_sites(environments(ctx.host, ctx.run))
    out: List[Tuple[str, str]] = []
    for norm, dist in find_dists(ctx.host, patterns, sites).items():
        out.extend((norm.replace("-", "_"), p) for p in dist.shared_objects(ctx.host))
    return out


def _row(name: str, table: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    for row in table:
        pats = row.get("match", [])
        if isinstance(pats, str):
            pats = [pats]
        if any_match(name, pats):
            return row
    return None


def _remedy(name: str, table: List[Dict[str, Any]]) -> str:
    row = _row(name, table)
    if row is not None:
        return f"{name}: {row.get('text', '')}"
    return (f"{name}: install the package that provides it (Debian/Ubuntu: `apt-file search "
            f"{name}`; RHEL/openEuler: `dnf provides '*/{name}'`), or add the directory that "
            "holds it to /etc/ld.so.conf.d/ and run `sudo ldconfig`")


def _search_path(node: Node, name: str) -> str:
    res = node.resolutions.get(name)
    if res is None:
        return ""
    parts, prev = [], None
    for t in res.tried:
        if t != prev:
            parts.append(t)
        prev = t
    text = ", ".join(parts)
    if res.skipped:
        text += "; skipped " + ", ".join(res.skipped[:3])
    return text


def _resolved_line(node: Node, name: str) -> str:
    res = node.resolutions.get(name)
    if res is None:
        return f"{name} => ?"
    if res.via == "assumed":
        return f"{name} => (already loaded by the process)"
    if res.path is None:
        return f"{name} => not found"
    note = res.via + ("" if res.captured else ", not captured")
    return f"{name} => {res.path} ({note})"


def describe_unsatisfied(item: Dict[str, Any]) -> str:
    """`GLIBC_2.27 from libm.so.6 (/lib64/libm.so.6 defines up to GLIBC_2.17)`."""
    prov = item.get("provider") or item.get("library")
    have = item.get("provided_max")
    if item.get("basis") == "libc.version":
        tail = f"system glibc is {have} (compared with libc.version; {prov} was not captured)"
    else:
        tail = f"{prov} defines up to {have}" if have else f"{prov} defines no such version"
    return f"{item['version']} from {item['library']} ({tail})"


def _problems_text(rec: Dict[str, Any]) -> None:
    rec["unsatisfied_text"] = "; ".join(describe_unsatisfied(u) for u in rec.get("unsatisfied", []))
    if not rec["unsatisfied_text"]:
        del rec["unsatisfied_text"]


def _record(node: Node, sdk: str, remedies: List[Dict[str, Any]],
            index: Dict[str, List[str]]) -> Dict[str, Any]:
    info = node.info
    rec: Dict[str, Any] = {
        "path": node.path, "soname": info.soname, "sdk": sdk, "class": info.class_name,
        "machine": info.machine, "needed": list(info.needed),
        "missing": list(node.missing), "unsatisfied": list(node.unsatisfied),
        "loaded_by": "",
    }
    # `ld.so --list` style, this object's own DT_NEEDED only (`-v` shows it with every fact)
    rec["resolved"] = [_resolved_line(node, n) for n in info.needed]
    if info.rpath:
        rec["rpath"] = list(info.rpath)
    if info.runpath:
        rec["runpath"] = list(info.runpath)
    if node.unverified:
        rec["unverified"] = list(node.unverified)
    if node.unknown:
        rec["unknown"] = list(node.unknown)
    if node.missing:
        rec["search_path"] = _search_path(node, node.missing[0])
        rec["remedies"] = [_remedy(n, remedies) for n in node.missing]
        # a table row may say a name only matters to an optional part (`severity = "warning"`)
        sev = {(_row(n, remedies) or {}).get("severity", "error") for n in node.missing}
        rec["severity"] = "warning" if sev == {"warning"} else "error"
        elsewhere = [p for n in node.missing for p in index.get(n, [])]
        if elsewhere:
            rec["found_elsewhere"] = elsewhere
    _problems_text(rec)
    return {k: v for k, v in rec.items() if v is not None}


def _walk_roots(ctx: ProbeContext) -> List[Tuple[str, str, bool]]:
    """(sdk, path, from_python) of candidate SDK libraries, deduplicated by real path."""
    host = ctx.host
    cands: List[Tuple[str, str, bool]] = []
    listings: Dict[str, List[str]] = {}
    for loc in ctx.args.get("location", []):
        sdk = str(loc.get("sdk", "unknown"))
        for pattern in loc.get("globs", []):
            for p in expand_glob(host, pattern, listings):
                cands.append((sdk, p, False))
    for sdk, p in _python_libraries(ctx, list(ctx.args.get("python_distributions", []))):
        cands.append((sdk, p, True))
    seen = set()
    out = []
    dir_real: Dict[str, str] = {}

    def realpath(p: str) -> str:
        # the directory resolved once for all its files (a venv's 38 SDK libraries sit in a
        # few: realpath per file was ~600 lstat calls); only a file that is a link itself
        # needs resolving on its own
        d, base = posixpath.split(p)
        rd = dir_real.get(d)
        if rd is None:
            rd = dir_real[d] = host.realpath(d)
        try:
            host.readlink(p)
        except HostError:
            return posixpath.join(rd, base)
        return host.realpath(p)

    for sdk, p, py in cands:
        if not _SO_RE.search(p):
            continue
        real = realpath(p)
        if real in seen:
            continue
        st = host.stat(p)
        if st is None or st.type != "file":
            continue
        seen.add(real)
        # report the file itself rather than a symlink to it in the same directory
        # ($ORIGIN is the same either way)
        if posixpath.dirname(real) == posixpath.dirname(p):
            p = real
        out.append((sdk, p, py))
    return out


def _thread_cpu() -> float:
    """CPU seconds of this thread (the probe's own cost, whatever the machine's load)."""
    try:
        return time.thread_time()
    except (AttributeError, OSError):  # pragma: no cover
        return time.process_time()


#: The spec's remedy table as of the last run, for remedies on loader messages in logs.
_REMEDY_TABLE: List[Dict[str, Any]] = []


@collector("libraries")
def collect_libraries(ctx: ProbeContext) -> None:
    start = time.monotonic()
    cpu0 = _thread_cpu()
    _REMEDY_TABLE[:] = list(ctx.args.get("remedy", []))
    roots = _walk_roots(ctx)
    if not roots:
        raise NoData("no accelerator SDK libraries found at the vendor locations")
    max_roots = int(ctx.args.get("max_roots", 2000))
    truncated = len(roots) > max_roots
    roots = roots[:max_roots]
    # a live host's records of the last check, while nothing they depended on changed
    # (linker.preflightcache: the directories searched, the files read, the configuration)
    # (not under `capture`, whose recorder must see every file the preflight reads)
    live = ctx.host.source == "live" and getattr(ctx.host, "inner", None) is None
    config = str(ctx.options.get("config_digest") or "") if live else ""
    ld_library_path = ctx.host.environ().get("LD_LIBRARY_PATH", "") if config else ""
    if config:
        from ..linker import preflightcache

        kept = preflightcache.lookup(config, roots, ld_library_path)
        if kept is not None:
            _set_facts(ctx, kept, start, cpu0)
            return
    # the ELF reader and loader model are imported only when there are SDK files to read
    # (a snapshot of sysfs alone never pays for them)
    from ..linker import elf as elfmod
    from ..linker.elf import ElfError, NotElf, read_elf
    from ..linker.ldso import Resolver

    host: Any = ctx.host
    if config:
        host = preflightcache.TouchedHost(ctx.host)
    parsed0 = elfmod.STATS["parsed"]
    resolver = Resolver(host)
    remedies = list(ctx.args.get("remedy", []))
    assume = list(ctx.args.get("assume_loaded_python", []))
    index: Dict[str, List[str]] = {}
    for _sdk, p, _py in roots:
        index.setdefault(posixpath.basename(p), []).append(p)
    records: List[Dict[str, Any]] = []
    dep_records: Dict[str, Dict[str, Any]] = {}
    root_paths = {p for _s, p, _py in roots}
    for sdk, path, py in roots:
        try:
            info = read_elf(host, path)
        except (NotElf, ElfError, HostError):
            continue
        if info.elf_type != "ET_DYN" or not info.has_dynamic:
            continue
        nodes = resolver.tree(path, assume if py else ())
        records.append(_record(nodes[0], sdk, remedies, index))
        for node in nodes[1:]:
            if node.path in root_paths or node.path in dep_records:
                continue
            if node.missing or node.unsatisfied or node.unverified:
                rec = _record(node, sdk, remedies, index)
                rec["dependency_of"] = path
                rec["loaded_by"] = f", loaded by {path},"
                dep_records[node.path] = rec
    if ctx.host.source == "live":
        elfmod.save_cache()
    summary: Dict[str, Any] = {
        "roots": len(records), "dependencies_with_problems": len(dep_records),
        "files_parsed": elfmod.STATS["parsed"] - parsed0,
        "loader_cache": resolver.cache_source,
    }
    if resolver.cache_error:
        summary["loader_cache_error"] = resolver.cache_error
    if truncated:
        summary["truncated_at"] = max_roots
    found = {"records": records + list(dep_records.values()), "summary": summary,
             "source": "ELF dynamic section (" + (resolver.cache_source or "no loader cache") + ")"}
    if config:
        preflightcache.store(config, roots, ld_library_path, host, found)
    _set_facts(ctx, found, start, cpu0)


def _set_facts(ctx: ProbeContext, found: Dict[str, Any], start: float, cpu0: float) -> None:
    """`libraries[]` and `library_scan` from what collect_libraries found (or kept)."""
    if not found["records"]:
        raise NoData("no ELF shared objects among the SDK files found")
    src = found["source"]
    for i, rec in enumerate(found["records"]):
        ctx.facts.set(f"libraries[{i}]", rec, src)
    summary = dict(found["summary"])
    summary["duration_ms"] = round((time.monotonic() - start) * 1000, 1)
    summary["cpu_ms"] = round((_thread_cpu() - cpu0) * 1000, 1)
    ctx.facts.set("library_scan", summary, src)


@deriver(after=("derive_catalog_facts",))
def compare_unverified_with_libc(facts: Facts, host: Host) -> None:
    """Snapshot fallback: a GLIBC_x.y requirement whose provider was not captured is compared
    with `libc.version`; newer than it is unsatisfied (basis "libc.version")."""
    libc = facts.get("libc.version")
    libs = facts.get("libraries")
    if not libc or not isinstance(libs, list) or not any(
            isinstance(rec, dict) and rec.get("unverified") for rec in libs):
        return  # (a live check has none: the loader model is not imported for it)
    from ..linker.ldso import glibc_version_of

    for i, rec in enumerate(libs):
        added = False
        for item in rec.get("unverified", []):
            need = glibc_version_of(str(item.get("version", "")))
            if need is None:
                continue
            c = versions.compare(need, str(libc))
            if c is None or c <= 0:
                continue
            rec.setdefault("unsatisfied", []).append(dict(
                item, basis="libc.version", provided_max=f"GLIBC_{libc}"))
            added = True
        if added:
            _problems_text(rec)
            src = facts.source_of("libc.version") or "libc.version"
            facts.sources[f"libraries[{i}].unsatisfied"] = src
            facts.sources[f"libraries[{i}].unsatisfied_text"] = src


@deriver(after=("compare_unverified_with_libc",))
def remedies_for_logged_loader_errors(facts: Facts, host: Host) -> None:
    """A `shared-library-not-found` log event gets `remedy` from the spec's table when a row
    matches the library name (the rule shows it as the first fix)."""
    events = facts.get("log_events")
    if not isinstance(events, list) or not _REMEDY_TABLE:
        return
    for ev in events:
        if ev.get("signature") == "shared-library-not-found" and ev.get("library"):
            text = _remedy(str(ev["library"]), _REMEDY_TABLE)
            if not text.startswith(f"{ev['library']}: install the package that provides"):
                ev["remedy"] = text
