"""PTX float arithmetic (mock_gpu.ptx.alu) against an independent exact reference: Python Fractions rounded with
integer arithmetic to the target format in each IEEE rounding direction."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _float_util import MODES, as_f64, as_storage, bits, check_against, random_values, ref_round

from mock_gpu.ptx import alu

S = alu.AluSpec


@pytest.mark.parametrize("fmt", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma", "div"])
def test_rounded_ops_match_exact_reference(op, mode, fmt, rng):
    n = 300
    a, b, c = (random_values(fmt, n, rng) for _ in range(3))
    if op == "fma":  # force heavy cancellation in half the lanes: c ~ -(a*b)
        prod = as_f64(a, fmt) * as_f64(b, fmt)
        near = as_storage(-prod, fmt) if fmt != "f16" else (-prod).astype(np.float16)
        c = np.where(np.arange(n) % 2 == 0, near, c)
    fa, fb, fc = (list(map(Fraction, as_f64(x, fmt))) for x in (a, b, c))
    exact = {"add": lambda i: fa[i] + fb[i], "sub": lambda i: fa[i] - fb[i], "mul": lambda i: fa[i] * fb[i],
             "fma": lambda i: fa[i] * fb[i] + fc[i], "div": lambda i: fa[i] / fb[i]}[op]
    expected = []
    for i in range(n):
        v = exact(i)
        expected.append(ref_round(v, fmt, mode) if v != 0 else (-0.0 if mode == "rm" else 0.0))
    operands = (a, b, c) if op == "fma" else (a, b)
    check_against(alu.execute(S(op, fmt, frozenset({mode})), *operands), expected, fmt)


def test_f64_fma_near_ties_is_single_rounded():
    # a*b = 1 + 2^-52 + 2^-104 (tiny tail); c chosen so that a*b + c sits next to a rounding midpoint
    rng = np.random.default_rng(7)
    a = 1.0 + rng.integers(1, 2**20, 400) * 2.0**-52
    b = 1.0 + rng.integers(1, 2**20, 400) * 2.0**-52
    c = -(a * b) + rng.choice([1.0, -1.0], 400) * 2.0**-60
    for mode in MODES:
        got = alu.execute(S("fma", "f64", frozenset({mode})), a, b, c)
        want = [ref_round(Fraction(x) * Fraction(y) + Fraction(z), "f64", mode) for x, y, z in zip(a, b, c)]
        check_against(got, want, "f64")


def test_fma_f32_is_single_rounded():
    # a*b = 2^-24 * (1 - 2^-46); c = 1 + 2^-23. Exact sum = 1 + 2^-23 + 2^-24 - 2^-70, just below an f32 tie.
    # Rounding through float64 first would land on the tie and round to even (0x3f800002); the answer is 0x3f800001.
    a = np.array([2.0**-24 * (1 + 2.0**-23)], dtype=np.float32)
    b = np.array([1 - 2.0**-23], dtype=np.float32)
    c = np.array([1 + 2.0**-23], dtype=np.float32)
    assert bits(alu.execute(S("fma", "f32", frozenset({"rn"})), a, b, c))[0] == 0x3F800001
    assert bits(alu.execute(S("mad", "f32", frozenset({"rn"})), a, b, c))[0] == 0x3F800001
    assert bits(alu.execute(S("fma", "f32", frozenset({"rp"})), a, b, c))[0] == 0x3F800002


def test_fma_f32_near_ties_mixed_with_ordinary_lanes_are_single_rounded():
    # every other lane's exact sum lies within 2^-70 of a float32 tie (float64 rounds it onto the tie); the others
    # are random: both kinds in one vector, as a kernel's lanes are
    rng = np.random.default_rng(11)
    n = 400
    k = rng.integers(0, 2**22, n).astype(np.float64)
    a = (2.0**-24 * (1 + rng.choice([1.0, 3.0], n) * 2.0**-23)).astype(np.float32)
    b = (1 + rng.choice([-1.0, 1.0], n) * 2.0**-23).astype(np.float32)
    c = (1 + k * 2.0**-23).astype(np.float32)
    ordinary = np.arange(n) % 2 == 1
    a[ordinary], b[ordinary] = rng.standard_normal((2, int(ordinary.sum()))).astype(np.float32)
    want = [ref_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), "f32", "rn")
            for x, y, z in zip(a, b, c)]
    check_against(alu.execute(S("fma", "f32", frozenset({"rn"})), a, b, c), want, "f32")


def test_one_third_directed_rounding_constants():
    one, three = np.array([1.0], np.float32), np.array([3.0], np.float32)
    want32 = {"rn": 0x3EAAAAAB, "rz": 0x3EAAAAAA, "rm": 0x3EAAAAAA, "rp": 0x3EAAAAAB}
    want64 = {"rn": 0x3FD5555555555555, "rz": 0x3FD5555555555555, "rm": 0x3FD5555555555555,
              "rp": 0x3FD5555555555556}
    for mode in MODES:
        assert bits(alu.execute(S("div", "f32", frozenset({mode})), one, three))[0] == want32[mode]
        assert bits(alu.execute(S("div", "f64", frozenset({mode})), one.astype(np.float64),
                                three.astype(np.float64)))[0] == want64[mode]
        assert bits(alu.execute(S("rcp", "f32", frozenset({mode})), three))[0] == want32[mode]
    neg = bits(alu.execute(S("div", "f32", frozenset({"rm"})), -one, three))[0]
    assert neg == 0xBEAAAAAB


@pytest.mark.parametrize("fmt", ["f32", "f64"])
@pytest.mark.parametrize("mode", MODES)
def test_sqrt_brackets_exact_root(fmt, mode):
    rng = np.random.default_rng(11)
    x = np.abs(as_f64(random_values(fmt, 200, rng, spread=30), fmt)).astype(np.float32 if fmt == "f32" else np.float64)
    r = alu.execute(S("sqrt", fmt, frozenset({mode})), x)
    for xi, ri in zip(x, r):
        X, R = Fraction(float(xi)), Fraction(float(ri))
        up = Fraction(float(np.nextafter(ri, np.inf)))
        down = Fraction(float(np.nextafter(ri, -np.inf)))
        if mode in ("rz", "rm"):
            assert R * R <= X < up * up
        elif mode == "rp":
            assert down * down < X <= R * R
        else:
            assert ((R + down) / 2) ** 2 < X < ((R + up) / 2) ** 2
    assert np.array_equal(alu.execute(S("sqrt", fmt, frozenset({"rn"})), x), np.sqrt(x))


def test_f32_and_f16_rn_ops_match_numpy():
    rng = np.random.default_rng(3)
    for dt, fmt in ((np.float32, "f32"), (np.float16, "f16")):
        a = rng.standard_normal(500).astype(dt)
        b = rng.standard_normal(500).astype(dt)
        for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
            got = alu.execute(S(op, fmt, frozenset()), a, b)
            assert np.array_equal(bits(got), bits(fn(a, b))), (op, fmt)


def test_overflow_and_special_values():
    big = np.array([3e38, -3e38], dtype=np.float32)
    assert np.all(np.isinf(alu.execute(S("add", "f32", frozenset({"rn"})), big, big)))
    assert bits(alu.execute(S("add", "f32", frozenset({"rz"})), big, big)).tolist() == [0x7F7FFFFF, 0xFF7FFFFF]
    assert bits(alu.execute(S("add", "f32", frozenset({"rm"})), big, big)).tolist() == [0x7F7FFFFF, 0xFF800000]
    assert bits(alu.execute(S("add", "f32", frozenset({"rp"})), big, big)).tolist() == [0x7F800000, 0xFF7FFFFF]
    big64 = np.array([1.7e308], dtype=np.float64)
    assert bits(alu.execute(S("mul", "f64", frozenset({"rz"})), big64, big64))[0] == 0x7FEFFFFFFFFFFFFF
    inf = np.array([np.inf], np.float32)
    nan = alu.execute(S("add", "f32", frozenset()), inf, -inf)
    assert bits(nan)[0] == 0x7FFFFFFF  # canonical NaN
    assert alu.execute(S("div", "f32", frozenset({"rz"})), np.array([1.0], np.float32),
                       np.array([0.0], np.float32))[0] == np.inf


def test_exact_zero_sign_under_rm():
    a, b = np.array([1.5], np.float32), np.array([-1.5], np.float32)
    assert np.signbit(alu.execute(S("add", "f32", frozenset({"rm"})), a, b))[0]
    assert not np.signbit(alu.execute(S("add", "f32", frozenset({"rn"})), a, b))[0]


def test_ftz_and_sat():
    sub = np.array([1e-40, -1e-40, 0.5], dtype=np.float32)
    got = alu.execute(S("add", "f32", frozenset({"ftz"})), sub, np.array([0.0, -0.0, 0.0], np.float32))
    assert bits(got).tolist() == [0, 0x80000000, 0x3F000000]  # -1e-40 flushes to -0.0; -0 + -0 = -0
    got = alu.execute(S("mul", "f32", frozenset()), np.array([1e-20], np.float32), np.array([1e-20], np.float32))
    assert got[0] == np.float32(1e-40)  # subnormal result kept without .ftz
    got = alu.execute(S("mul", "f32", frozenset({"ftz"})), np.array([1e-20], np.float32),
                      np.array([1e-20], np.float32))
    assert got[0] == 0
    x = np.array([-2.0, 0.25, 7.0, np.nan, -0.0], dtype=np.float32)
    got = alu.execute(S("add", "f32", frozenset({"sat"})), x, np.zeros(5, np.float32))
    assert bits(got).tolist() == [0, 0x3E800000, 0x3F800000, 0, 0]


def test_min_max_nan_and_signed_zero():
    a = np.array([1.0, np.nan, np.nan, -0.0, 0.0, 2.0], dtype=np.float32)
    b = np.array([np.nan, 3.0, np.nan, 0.0, -0.0, -5.0], dtype=np.float32)
    mn = alu.execute(S("min", "f32", frozenset()), a, b)
    mx = alu.execute(S("max", "f32", frozenset()), a, b)
    assert bits(mn).tolist() == [0x3F800000, 0x40400000, 0x7FFFFFFF, 0x80000000, 0x80000000, 0xC0A00000]
    assert bits(mx).tolist() == [0x3F800000, 0x40400000, 0x7FFFFFFF, 0, 0, 0x40000000]
    nanmin = alu.execute(S("min", "f32", frozenset({"NaN"})), a, b)
    assert bits(nanmin)[:3].tolist() == [0x7FFFFFFF] * 3


def test_abs_neg_copysign_bits():
    x = np.array([-1.5, 2.0, -0.0], dtype=np.float32)
    assert bits(alu.execute(S("abs", "f32", frozenset()), x)).tolist() == [0x3FC00000, 0x40000000, 0]
    assert bits(alu.execute(S("neg", "f32", frozenset()), x)).tolist() == [0x3FC00000, 0xC0000000, 0]
    got = alu.execute(S("copysign", "f32", frozenset()), np.array([-1, 1, -1], np.float32),
                      np.array([3, -3, 0], np.float32))
    assert bits(got).tolist() == [0xC0400000, 0x40400000, 0x80000000]


def test_approx_functions_are_close():
    x = np.linspace(-4, 4, 101).astype(np.float32)
    approx = frozenset({"approx"})
    np.testing.assert_allclose(alu.execute(S("ex2", "f32", approx), x), np.exp2(x.astype(np.float64)), rtol=2e-7)
    np.testing.assert_allclose(alu.execute(S("sin", "f32", approx), x), np.sin(x.astype(np.float64)), atol=1e-6)
    np.testing.assert_allclose(alu.execute(S("cos", "f32", approx), x), np.cos(x.astype(np.float64)), atol=1e-6)
    np.testing.assert_allclose(alu.execute(S("tanh", "f32", approx), x), np.tanh(x.astype(np.float64)), atol=1e-6)
    pos = np.abs(x) + 0.5
    np.testing.assert_allclose(alu.execute(S("lg2", "f32", approx), pos), np.log2(pos.astype(np.float64)),
                               rtol=2e-7)
    np.testing.assert_allclose(alu.execute(S("rsqrt", "f32", approx), pos), 1 / np.sqrt(pos.astype(np.float64)),
                               rtol=2e-7)
    assert alu.execute(S("lg2", "f32", approx), np.array([0.0], np.float32))[0] == -np.inf


def test_packed_f16x2_elementwise():
    a = np.array([(0x4000 << 16) | 0x3C00], np.uint32)  # {hi: 2.0, lo: 1.0}
    b = np.array([(0x3C00 << 16) | 0xBC00], np.uint32)  # {hi: 1.0, lo: -1.0}
    assert alu.execute(S("mul", "f16x2", frozenset({"rn"})), a, b)[0] == (0x4000 << 16) | 0xBC00
    assert alu.execute(S("add", "f16x2", frozenset()), a, b)[0] == (0x4200 << 16) | 0x0000
