"""Every public function and method of capture/, watch/ and report.py says what it takes and
gives (docs for the modules people call from outside)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PKG = REPO / "npu_doctor"
DOCUMENTED = sorted([*(PKG / "capture").glob("*.py"), *(PKG / "watch").glob("*.py"), PKG / "report.py"])


def _public_defs(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                    yield f"{node.name}.{sub.name}", sub


def test_public_functions_have_docstrings():
    missing = [f"{p.relative_to(REPO)}:{node.lineno} {name}"
               for p in DOCUMENTED for name, node in _public_defs(p) if not ast.get_docstring(node)]
    assert missing == []
