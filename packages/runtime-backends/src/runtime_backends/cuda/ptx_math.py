"""float64 EXP2, LOG2 and SIN as PTX ``.func`` subroutines (PTX has no float64 transcendental instructions).

Each takes and returns one ``.f64`` (``.param`` ABI: ``call (ret), rtk_<name>_f64, (arg);``) and is accurate to a
few ulp (the harness allows 1e-12 relative):

* ``rtk_exp2_f64``: x = n + f with n = rint(x), |f| <= 1/2; 2**f by its Taylor series ``sum (f ln 2)**k / k!``
  (k <= 14, remainder < 1e-19) in Horner form with ``fma``; times 2**n as two exact powers of two (so a subnormal
  result rounds once); +-inf and NaN are handled explicitly.
* ``rtk_log2_f64``: x = 2**e * m with m in [sqrt(2)/2, sqrt(2)] (subnormals scaled by 2**54 first); log2 m =
  2 atanh(s) / ln 2 with s = (m - 1)/(m + 1), |s| <= 0.172, by the series ``sum s**(2k+1) / (2k+1)`` (k <= 11);
  0 -> -inf, +inf -> +inf, negative and NaN -> NaN.
* ``rtk_sin_f64``: x = k pi/2 + r by a three-part Cody-Waite reduction with ``fma`` (full accuracy for |x| below about
  2**30; larger arguments lose accuracy progressively), then the Taylor series of sin r or cos r (|r| <= pi/4, to
  r**17 and r**18) chosen and signed by k mod 4; +-inf and NaN give NaN.

Coefficients are computed here with 80-digit decimals and rounded once to float64.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal, localcontext

__all__ = ["FUNCS", "func_source"]


def _hex(x: Decimal | float) -> str:
    """A float64 as a PTX ``0d`` literal (exact bits)."""
    return f"0d{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016X}"


def _constants() -> tuple[dict[str, list[str]], dict[str, str]]:
    """(coefficient series, single constants) as PTX literals."""
    with localcontext() as ctx:
        ctx.prec = 80
        ln2 = Decimal(2).ln()
        pi = 16 * _atan_inv(5) - 4 * _atan_inv(239)  # Machin's formula
        half_pi = pi / 2
        p1 = Decimal(float(half_pi))
        p2 = Decimal(float(half_pi - p1))
        p3 = Decimal(float(half_pi - p1 - p2))
        series = {
            "exp2": [_hex(ln2 ** k / math.factorial(k)) for k in range(15)],
            "atanh": [_hex(Decimal(1) / (2 * k + 1)) for k in range(12)],
            "sin": [_hex(Decimal((-1) ** k) / math.factorial(2 * k + 1)) for k in range(1, 9)],
            "cos": [_hex(Decimal((-1) ** k) / math.factorial(2 * k)) for k in range(1, 10)],
            "neg_pio2": [_hex(-p1), _hex(-p2), _hex(-p3)],
        }
        scalars = {"two_over_ln2": _hex(2 / ln2), "two_over_pi": _hex(2 / pi), "sqrt2": _hex(Decimal(2).sqrt())}
        return series, scalars


def _atan_inv(n: int) -> Decimal:
    """atan(1/n) by its series, to the context's precision."""
    x, term, total, k = Decimal(1) / n, Decimal(1) / n, Decimal(0), 0
    eps = Decimal(10) ** -80
    while abs(term) > eps:
        total += term / (2 * k + 1) * (-1) ** k
        k += 1
        term *= x * x
    return total


_S, _K = _constants()
_INF, _NEG_INF, _NAN, _ONE, _ZERO = "0d7FF0000000000000", "0dFFF0000000000000", "0d7FF8000000000000", \
    "0d3FF0000000000000", "0d0000000000000000"


def _horner(acc: str, z: str, coeffs: list[str]) -> list[str]:
    """``acc = ((c[-1] z + c[-2]) z + ...) z + c[0]`` with fma, highest coefficient first."""
    lines = [f"mov.f64 {acc}, {coeffs[-1]};"]
    lines += [f"fma.rn.f64 {acc}, {acc}, {z}, {c};" for c in reversed(coeffs[:-1])]
    return lines


def _pow2(out: str, n: str, tmp: str, wide: str) -> list[str]:
    """``out = 2**n`` for an s32 register ``n`` in [-1022, 1023] (a normal float64 built from its exponent bits)."""
    return [f"add.s32 {tmp}, {n}, 1023;", f"cvt.u64.u32 {wide}, {tmp};", f"shl.b64 {wide}, {wide}, 52;",
            f"mov.b64 {out}, {wide};"]


def _exp2() -> list[str]:
    body = ["cvt.rni.f64.f64 %d1, %x;", "sub.rn.f64 %d2, %x, %d1;"]
    body += _horner("%d3", "%d2", _S["exp2"])
    body += ["max.f64 %d4, %d1, 0dC091300000000000;", "min.f64 %d4, %d4, 0d4091300000000000;",  # clamp n to +-1100
             "cvt.rzi.s32.f64 %s1, %d4;", "shr.s32 %s2, %s1, 1;", "sub.s32 %s3, %s1, %s2;"]
    body += _pow2("%d5", "%s2", "%s4", "%l1") + _pow2("%d6", "%s3", "%s4", "%l1")
    body += ["mul.rn.f64 %d7, %d3, %d5;", "mul.rn.f64 %y, %d7, %d6;",
             f"setp.eq.f64 %q1, %x, {_INF};", f"selp.f64 %y, {_INF}, %y, %q1;",
             f"setp.eq.f64 %q1, %x, {_NEG_INF};", f"selp.f64 %y, {_ZERO}, %y, %q1;"]
    return body


def _log2() -> list[str]:
    body = ["setp.lt.f64 %q1, %x, 0d0010000000000000;",  # below the smallest normal: scale by 2**54
            "mul.rn.f64 %d1, %x, 0d4350000000000000;", "selp.f64 %d1, %d1, %x, %q1;", "selp.s32 %s1, -54, 0, %q1;",
            "mov.b64 %l1, %d1;", "shr.u64 %l2, %l1, 52;", "cvt.u32.u64 %s2, %l2;", "and.b32 %s2, %s2, 2047;",
            "and.b64 %l2, %l1, 0x000FFFFFFFFFFFFF;", "or.b64 %l2, %l2, 0x3FF0000000000000;", "mov.b64 %d2, %l2;",
            f"setp.gt.f64 %q2, %d2, {_K['sqrt2']};", "mul.rn.f64 %d3, %d2, 0d3FE0000000000000;",
            "selp.f64 %d2, %d3, %d2, %q2;", "selp.s32 %s3, 1, 0, %q2;",
            "sub.s32 %s2, %s2, 1023;", "add.s32 %s2, %s2, %s3;", "add.s32 %s2, %s2, %s1;",
            f"sub.rn.f64 %d4, %d2, {_ONE};", f"add.rn.f64 %d5, %d2, {_ONE};", "div.rn.f64 %d6, %d4, %d5;",
            "mul.rn.f64 %d7, %d6, %d6;"]
    body += _horner("%d8", "%d7", _S["atanh"])
    body += ["mul.rn.f64 %d9, %d6, %d8;", f"mul.rn.f64 %d9, %d9, {_K['two_over_ln2']};",
             "cvt.rn.f64.s32 %d10, %s2;", "add.rn.f64 %y, %d10, %d9;",
             f"setp.eq.f64 %q1, %x, {_INF};", f"selp.f64 %y, {_INF}, %y, %q1;",
             f"setp.eq.f64 %q1, %x, {_ZERO};", f"selp.f64 %y, {_NEG_INF}, %y, %q1;",
             f"setp.lt.f64 %q1, %x, {_ZERO};", f"selp.f64 %y, {_NAN}, %y, %q1;",
             "setp.nan.f64 %q1, %x, %x;", f"selp.f64 %y, {_NAN}, %y, %q1;"]
    return body


def _sin() -> list[str]:
    p1, p2, p3 = _S["neg_pio2"]
    body = [f"mul.rn.f64 %d1, %x, {_K['two_over_pi']};", "cvt.rni.f64.f64 %d1, %d1;",
            f"fma.rn.f64 %d2, %d1, {p1}, %x;", f"fma.rn.f64 %d2, %d1, {p2}, %d2;", f"fma.rn.f64 %d2, %d1, {p3}, %d2;",
            "cvt.rzi.s64.f64 %l1, %d1;", "cvt.u32.u64 %s1, %l1;", "mul.rn.f64 %d3, %d2, %d2;"]
    body += _horner("%d4", "%d3", _S["sin"])
    body += ["mul.rn.f64 %d4, %d4, %d3;", "fma.rn.f64 %d4, %d4, %d2, %d2;"]  # r + r z P(z)
    body += _horner("%d5", "%d3", _S["cos"])
    body += [f"fma.rn.f64 %d5, %d5, %d3, {_ONE};",  # 1 + z Q(z)
             "and.b32 %s2, %s1, 1;", "setp.ne.u32 %q1, %s2, 0;", "selp.f64 %d6, %d5, %d4, %q1;",
             "and.b32 %s2, %s1, 2;", "setp.ne.u32 %q1, %s2, 0;", "neg.f64 %d7, %d6;", "selp.f64 %y, %d7, %d6, %q1;"]
    return body


FUNCS = {"exp2": _exp2, "log2": _log2, "sin": _sin}
"""Routine name -> its body (PTX lines reading ``%x`` and writing ``%y``)."""


def func_source(name: str) -> str:
    """The ``.func`` definition of ``rtk_<name>_f64`` (``name`` in :data:`FUNCS`)."""
    body = "\n\t".join(["ld.param.f64 %x, [rtk_x];", *FUNCS[name](), "st.param.f64 [rtk_y], %y;"])
    return (f".func (.param .f64 rtk_y) rtk_{name}_f64(.param .f64 rtk_x)\n{{\n"
            "\t.reg .pred %q<3>;\n\t.reg .b32 %s<5>;\n\t.reg .b64 %l<3>;\n\t.reg .f64 %d<11>;\n"
            "\t.reg .f64 %x;\n\t.reg .f64 %y;\n"
            f"\t{body}\n\tret;\n}}\n")
