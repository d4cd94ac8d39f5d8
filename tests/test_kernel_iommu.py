"""Kernel lines that name only a bus address (Intel DMAR, AMD-Vi without a driver prefix, the PCI core):
they count for an accelerator only when another line names the same device with its driver."""

from __future__ import annotations

from npu_doctor.catalog.events import full_bdf

from conftest import check_json, finding_ids, make_snapshot

NV = "[    5.1] nvidia 0000:03:00.0: enabling device (0000 -> 0003)\n"


def test_full_bdf_reads_the_v5_14_dmar_form():
    assert full_bdf("0x03:0x00.0") == "0000:03:00.0"
    assert full_bdf("03:00.0") == "0000:03:00.0"


def _findings(tmp_path, dmesg):
    report = check_json(make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, dmesg)]))
    return [f for f in report["findings"] if f["id"] == "device-unhealthy"]


def test_dmar_fault_on_an_accelerator_is_a_finding(tmp_path):
    for line in ("DMAR: [DMA Read NO_PASID] Request device [03:00.0] fault addr 0x100000 [fault reason 0x71] "
                 "SM: Present bit in first-level paging entry is clear",
                 "DMAR: [DMA Write NO_PASID] Request device [0x03:0x00.0] fault addr 0x7c346000 [fault reason 0x05] "
                 "PTE Write access is not set",
                 "DMAR: [DMA Read] Request device [03:00.0] PASID ffffffff fault addr 1a5e12000 [fault reason 06] "
                 "PTE Read access is not set"):
        (f,) = _findings(tmp_path, NV + f"[    9.2] {line}\n")
        assert f["subject"] == "nvidia 0000:03:00.0"


def test_dmar_fault_of_another_device_is_dropped(tmp_path):
    line = ("[    0.36] DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] "
            "Present bit in root entry is clear\n")
    assert "device-unhealthy" not in finding_ids(check_json(
        make_snapshot(tmp_path / "s", commands=[(["dmesg"], 0, NV + line)])))


def test_amd_vi_page_fault_without_driver_prefix(tmp_path):
    line = "[  221.5] AMD-Vi: Event logged [IO_PAGE_FAULT device=03:00.0 domain=0x0012 address=0x00000000ff6101b0 flags=0x0070]\n"
    (f,) = _findings(tmp_path, NV + line)
    assert f["subject"] == "nvidia 0000:03:00.0"


def test_pci_core_d3_line_counts_when_a_driver_line_names_the_device(tmp_path):
    # Bumblebee-Project/bbswitch#159: the PCI core prints it as "pci" when no driver is bound
    d3 = "[    9.0] pci 0000:03:00.0: Refused to change power state, currently in D3\n"
    report = check_json(make_snapshot(tmp_path / "a", commands=[(["dmesg"], 0, NV + d3)]))
    assert [f["subject"] for f in report["findings"] if f["id"] == "device-unresponsive"] == ["nvidia 0000:03:00.0"]
    report = check_json(make_snapshot(tmp_path / "b", commands=[(["dmesg"], 0, d3)]))
    assert "device-unresponsive" not in finding_ids(report)
