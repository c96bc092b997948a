"""PTX cvt (mock_gpu.ptx.alu) against Python-int/Fraction references, ml_dtypes for bf16, and known corner cases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from _float_util import FORMATS, MODES, as_f64, bits, check_against, ref_round

from mock_gpu.ptx import alu

S = alu.AluSpec
INTS = [f"{k}{n}" for k in "us" for n in (8, 16, 32, 64)]
DT = {t: np.dtype(f"{'i' if t[0] == 's' else 'u'}{int(t[1:]) // 8}") for t in INTS}


def cvt(dst, src, *mods):
    return S("cvt", dst, frozenset(mods), stype=src)


def bounds(t):
    n = int(t[1:])
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t[0] == "s" else (0, (1 << n) - 1)


def wrap(v, t):
    n = int(t[1:])
    v &= (1 << n) - 1
    return v - (1 << n) if t[0] == "s" and v >> (n - 1) else v


@pytest.mark.parametrize("src", INTS)
def test_int_to_int_wrap_and_sat(src):
    rng = np.random.default_rng(20)
    lo, hi = bounds(src)
    a = rng.integers(lo, hi, 100, endpoint=True, dtype=DT[src])
    a[:2] = [lo, hi]
    for dst in INTS:
        got = alu.execute(cvt(dst, src), a)
        assert got.dtype == DT[dst] and [int(x) for x in got] == [wrap(int(x), dst) for x in a]
        dlo, dhi = bounds(dst)
        got = alu.execute(cvt(dst, src, "sat"), a)
        assert [int(x) for x in got] == [min(max(int(x), dlo), dhi) for x in a]


@pytest.mark.parametrize("src", ["f16", "f32", "f64"])
@pytest.mark.parametrize("dst", ["s8", "u8", "s32", "u32", "s64", "u64"])
def test_float_to_int_rounding_nan_and_clamp(src, dst):
    vals = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7, 0.0, -0.0, 100.25, -100.75, 1e4, -1e4]
    if src != "f16":
        vals += [1e30, -1e30, 2.0**63, 2.0**64, -(2.0**63), 4e9, -4e9, 2.0**31, -(2.0**31) - 1]
    a = np.array(vals + [np.nan, np.inf, -np.inf], dtype={"f16": np.float16, "f32": np.float32,
                                                          "f64": np.float64}[src])
    lo, hi = bounds(dst)
    rounders = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}
    for mode, fn in rounders.items():
        want = []
        for x in a.astype(np.float64):
            if math.isnan(x):
                want.append(0)
            elif math.isinf(x):
                want.append(hi if x > 0 else lo)
            else:
                want.append(min(max(fn(Fraction(float(x))), lo), hi))
        assert [int(v) for v in alu.execute(cvt(dst, src, mode), a)] == want, mode


@pytest.mark.parametrize("src", ["s32", "u32", "s64", "u64"])
@pytest.mark.parametrize("dst", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("mode", MODES)
def test_int_to_float_rounding(src, dst, mode):
    rng = np.random.default_rng(21)
    lo, hi = bounds(src)
    a = rng.integers(lo, hi, 150, endpoint=True, dtype=DT[src])
    a[:4] = [lo, hi, 0, (1 << 24) + 1]
    a[4:20] = (rng.integers(1, 1 << 20, 16) * 2 + 1).astype(DT[src])  # odd values near f16 overflow/ties
    got = alu.execute(cvt(dst, src, mode), a)
    check_against(got, [ref_round(Fraction(int(x)), dst, mode) for x in a], dst)


@pytest.mark.parametrize(("src", "dst"), [("f64", "f32"), ("f64", "f16"), ("f32", "f16"), ("f64", "bf16"),
                                          ("f32", "bf16"), ("f16", "bf16"), ("bf16", "f16")])
@pytest.mark.parametrize("mode", MODES)
def test_float_narrowing(src, dst, mode):
    rng = np.random.default_rng(22)
    p, emin, emax = FORMATS[dst]
    sp, semin, semax = FORMATS[src]
    low, high = max(emin - p - 2, semin - sp + 1), min(emax + 2, semax)  # exponents both formats can hold
    x = rng.uniform(1, 2, 300) * rng.choice([-1, 1], 300) * np.exp2(rng.integers(low, high, 300))
    if src == "bf16":
        a = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    else:
        a = x.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[src])
    got = alu.execute(cvt(dst, src, mode), a)
    check_against(got, [ref_round(Fraction(float(v)), dst, mode) for v in as_f64(a, src)], dst)


def test_f16_corner_cases():
    a = np.array([65519.0, 65520.0, 1e6, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-24 * 1.5, -(2.0**-26)], np.float32)
    got = alu.execute(cvt("f16", "f32", "rn"), a)
    assert bits(got).tolist() == [0x7BFF, 0x7C00, 0x7C00, 0x0000, 0x0001, 0x0002, 0x8000]
    got = alu.execute(cvt("f16", "f32", "rz"), a)
    assert bits(got).tolist() == [0x7BFF, 0x7BFF, 0x7BFF, 0x0000, 0x0000, 0x0001, 0x8000]
    got = alu.execute(cvt("f16", "f32", "rm"), a)
    assert bits(got)[-1] == 0x8001


def test_bf16_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(23)
    x = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x)]
    got = alu.execute(cvt("bf16", "f32", "rn"), x)
    assert np.array_equal(got, x.astype(ml_dtypes.bfloat16).view(np.uint16))
    back = alu.execute(cvt("f32", "bf16"), got)
    assert np.array_equal(back, got.view(ml_dtypes.bfloat16).astype(np.float32))


def test_nan_and_widening():
    a = np.array([np.nan, 1e-40, -1.25], np.float32)
    assert bits(alu.execute(cvt("f16", "f32", "rn"), a))[0] == 0x7FFF
    assert bits(alu.execute(cvt("bf16", "f32", "rn"), a))[0] == 0x7FFF
    wide = alu.execute(cvt("f64", "f32"), a)
    assert wide[1] == np.float64(np.float32(1e-40)) and wide[2] == -1.25
    assert alu.execute(cvt("f64", "f32", "ftz"), a)[1] == 0


def test_same_type_integral_rounding_sat_ftz():
    a = np.array([2.5, -2.5, 0.7, 1e-40, np.nan], np.float32)
    assert alu.execute(cvt("f32", "f32", "rni"), a)[:3].tolist() == [2.0, -2.0, 1.0]
    assert alu.execute(cvt("f32", "f32", "rmi"), a)[:3].tolist() == [2.0, -3.0, 0.0]
    assert alu.execute(cvt("f32", "f32", "rpi"), a)[3] == 1.0
    sat = alu.execute(cvt("f32", "f32", "sat"), a)
    assert sat.tolist()[:3] == [1.0, 0.0, np.float32(0.7)] and sat[4] == 0
    assert alu.execute(cvt("f32", "f32", "ftz"), a)[3] == 0


def test_packed_conversion_puts_a_in_upper_half():
    a, b = np.array([1.0], np.float32), np.array([-2.0], np.float32)
    assert int(alu.execute(S("cvt", "f16x2", frozenset({"rn"}), stype="f32"), a, b)[0]) == 0x3C00C000
    assert int(alu.execute(S("cvt", "bf16x2", frozenset({"rn"}), stype="f32"), a, b)[0]) == 0x3F80C000


def test_relu():
    a = np.array([-1.0, 2.0, np.nan], np.float32)
    got = alu.execute(cvt("f16", "f32", "rn", "relu"), a)
    assert bits(got).tolist() == [0x0000, 0x4000, 0x7FFF]
