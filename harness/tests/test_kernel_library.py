"""The kernel library itself: references against hand-computed values, coverage of every validator-accepted
(op, dtype) and (src, dst) pair, and KernelCase validation. Backend-independent (no device is opened)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernels import KernelCase, all_cases, cast_cases, elementwise_cases
from harness.kernels.elementwise import operand_slots, ops_for
from harness.kernels.semantics import c_idiv, c_mod, reference_alu, reference_cast, wrap
from runtime_core.dtype import dtypes
from runtime_core.ir import ALU_OPS, BINARY, TERNARY, IRError, KernelBuilder, Ops


def _ints(*v: int) -> np.ndarray:
    return np.array(v, dtype=object)


def test_c_division_truncates_toward_zero() -> None:
    a, b = _ints(7, -7, 7, -7, -128), _ints(2, 2, -2, -2, 1)
    assert list(c_idiv(a, b)) == [3, -3, -3, 3, -128]
    assert list(c_mod(a, b)) == [1, -1, 1, -1, 0]


def test_wrap_is_twos_complement() -> None:
    assert list(wrap(_ints(128, -129, 255, 256), dtypes.int8)) == [-128, 127, -1, 0]
    assert list(wrap(_ints(-1, 2**64), dtypes.uint64)) == [2**64 - 1, 0]


def test_integer_alu_references() -> None:
    i8 = dtypes.int8
    a, b = np.array([100, -128, -8], np.int8), np.array([100, 1, 1], np.int8)
    assert list(reference_alu(Ops.ADD, i8, a, b)) == [-56, -127, -7]
    assert list(reference_alu(Ops.NEG, i8, a)) == [-100, -128, 8]
    assert list(reference_alu(Ops.SHR, i8, a, np.array([2, 7, 1], np.int8))) == [25, -1, -4]  # arithmetic
    assert list(reference_alu(Ops.SHL, i8, a, np.array([1, 0, 4], np.int8))) == [-56, -128, -128]
    u8 = dtypes.uint8
    assert list(reference_alu(Ops.SUB, u8, np.array([0], np.uint8), np.array([1], np.uint8))) == [255]


def test_float_alu_references_follow_ieee_maxnum_and_nan_compares() -> None:
    f32 = dtypes.float32
    a, b = np.array([np.nan, 1.0, np.nan], np.float32), np.array([2.0, np.nan, np.nan], np.float32)
    assert reference_alu(Ops.MAX, f32, a, b)[:2].tolist() == [2.0, 1.0]
    assert np.isnan(reference_alu(Ops.MIN, f32, a, b)[2])
    assert reference_alu(Ops.CMPLT, f32, a, b).tolist() == [False, False, False]
    assert reference_alu(Ops.CMPNE, f32, a, b).tolist() == [True, True, True]
    half = reference_alu(Ops.ADD, dtypes.float16, np.array([2048], np.float16), np.array([1], np.float16))
    assert half.dtype == np.float16 and half[0] == 2048  # 2049 rounds to even in float16


def test_cast_references() -> None:
    f = np.array([-1.9, 2.9, 127.5], np.float32)
    assert reference_cast(f, dtypes.float32, dtypes.int8).tolist() == [-1, 2, 127]
    assert reference_cast(np.array([300, -1], np.int32), dtypes.int32, dtypes.uint8).tolist() == [44, 255]
    assert reference_cast(np.array([np.nan, 0.0, -0.0], np.float32), dtypes.float32, dtypes.bool).tolist() == \
        [True, False, False]
    assert reference_cast(np.array([True, False]), dtypes.bool, dtypes.float16).tolist() == [1.0, 0.0]
    assert reference_cast(np.array([2**24 + 1], np.int64), dtypes.int64, dtypes.float32).tolist() == [2.0**24]


def _validator_accepts(op: Ops, dt) -> bool:
    kb = KernelBuilder("probe")
    srcs = [kb.const(True, dtypes.bool) if (op is Ops.WHERE and k == 0) else kb.const(1 if dt is not dtypes.bool
            else True, dt) for k in range(3 if op in TERNARY else 2 if op in BINARY else 1)]
    try:
        kb.alu(op, *srcs)
        kb.build()
    except IRError:
        return False
    return True


def test_elementwise_covers_every_pair_the_validator_accepts() -> None:
    accepted = {(op, dt) for op in ALU_OPS for dt in dtypes.all if _validator_accepts(op, dt)}
    covered = {(op, dt) for dt in dtypes.all for op in ops_for(dt)}
    assert covered == accepted
    assert len(elementwise_cases()) == len(accepted)


def test_casts_cover_every_pair() -> None:
    names = {c.name for c in cast_cases()}
    assert {f"cast_{s.name}_to_{d.name}" for s in dtypes.all for d in dtypes.all} <= names
    assert "bitcast_float32_to_uint32" in names and "bitcast_bool_to_int8" not in names


def test_all_cases_are_unique_and_deterministic() -> None:
    cases = all_cases()
    assert len({c.name for c in cases}) == len(cases)
    case = next(c for c in cases if c.name == "alu_idiv_int32")
    a, b = case.inputs(np.random.default_rng(5)), case.inputs(np.random.default_rng(5))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    divisors = a[operand_slots(Ops.IDIV, dtypes.int32)[0][1]]
    assert not np.any(divisors == 0)


def test_kernel_case_checks_its_vals_and_local_flag() -> None:
    tree = next(c for c in all_cases() if c.needs_local)
    with pytest.raises(ValueError, match="uses local memory; set needs_local=True"):
        KernelCase("x", tree.kernel, tree.inputs, tree.reference, tree.dtype)
    with pytest.raises(ValueError, match="takes 0 vals, got 1"):
        KernelCase("x", tree.kernel, tree.inputs, tree.reference, tree.dtype, vals=(3,), needs_local=True)
