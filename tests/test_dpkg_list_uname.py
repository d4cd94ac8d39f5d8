"""`dpkg -l` listings and `uname -a` lines as bug reports paste them (parsers/dpkg.py,
parsers/proc.py), and the snapshot fallbacks that use them."""

import pytest

from npu_doctor.parsers.dpkg import parse_dpkg_l
from npu_doctor.parsers.proc import parse_uname_a

# tensorflow/tensorflow#34135 (`dpkg -l | grep edgetpu`, with the header row the grep kept)
DPKG_L_GREP = """||/ Name                   Version  Architecture  Description
ii  libedgetpu1-std:amd64  16.0     amd64         Support library for Edge TPU
"""

# a full `dpkg -l` header (dpkg-query --list) with a removed and a half-configured package
DPKG_L_FULL = """Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name            Version      Architecture Description
+++-===============-============-============-=====================================
ii  edgetpu-compiler 16.0        amd64        Edge TPU model compiler
iF  gasket-dkms     1.0-18       all          DKMS source for the gasket driver
rc  libedgetpu1-max:amd64 15.0   amd64        Support library for Edge TPU
iiR python3-pycoral 2.0.0        arm64        Coral Python API
"""


def test_dpkg_l_grep_filtered_row():
    assert parse_dpkg_l(DPKG_L_GREP) == {"libedgetpu1-std": "16.0"}


def test_dpkg_l_full_listing_keeps_packages_on_disk_only():
    pkgs = parse_dpkg_l(DPKG_L_FULL)
    assert pkgs == {"edgetpu-compiler": "16.0", "gasket-dkms": "1.0-18", "python3-pycoral": "2.0.0"}
    assert "libedgetpu1-max" not in pkgs   # rc: removed, config files left


def test_dpkg_l_rejects_other_text():
    with pytest.raises(ValueError):
        parse_dpkg_l("libedgetpu1-std\t16.0\n")


@pytest.mark.parametrize("line, want", [
    # google-coral/edgetpu#116 (Mendel 2 on the Dev Board)
    ("Linux lime-goose 4.9.51-imx #1 SMP PREEMPT Thu Jan 31 01:58:26 UTC 2019 aarch64 GNU/Linux",
     {"release": "4.9.51-imx", "machine": "aarch64"}),
    # processor and hardware platform printed (coreutils on x86)
    ("Linux host 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023 x86_64 x86_64 x86_64 GNU/Linux",
     {"release": "5.15.0-91-generic", "machine": "x86_64"}),
    # google-coral/edgetpu#871 (ChromeOS Linux container): no trailing OS token after the machine
    ("Linux penguin 6.6.46-04024-g9e7e147b4900 #1 SMP PREEMPT Thu, 3 Oct 2024 12:57:30 +0000 aarch64 GNU/Linux",
     {"release": "6.6.46-04024-g9e7e147b4900", "machine": "aarch64"}),
    ("Darwin mac 23.1.0 Darwin Kernel Version 23.1.0", {}),
    ("uname: command not found", {}),
])
def test_parse_uname_a(line, want):
    assert parse_uname_a(line) == want
