"""The docs stay true: the walk-through's catalog loads and matches its example, and the
matrix page lists every shipped version matrix and its sources."""

from __future__ import annotations

import json
import re
from pathlib import Path

from npu_doctor.catalog import CatalogSet, load_catalog_file
from npu_doctor.rules import load_rules

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def test_adding_a_log_signature_walkthrough_runs(tmp_path):
    text = (DOCS / "adding-a-log-signature.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    line = re.search(r"```text\n(.*?)\n```", text, re.S).group(1)
    path = tmp_path / "example.toml"
    path.write_text(block)
    cs = CatalogSet([load_catalog_file(str(path))])
    evs = cs.match_text(line, "dmesg", ("kernel",), "kernel")
    assert len(evs) == 1
    ev = evs[0]
    assert ev["rule"] == "driver-probe-failed" and ev["errno_name"] == "ETIMEDOUT"
    assert ev["vendor"] == "amd-xdna" and "SMU did not power" in ev["message"]
    assert ev["rule"] in {r.id for r in load_rules().rules}


def test_matrix_page_lists_every_matrix_and_source():
    page = (DOCS / "matrices.md").read_text()
    rs = load_rules()
    for mid, rows in rs.matrices.items():
        assert f"`{mid}`" in page, mid
        for row in rows:
            assert row["source"] in page, (mid, row["source"])


def test_a_site_catalog_in_a_rules_dir_is_used_by_check_and_explain(tmp_path):
    from conftest import make_snapshot, run_cli

    text = (DOCS / "adding-a-log-signature.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    line = re.search(r"```text\n(.*?)\n```", text, re.S).group(1)
    site = tmp_path / "site"
    site.mkdir()
    (site / "example.toml").write_text(block)
    snap = make_snapshot(tmp_path / "snap", commands=[{"argv": ["dmesg"], "returncode": 0, "stdout": line + "\n"}])
    proc = run_cli("check", "--snapshot", str(snap), "--rules", str(site), "--format", "json", "--fail-on", "never")
    assert proc.returncode == 0, proc.stderr
    found = [f for f in json.loads(proc.stdout)["findings"] if f["id"] == "driver-probe-failed"]
    assert found and "SMU did not power" in found[0]["message"]
    assert "AIE2_SMU_POWER" in run_cli("explain", "--rules", str(site), line).stdout


def test_readme_checks_block_is_rules_list():
    """README's "Checks" block is what `npu-doctor rules list` prints: a rule added or retitled
    shows there too (it had drifted: input-truncated missing, power-throttling's old title)."""
    from conftest import run_cli

    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Checks"):]
    block = block[block.index("```text\n") + len("```text\n"):]
    block = block[:block.index("```\n")]
    out = run_cli("rules", "list", env={"NO_COLOR": "1"})
    assert out.returncode == 0
    assert block.splitlines() == out.stdout.splitlines()
