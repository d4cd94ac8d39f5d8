"""One `check` run: host -> probes -> facts -> rules -> findings (what every command builds on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence

from . import __version__
from .errors import ConfigError
from .facts import Facts
from .host import Host
from .probe_runner import run_probes
from .probes import ProbeResult, ProbeSpec, Signature, load_signatures, load_specs
from .rules import Finding, RuleSet, evaluate, filter_findings, load_rules

if TYPE_CHECKING:  # the catalogs are read back from the cache unpickled (configcache)
    from .catalog.matcher import CatalogSet

SCHEMA = "npu-doctor/report/v1"
#: JSON Schema (2020-12) of the report; the file ships as npu_doctor/schema/report-v1.json.
SCHEMA_URL = "https://raw.githubusercontent.com/npu-doctor/npu-doctor/main/npu_doctor/schema/report-v1.json"


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class CheckResult:
    """One check: the host it looked at, the merged facts, each probe's result, the findings."""

    host: Host
    facts: Facts
    probes: List[ProbeResult]
    findings: List[Finding]

    def to_json(self) -> Dict:
        """The report in the `check --format json` contract (docs/architecture.md)."""
        return {
            "$schema": SCHEMA_URL,
            "schema": SCHEMA,
            "tool": {"name": "npu-doctor", "version": __version__},
            "host": self.host.describe(),
            "facts": self.facts.to_dict(),
            "findings": [f.to_json() for f in self.findings],
            "probes": [p.to_json() for p in self.probes],
        }


@dataclass(eq=False)  # compared by identity; no generated __eq__ (start-up)
class Config:
    """Loaded probe specs and rules; `watch` reloads it on SIGHUP."""

    specs: List[ProbeSpec]
    rules: RuleSet
    signatures: List[Signature]
    catalogs: CatalogSet
    #: the shipped rules files' version matrices (npu_doctor.matrices), kept with the rest so
    #: that a cached start reads no rules file at all
    matrices: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)
    #: names this configuration in the user cache (catalog.eventcache); "" when it has none
    digest: str = ""

    @classmethod
    def load(cls, probe_dirs: Iterable[str] = (), rule_dirs: Iterable[str] = ()) -> "Config":
        """Raises ConfigError for a bad probe spec or rules file. What was loaded before from
        the same files is read back from the user cache (npu_doctor.configcache)."""
        from . import configcache, matrices, regexmemo, registry
        from .catalog import eventcache

        probe_dirs, rule_dirs = list(probe_dirs), list(rule_dirs)
        try:
            key: Optional[tuple] = configcache.key(probe_dirs, rule_dirs)
        except OSError:
            key = None
        if key is not None:
            hit = configcache.load(key)
            if isinstance(hit, cls):
                registry.load_all()  # the collectors the specs name, by import
                matrices.install(hit.matrices)
                hit.digest = eventcache.config_digest(key)
                return hit
        from .catalog.matcher import load_catalogs  # only when the files are read
        from .datafiles import save_cache

        rules = load_rules(rule_dirs)
        catalogs = load_catalogs(rule_dirs)
        check_catalog_rules(catalogs, rules)
        config = cls(load_specs(probe_dirs), rules, load_signatures(probe_dirs), catalogs)
        config.matrices = matrices.install(None)
        save_cache()
        regexmemo.save()
        if key is not None:
            configcache.save(key, config)
            config.digest = eventcache.config_digest(key)
        return config


def check_catalog_rules(catalogs: CatalogSet, rules: RuleSet) -> None:
    """Every catalog entry raises a rule that exists. Raises ConfigError naming the entry."""
    known = {r.id for r in rules.rules}
    for e in catalogs.entries():
        if e.rule and e.rule not in known:
            raise ConfigError(f"{e.catalog}: entry {e.key}: rule {e.rule!r} is not a known rule id")


def run_check(host: Host, config: Config, select: Sequence[str] = (),
              ignore: Sequence[str] = (), only_fast: bool = False,
              progress: Optional[Callable[[str], None]] = None,
              sample_s: float = 0.0, deep: Optional[Dict] = None,
              pool: Optional[Any] = None) -> CheckResult:
    """`deep`: None for a plain check; a dict of npu_doctor.deep.deep_runs keyword arguments
    (python, timeout_s, ...) to also run the active inference probes (`check --deep`).
    `pool`: the workerpool.WorkerPool the probes run on (watch keeps one), else new threads."""
    specs = [s for s in config.specs if s.fast] if only_fast else config.specs
    facts, results = run_probes(host, specs, progress=progress, options={"sample_s": sample_s, "signatures": config.signatures,
                                                "catalogs": config.catalogs,
                                                "config_digest": config.digest}, pool=pool)
    if deep is not None:
        from .deep import deep_runs

        deep_facts, deep_rows = deep_runs(host, facts, progress=progress, **deep)
        facts.merge(deep_facts)
        results = list(results) + deep_rows
    probe_rows = [p.to_json() for p in results]
    findings = evaluate(config.rules, facts, probe_rows)
    findings = filter_findings(findings, select, ignore)
    from . import regexmemo

    regexmemo.save()  # what the run derived from patterns (a cached configuration loads none)
    return CheckResult(host, facts, results, findings)
