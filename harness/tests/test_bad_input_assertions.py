"""Bad input to ``assert_close``: a clear TypeError/ValueError or a mismatch, never a silent pass or a numpy warning."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from harness import assert_close, tolerance
from runtime_core.dtype import dtypes


@pytest.mark.parametrize(
    ("actual", "dtype", "said"),
    [
        # these passed: integral floats compared as ints, whatever the device returned
        (np.array([1.0, 2.0]), dtypes.int32, "dtype mismatch: actual holds float64 values, expected int32 values"),
        (np.array([1.0, 2.0], np.float32), dtypes.int8, "actual holds float32 values, expected int8 values"),
        (np.array([1.0, 0.0]), dtypes.bool, "actual holds float64 values, expected bool values"),
        (np.array([1, 2], np.int32), dtypes.float32, "actual holds int32 values, expected float32 values"),
    ],
)
def test_actual_array_of_the_wrong_kind_is_a_dtype_mismatch(actual, dtype, said):
    with pytest.raises(AssertionError, match=said):
        assert_close(actual, np.array([1, 2])[: actual.size], dtype, what="out")


def test_wider_float_actual_and_lists_are_still_compared_by_value():
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0]), dtypes.float16)
    assert_close(np.array([1.0, 2.0], ml_dtypes.bfloat16), [1.0, 2.0], dtypes.bfloat16)
    assert_close([1, 2], [1, 2], dtypes.int32)
    assert_close([2**70], [2**70], dtypes.int64)  # Python ints beyond int64 compare exactly
    with pytest.raises(AssertionError, match="actual 1180591620717411303424, expected 1180591620717411303425"):
        assert_close([2**70], [2**70 + 1], dtypes.int64)
    assert_close(np.zeros((0, 3), np.float32), np.zeros((0, 3)), dtypes.float32)


@pytest.mark.parametrize(
    ("actual", "expected", "dtype", "said"),
    [
        (None, None, dtypes.float32, "actual must hold bools, ints or floats, got object values"),  # passed (NaN==NaN)
        (np.array([1 + 2j]), np.array([1 + 3j]), dtypes.float32, "actual must hold .* complex128"),  # dropped imag
        (["1"], ["2"], dtypes.int32, "actual must hold bools, ints or floats, got <U1"),  # compared '1' as 1
        (np.array([1.0]), ["a"], dtypes.float32, "expected must hold bools, ints or floats, got <U1"),
        ([[1.0], [2.0, 3.0]], [[1.0], [2.0, 3.0]], dtypes.float32, "actual is not an array of numbers: .*inhomogeneous"),
        (np.array([1, None], dtype=object), [1, 2], dtypes.int32, "actual must hold bools, ints or floats, got object"),
        ([2**70], [2**70], dtypes.float64, "actual must hold bools, ints or floats, got object"),
    ],
)
def test_non_numeric_inputs_are_a_type_error_naming_the_side(actual, expected, dtype, said):
    with pytest.raises(TypeError, match=said):
        assert_close(actual, expected, dtype)


def test_non_integral_values_for_an_exact_dtype_name_the_side():
    with pytest.raises(AssertionError, match="int32 compares exactly, but expected holds non-integral float values"):
        assert_close(np.array([1], np.int32), np.array([np.nan]), dtypes.int32)


@pytest.mark.parametrize(
    ("kwargs", "error", "said"),
    [
        ({"rtol": float("nan")}, ValueError, "rtol must be a finite number >= 0, got nan"),  # failed every element
        ({"atol": float("inf")}, ValueError, "atol must be a finite number >= 0, got inf"),  # passed every element
        ({"rtol": "0.1"}, TypeError, "rtol must be a real number, got '0.1'"),  # "'<' not supported ..."
        ({"atol": True}, TypeError, "atol must be a real number, got True"),
    ],
)
def test_bad_tolerance_overrides_are_refused(kwargs, error, said):
    with pytest.raises(error, match=said):
        tolerance(dtypes.float32, **kwargs)


def test_huge_differences_give_a_summary_without_numpy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the overflow in the summary's subtraction was a RuntimeWarning
        with pytest.raises(AssertionError, match=r"index \(0,\): actual 1e\+308, expected -1e\+308"):
            assert_close(np.array([1e308]), np.array([-1e308]), dtypes.float64)

