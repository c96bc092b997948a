"""Float references shared by the ALU tests (holds no tests): exact rounding of Fractions to each IEEE format and
direction, storage conversions, and a bit-exact comparison with a readable mismatch."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# (precision incl. hidden bit, minimum normal exponent, maximum exponent)
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}
MODES = ("rn", "rz", "rm", "rp")


def ref_round(x: Fraction, fmt: str, mode: str) -> float:
    """Round the exact rational x to ``fmt`` with ``mode`` (returns a Python float holding the exact value)."""
    p, emin, emax = FORMATS[fmt]
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    m = abs(x)
    e = math.floor(math.log2(m.numerator) - math.log2(m.denominator))
    while Fraction(2) ** e > m:
        e -= 1
    while Fraction(2) ** (e + 1) <= m:
        e += 1
    q = max(e, emin) - (p - 1)  # exponent of one unit in the last place
    scaled = m / Fraction(2) ** q
    lo = math.floor(scaled)
    rem = scaled - lo
    if mode == "rn":
        up = rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2 == 1)
    elif mode == "rz":
        up = False
    elif mode == "rp":
        up = rem != 0 and sign > 0
    else:
        up = rem != 0 and sign < 0
    mag = Fraction(lo + up) * Fraction(2) ** q
    max_finite = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if mag > max_finite:
        overflow_to_inf = mode == "rn" or (mode == "rp" and sign > 0) or (mode == "rm" and sign < 0)
        return sign * math.inf if overflow_to_inf else sign * float(max_finite)
    return sign * float(mag)


def as_storage(values, fmt):
    if fmt == "bf16":
        return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return np.asarray(values, dtype={"f16": np.float16, "f32": np.float32, "f64": np.float64}[fmt])


def as_f64(arr, fmt):
    if fmt == "bf16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def random_values(fmt, n, rng, spread=8):
    """Random finite values of ``fmt`` (with mixed signs and exponents), as storage."""
    mant = rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
    vals = mant * np.exp2(rng.integers(-spread, spread, n))
    return as_storage(vals, fmt)


def bits(x):
    return np.asarray(x).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.asarray(x).dtype.itemsize])


def check_against(result, expected, fmt):
    got = as_f64(result, fmt)
    exp = np.array(expected, dtype=np.float64)
    same = (got == exp) & (np.signbit(got) == np.signbit(exp)) | (np.isnan(got) & np.isnan(exp))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, f"{bad.size} mismatches, first at {bad[0]}: got {got[bad[0]]!r}, want {exp[bad[0]]!r}"
