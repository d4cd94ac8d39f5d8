"""The house rules of the package, checked: no import circle, no module over 400 lines,
collectors never import the rules engine, every shipped data file parses, and every
registered collector or parser is used."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

from conftest import REPO

PKG = REPO / "npu_doctor"
MAX_LINES = 400
#: Modules allowed over MAX_LINES, with why. Keep it empty; an entry is a debt with an owner.
LONG_MODULES: Set[str] = set()


def _modules() -> Dict[str, Path]:
    """{dotted module name: file} for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> Set[str]:
    """Package modules this module imports anywhere (module level, in functions, under
    TYPE_CHECKING): an import inside a function still ties the two modules together."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the submodule when there is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:   # `import npu_doctor.x.y` of a name inside x.y
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_walker_sees_the_package():
    assert "npu_doctor.cli" in GRAPH and "npu_doctor.cli.common" in GRAPH["npu_doctor.cli.check"]
    assert "npu_doctor.host" in GRAPH["npu_doctor.probes"]


def test_no_import_circle():
    """Tarjan's strongly connected components: any component of two or more is a circle."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    circles: List[List[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_no_module_over_400_lines():
    long = {str(p.relative_to(REPO)): n for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and str(p.relative_to(REPO)) not in LONG_MODULES}
    assert not long, f"modules over {MAX_LINES} lines (split them): {long}"


def test_collectors_do_not_import_the_rules_engine():
    engine = {"npu_doctor.rules", "npu_doctor.rule_loader", "npu_doctor.rule_model"}
    bad = {m: sorted(GRAPH[m] & engine) for m in GRAPH
           if m.startswith("npu_doctor.collectors") and GRAPH[m] & engine}
    assert not bad, bad


def test_every_shipped_data_file_parses():
    from npu_doctor.lock import load_spec
    from npu_doctor.probes import load_signatures, load_specs
    from npu_doctor.rules import load_rules

    specs = load_specs(())
    assert {s.id for s in specs}, "no probe specs loaded"
    load_signatures(())
    rs = load_rules(())
    assert rs.rules and rs.matrices
    assert load_spec().fields
    from npu_doctor.catalog import load_catalogs
    from npu_doctor.model.targets import parse_target, target_files

    assert list(load_catalogs().entries())
    targets = target_files([])
    assert targets and all(parse_target(p) for p in targets.values())
    # and nothing else under the data directories is left unread
    for d in ("probes", "rules", "catalogs", "targets"):
        for p in (REPO / d).iterdir():
            assert p.suffix == ".toml" or p.name.startswith("."), f"{d}/{p.name} is not a data file"


def test_every_collector_is_named_by_a_probe_and_every_parser_is_used():
    from npu_doctor import registry

    registry.load_all()
    named: Set[str] = set()
    for p in (REPO / "probes").glob("*.toml"):
        named |= set(re.findall(r'^\s*(?:parser|collector)\s*=\s*"([^"]+)"', p.read_text(), re.M))
    assert named <= set(registry.COLLECTORS) | set(registry.PARSERS), "a probe names nothing registered"
    assert set(registry.COLLECTORS) <= named, \
        f"collectors no probe runs: {sorted(set(registry.COLLECTORS) - named)}"
    # A parser a probe does not name must at least be called by the code (else it is dead).
    code = "\n".join(path.read_text(encoding="utf-8") for path in MODULES.values())
    dead = []
    for name, fn in registry.PARSERS.items():
        if name in named:
            continue
        uses = len(re.findall(rf"\b{re.escape(fn.__name__)}\b", code))
        if uses < 2:   # the definition itself is one
            dead.append(name)
    assert not dead, f"parsers nothing uses: {dead}"


@pytest.mark.parametrize("mod", ["npu_doctor.main", "npu_doctor.__main__"])
def test_entry_points_stay(mod):
    assert mod in MODULES
    assert "npu_doctor.cli" in GRAPH["npu_doctor.main"]


def test_derivers_name_what_they_run_after():
    from npu_doctor import registry

    registry.load_all()
    order = [fn.__name__ for fn in registry.derivers_in_order()]   # raises on unknown or circular
    for name, (after, _key, _fn) in registry.DERIVERS.items():
        assert all(order.index(a) < order.index(name) for a in after), name
