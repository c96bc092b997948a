"""harness.runner on the PYTHON reference backend: a wrong reference is caught, bad arguments are rejected."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from harness.kernels import all_cases
from harness.runner import check_case, run_kernel, unsupported_reason
from runtime_core.device import Device

pytestmark = pytest.mark.skipif(not Device.probe("PYTHON")[0], reason="the PYTHON backend is not installed")


def _case(name: str):
    return next(c for c in all_cases() if c.name == name)


def test_a_wrong_reference_fails_with_the_case_and_slot() -> None:
    case = _case("transpose_float32")
    wrong = dataclasses.replace(case, reference=lambda arrays: {1: arrays[0]})  # forgot to transpose
    check_case("PYTHON", case, np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"case 'transpose_float32' slot 1 \(float32\): \d+ of 91 float32"):
        check_case("PYTHON", wrong, np.random.default_rng(0))


def test_untouched_padding_is_checked() -> None:
    case = _case("gated_copy_float32")
    arrays = case.inputs(np.random.default_rng(1))
    out = run_kernel("PYTHON", case.kernel, arrays)
    np.testing.assert_array_equal(out[1], arrays[0])          # the gated store wrote only the first 100
    np.testing.assert_array_equal(out[2][100:], np.full(28, -3, np.float32))  # gated loads yielded alt


def test_run_kernel_rejects_wrong_arrays() -> None:
    case = _case("transpose_float32")
    arrays = case.inputs(np.random.default_rng(0))
    with pytest.raises(ValueError, match="has 2 buffers, got 1 arrays"):
        run_kernel("PYTHON", case.kernel, arrays[:1])
    with pytest.raises(ValueError, match="slot 0 holds float32, got an array of float64"):
        run_kernel("PYTHON", case.kernel, [arrays[0].astype(np.float64), arrays[1]])


def test_unsupported_reason_names_the_missing_capability() -> None:
    tree = _case("tree_reduce_float32")
    assert unsupported_reason("PYTHON", tree) is None
    if Device.probe("CPU")[0]:
        assert "lacks local memory" in (unsupported_reason("CPU", tree) or "")


def test_importing_the_plugin_opens_no_device() -> None:
    code = ("import harness.plugin, harness.kernels, harness.runner\n"
            "from runtime_core.device import Device\n"
            "print(Device.opened())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
