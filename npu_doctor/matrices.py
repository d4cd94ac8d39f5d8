"""Version matrices (`[[matrix]]` tables in rules/*.toml) and the compat records derived
from them: one loader and one setter for every vendor.

A matrix is `[[matrix]] id = "..."`, `description`, and `[[matrix.row]]` tables, each with a
`source` (URL of the vendor page the row comes from). Derivers read rows by matrix id with
`matrix_rows(id)`; the rules engine reads the same tables through `read_matrices`, so
`rules explain` shows exactly what the derivers compare with.

A compat record is what a deriver concluded from a matrix: `compat.<key>` =
{matrix, subject, what, status ("ok" | "mismatch" | "not-in-matrix" | ...), detail, ...};
rules such as runtime-driver-mismatch fire on its `status`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .datafiles import read_toml
from .errors import ConfigError
from .facts import Facts
from .resources import data_files

Rows = List[Dict[str, Any]]


def read_matrices(path: str, data: Optional[Dict[str, Any]] = None) -> Dict[str, Rows]:
    """The `[[matrix]]` tables of one rules file: {matrix id: rows}. `data` is the file
    already parsed (the rules loader has it). Raises ConfigError naming the file and matrix
    for a matrix without id or a row without source."""
    if data is None:
        data = read_toml(path)
    matrices: Dict[str, Rows] = {}
    tables = data.get("matrix", [])
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: `matrix` must be an array of tables ([[matrix]])")
    for n, m in enumerate(tables):
        if not isinstance(m, dict) or not isinstance(m.get("id"), str):
            raise ConfigError(f"{path}: matrix #{n + 1}: missing id")
        rows = m.get("row", [])
        if not isinstance(rows, list):
            raise ConfigError(f"{path}: matrix {m['id']}: `row` must be an array of tables ([[matrix.row]])")
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or not row.get("source"):
                raise ConfigError(f"{path}: matrix {m['id']}: row {i + 1} has no source")
        matrices.setdefault(m["id"], []).extend(rows)
    return matrices


def matrix_descriptions(data: Dict[str, Any]) -> Dict[str, str]:
    """{matrix id: description} of one parsed rules file."""
    tables = data.get("matrix", [])
    return {m["id"]: str(m.get("description", "")) for m in (tables if isinstance(tables, list) else [])
            if isinstance(m, dict) and isinstance(m.get("id"), str)}


#: The shipped matrices of the loaded configuration (npu_doctor.check.Config, read back from
#: the configuration cache with it): a cached start then parses no rules file.
_INSTALLED: Dict[str, Optional[Dict[str, Rows]]] = {"matrices": None}


def install(matrices: Optional[Dict[str, Rows]]) -> Dict[str, Rows]:
    """Use these matrices for shipped_matrices() from now on (None: read the shipped rules
    files now); returns them. Called when a configuration is loaded."""
    if matrices is None:
        _INSTALLED["matrices"] = None
        matrices = shipped_matrices()
    _INSTALLED["matrices"] = matrices
    return matrices


def shipped_matrices() -> Dict[str, Rows]:
    """Every matrix of the shipped rules files, by id: those of the loaded configuration, or
    read from the files. A broken file is skipped here (the rules loader reports it, with
    file and reason, when the check starts)."""
    installed = _INSTALLED["matrices"]
    if installed is not None:
        return installed
    out: Dict[str, Rows] = {}
    for path in data_files("rules", ()):
        try:
            mats = read_matrices(path)
        except ConfigError:
            continue
        for k, rows in mats.items():
            out.setdefault(k, []).extend(rows)
    return out


def matrix_rows(matrix_id: str) -> Rows:
    """Rows of one shipped matrix by id; [] when no file defines it. Those of the loaded
    configuration (`watch` reloads it on SIGHUP), else the files' (parsed once, remembered
    per modification time by npu_doctor.datafiles), so derivers may call this on every run."""
    return shipped_matrices().get(matrix_id, [])


def matrix_source(matrix_id: str) -> str:
    """The provenance of a compat record that has no fact to point at: its matrix."""
    return f"rules/ matrix {matrix_id}"


def set_compat(facts: Facts, key: str, rec: Dict[str, Any], source: Optional[str]) -> None:
    """Store a compat record as `compat.<key>` with its source (a fact's source, or
    `matrix_source`); if another probe already made `compat` a list of records, append to
    it (with `key`) instead (the rules iterate either form)."""
    cur = facts.data.get("compat")
    if isinstance(cur, list):
        rec = dict(rec, key=key)
        cur.append(rec)
        if source:
            facts.sources[f"compat[{len(cur) - 1}]"] = source
        return
    facts.set(f"compat.{key}", rec, source)
