"""One name per vendor across the data files: every `vendor = ...` in probes/, catalogs/ and
targets/ is a contract vendor of `accelerators[].vendor` (docs/architecture.md), so a
Rockchip NPU is `rknpu` everywhere (file names such as probes/rockchip.toml may name the
company; the field names the accelerator kind)."""

from __future__ import annotations

import re

from conftest import REPO

CONTRACT_VENDORS = {"ascend", "rknpu", "intel-npu", "amd-xdna", "hailo", "coral", "jetson", "nvidia"}
_FIELD = re.compile(r'^\s*vendor\s*=\s*"([^"]*)"', re.M)


def test_vendor_fields_use_the_contract_names():
    seen = {}
    for d in ("probes", "catalogs", "targets", "rules"):
        for path in sorted((REPO / d).glob("*.toml")):
            for name in _FIELD.findall(path.read_text(encoding="utf-8")):
                seen.setdefault(name, []).append(f"{d}/{path.name}")
    odd = {k: v for k, v in seen.items() if k not in CONTRACT_VENDORS}
    assert odd == {}
    assert "rknpu" in seen


def test_the_docs_list_the_same_vendors():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = re.search(r"`vendor` \(`([^)]*)`\)", text)
    assert listed, "docs/architecture.md no longer lists the accelerator vendors"
    assert set(listed.group(1).split("|")) == CONTRACT_VENDORS
