"""Companion packages built for another release of the framework they extend (hunt t4): OpenMMLab's
mmcv range assert, CuPy's duplicate-wheel check, TensorFlow Probability/Addons/Keras version
checks, TensorFlow custom-op libraries with undefined tensorflow:: symbols, JAX APIs removed under
old library code, and torch inductor's Triton checks. Real lines from tests/cases/t401-t410 and the
reports cited in the catalogs; what must stay silent is tested too."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import check_json, make_snapshot

CASES = Path(__file__).resolve().parent / "cases"


def _findings(tmp_path: Path, text: str, rule: str = "toolkit-runtime-mismatch"):
    snap = make_snapshot(tmp_path / "snap", logs={"app.log": text})
    return [f for f in check_json(snap)["findings"] if f["id"] == rule]


@pytest.mark.parametrize("prefix,rule,subject", [
    ("t401", "toolkit-runtime-mismatch", "MMCV"),
    ("t402", "toolkit-runtime-mismatch", "MMCV"),
    ("t403", "toolkit-runtime-mismatch", "CuPy"),
    ("t404", "toolkit-runtime-mismatch", "TensorFlow Probability"),
    ("t405", "toolkit-runtime-mismatch", "TensorFlow Addons"),
    ("t407", "toolkit-runtime-mismatch", "Keras"),
    ("t408", "toolkit-runtime-mismatch", "JAX API"),
    ("t409", "toolkit-runtime-mismatch", "triton"),
    ("t410", "toolkit-runtime-mismatch", "triton")])
def test_one_finding_per_case(prefix, rule, subject):
    rep = check_json(next(CASES.glob(prefix + "-*")))
    got = [f for f in rep["findings"] if f["id"] == rule]
    assert [f["subject"] for f in got] == [subject]


def test_tensorflow_io_undefined_tf_symbol_is_the_companion_not_the_generic_loader_class():
    rep = check_json(next(CASES.glob("t406-*")))
    ids = [f["id"] for f in rep["findings"]]
    assert "framework-backend-mismatch" in ids and "symbol-version-unsatisfied" not in ids


def test_mmcv_message_names_version_and_range(tmp_path):
    got = _findings(tmp_path, "AssertionError: MMCV==1.3.9 is used but incompatible. Please install "
                              "mmcv>=(1, 3, 13, 0, 0, 0), <(1, 7, 0, 0, 0, 0).\n")
    assert len(got) == 1 and "1.3.9" in got[0]["message"] and "<(1, 7, 0, 0, 0, 0)" in got[0]["message"]


def test_tfp_message_names_both_versions(tmp_path):
    got = _findings(tmp_path, "ImportError: This version of TensorFlow Probability requires TensorFlow "
                              "version >= 2.10; Detected an installation of version 2.9.0. Please "
                              "upgrade TensorFlow to proceed.\n")
    assert len(got) == 1 and ">= 2.10" in got[0]["message"] and "2.9.0" in got[0]["message"]


def test_tfa_warnings_are_warnings(tmp_path):
    got = _findings(tmp_path, "UserWarning: You are currently using TensorFlow 2.3.1 and trying to load "
                              "a custom op (custom_ops/image/_resampler_ops.so).\n")
    assert [f["severity"] for f in got] == ["warning"]


def test_jax_removed_with_message(tmp_path):
    got = _findings(tmp_path, "AttributeError: jax.tree_map was removed in JAX v0.6.0: use jax.tree.map "
                              "(jax v0.4.25 or newer) or jax.tree_util.tree_map (any JAX version).\n")
    assert len(got) == 1 and "0.6.0" in got[0]["message"]


def test_silent_lines(tmp_path):
    # xformers on Windows without triton is a notice (triton itself absent, no release mismatch);
    # another package's missing attribute and a plain TensorFlow/Keras version print are not these
    text = ("A matching Triton is not available, some optimizations will not be enabled.\n"
            "Error caught was: No module named 'triton'\n"
            "AttributeError: module 'numpy' has no attribute 'frobnicate'\n"
            "AttributeError: module 'jaxtyping' has no attribute 'Foo'\n"
            "tensorflow 2.16.1 keras 3.3.3\n"
            "MMCV version 2.1.0 is used\n")
    assert _findings(tmp_path, text) == []
