"""Redaction of every private range (10/8 included), CGNAT and link-local, with the placeholder
the module docstring names, while version strings that look like addresses survive."""

from __future__ import annotations

import npu_doctor.redact as redact
from npu_doctor.redact import Redactor


def _redact(text: str) -> str:
    r = Redactor()
    r.scan(text)
    return r.apply(text)


def test_private_cgnat_and_link_local_addresses_are_redacted():
    text = ('10.20.30.41 - - "POST /infer"\n172.20.0.5 up\n192.168.1.9 up\n'
            '169.254.3.4 up\n100.70.1.2 up\n')
    out = _redact(text)
    for ip in ("10.20.30.41", "172.20.0.5", "192.168.1.9", "169.254.3.4", "100.70.1.2"):
        assert ip not in out
    assert out.startswith("192.0.2.1 ")


def test_first_placeholder_is_the_documented_one():
    assert "`192.0.2.1`" in redact.__doc__
    assert _redact("inet 10.1.2.3/24").startswith("inet 192.0.2.1/24")


def test_versions_that_look_like_10_addresses_are_kept():
    text = "libnvinfer10\t10.3.0.26-1+cuda12.5\nTensorRT version 10.3.0.26\n"
    assert _redact(text) == text
