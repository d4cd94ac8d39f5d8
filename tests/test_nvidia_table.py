"""nvidia-smi's default table pasted into a log (parsers.nvidia_table, collectors.nvidia)."""

from npu_doctor.parsers.nvidia_table import parse_nvidia_smi_table

# R384 (tests/cases/n411: fireice-uk/xmr-stak-nvidia#39): no CUDA Version in the header
R384 = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 384.66                 Driver Version: 384.66                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  TITAN Xp            Off  | 00000000:41:00.0  On |                  N/A |
| 29%   47C    P5    28W / 250W |   2789MiB / 12174MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|    0      1568    G   /usr/lib/xorg/Xorg                            1850MiB |
"""

# R580 (tests/cases/n410: Project-HAMi/HAMi#1903): three rows per GPU
R580 = """\
| NVIDIA-SMI 580.119.02             Driver Version: 580.119.02     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A800 80GB PCIe          Off |   00000000:01:00.0 Off |                    0 |
| N/A   27C    P0             46W /  300W |       0MiB /  81920MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA A800 80GB PCIe          Off |   00000000:81:00.0 Off |                    0 |
| N/A   26C    P0             47W /  300W |       0MiB /  81920MiB |      0%      Default |
"""

# an ERR! cell (tests/cases/n412: Azure/azhpc-diagnostics#77), no header
ERR = """\
|   1  Tesla V100-PCIE...  On   | 00008ED0:00:00.0 Off |                    0 |
| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |
"""

# R510 with MIG enabled on GPU 1 (XuehaiPan/nvitop#8): "On" in the ECC cell, N/A utilisation
R510_MIG = """\
| NVIDIA-SMI 510.47.03    Driver Version: 510.47.03    CUDA Version: 11.6     |
|   0  NVIDIA A100-SXM...  On   | 00000000:01:00.0 Off |                    0 |
| N/A   38C    P0   163W / 500W |  23100MiB / 81920MiB |     58%      Default |
|                               |                      |             Disabled |
|   1  NVIDIA A100-SXM...  On   | 00000000:41:00.0 Off |                   On |
| N/A   38C    P0   178W / 500W |  24205MiB / 81920MiB |     N/A      Default |
"""


def test_r384_header_without_cuda_and_two_row_gpu():
    got = parse_nvidia_smi_table(R384)
    assert got["driver_version"] == "384.66" and got["cuda_version"] is None
    (gpu,) = got["gpus"]
    assert gpu["name"] == "TITAN Xp" and gpu["pci_address"] == "0000:41:00.0"
    assert gpu["persistence_mode"] == "Disabled"
    assert gpu["temperature_c"] == 47 and gpu["power_w"] == 28 and gpu["power_limit_w"] == 250
    assert gpu["fan_percent"] == 29 and gpu["utilization_percent"] == 0
    assert gpu["memory_used_bytes"] == 2789 << 20 and gpu["memory_total_bytes"] == 12174 << 20
    assert gpu["performance_state"] == "P5" and gpu["compute_mode"] == "Default"
    assert "ecc_uncorrectable_volatile" not in gpu  # N/A: unknown, not 0


def test_r580_wide_layout_two_gpus():
    got = parse_nvidia_smi_table(R580)
    assert (got["driver_version"], got["cuda_version"]) == ("580.119.02", "13.0")
    a, b = got["gpus"]
    assert a["name"] == b["name"] == "NVIDIA A800 80GB PCIe"
    assert (a["index"], a["pci_address"], a["temperature_c"], a["power_w"]) == (0, "0000:01:00.0", 27, 46)
    assert (b["index"], b["pci_address"], b["temperature_c"], b["power_w"]) == (1, "0000:81:00.0", 26, 47)
    assert a["ecc_uncorrectable_volatile"] == 0 and "fan_percent" not in a


def test_err_cell_is_unknown_not_a_number():
    (gpu,) = parse_nvidia_smi_table(ERR)["gpus"]
    assert gpu["pci_address"] == "8ed0:00:00.0" and gpu["temperature_c"] == 29
    assert "power_w" not in gpu and gpu["power_limit_w"] == 250
    assert gpu["smi_unreadable"] == ["power"]
    assert gpu["name"] == "Tesla V100-PCIE..." and gpu["name_truncated"] is True


def test_mig_enabled_row_and_na_utilisation():
    a, b = parse_nvidia_smi_table(R510_MIG)["gpus"]
    assert a["utilization_percent"] == 58 and "utilization_percent" not in b
    assert "ecc_uncorrectable_volatile" not in b  # "On": the MIG cell, not a count


def test_last_table_wins_and_no_table():
    got = parse_nvidia_smi_table(R384 + R580)
    assert got["driver_version"] == "580.119.02" and len(got["gpus"]) == 2
    assert parse_nvidia_smi_table("no table here\n| just | a pipe |") == {
        "driver_version": None, "cuda_version": None, "gpus": []}
