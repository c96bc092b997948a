"""assert_close: tolerances per dtype, NaN/inf rules, and the mismatch summary."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness import TOLERANCES, assert_close, tolerance
from runtime_core.dtype import dtypes


def _message(actual, expected, dtype, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        assert_close(actual, expected, dtype, **kw)
    return str(info.value)


def test_exact_dtypes_report_count_errors_and_first_index() -> None:
    msg = _message(np.array([1, 2, 3, 4], np.int8), np.array([1, 2, 5, 0], np.int8), dtypes.int8, what="out")
    assert msg.splitlines() == [
        "out: 2 of 4 int8 elements differ (50%; exact comparison)",
        "max abs error 4 at index (3,); max rel error 0.4 at index (2,)",
        "  index (2,): actual 3, expected 5",
        "  index (3,): actual 4, expected 0"]


def test_ints_compare_exactly_even_beyond_float64_precision() -> None:
    big = np.array([2**63 - 1], dtype=np.int64)
    assert "1 of 1 int64" in _message(big, big - 1, dtypes.int64)
    assert_close(np.array([2**64 - 1], np.uint64), np.array([2**64 - 1], np.uint64), dtypes.uint64)


def test_bool_is_exact() -> None:
    assert_close(np.array([True, False]), np.array([True, False]), dtypes.bool)
    assert "1 of 2 bool" in _message(np.array([True, True]), np.array([True, False]), dtypes.bool)


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64])
def test_float_tolerance_boundary(dt) -> None:
    tol = TOLERANCES[dt]
    expected = np.array([100.0, -3.0])
    inside = expected * (1 + 0.5 * tol.rtol)
    outside = expected * (1 + 3 * tol.rtol) + np.sign(expected) * 3 * tol.atol
    assert_close(inside.astype(np.float64), expected, dt)
    msg = _message(outside.astype(np.float64), expected, dt)
    assert msg.startswith(f"2 of 2 {dt.name} elements differ")
    assert f"rtol={tol.rtol:g}, atol={tol.atol:g}" in msg


def test_nan_positions_must_match() -> None:
    assert_close(np.array([np.nan, 1.0], np.float32), np.array([np.nan, 1.0], np.float32), dtypes.float32)
    msg = _message(np.array([np.nan, 1.0], np.float32), np.array([0.0, 1.0], np.float32), dtypes.float32)
    assert "NaN positions differ at 1 element(s)" in msg
    assert "index (0,): actual nan, expected 0.0" in msg


def test_infinities_must_match_in_sign() -> None:
    assert_close(np.array([np.inf, -np.inf]), np.array([np.inf, -np.inf]), dtypes.float64)
    assert "2 of 2" in _message(np.array([np.inf, 1e308]), np.array([-np.inf, np.inf]), dtypes.float64)


def test_bfloat16_arrays_are_accepted() -> None:
    x = np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16)
    assert_close(x, np.array([1.0, 2.5]), dtypes.bfloat16)


def test_max_relative_error_is_reported() -> None:
    msg = _message(np.array([1.0, 10.0, 0.5]), np.array([1.0, 11.0, 1.0]), dtypes.float64)
    assert "max abs error 1 at index (1,); max rel error 0.5 at index (2,)" in msg


def test_long_mismatch_lists_are_truncated() -> None:
    msg = _message(np.zeros(100, np.float32), np.ones(100, np.float32), dtypes.float32)
    assert msg.splitlines()[-1] == "  ... and 95 more"


def test_shape_mismatch() -> None:
    assert _message(np.zeros(3), np.zeros((3, 1)), dtypes.float64) == "shape mismatch: actual (3,), expected (3, 1)"


def test_overrides_and_bad_arguments() -> None:
    assert_close(np.array([1.1]), np.array([1.0]), dtypes.float32, rtol=0.2)
    assert tolerance(dtypes.float32, atol=0.5).atol == 0.5
    with pytest.raises(ValueError, match="compares exactly"):
        tolerance(dtypes.int32, rtol=0.1)
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        tolerance(dtypes.float32, rtol=-1.0)
    with pytest.raises(TypeError, match="runtime DType"):
        assert_close(np.zeros(1), np.zeros(1), np.float32)  # type: ignore[arg-type]
