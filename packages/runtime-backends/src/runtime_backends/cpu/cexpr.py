"""The CPU backend's C dialect: freestanding C11 for Clang or GCC, its helpers written in portable C.

Values are rendered by ``runtime_backends.cstyle.values`` (semantics there); this module says how plain C spells
what that module leaves to the dialect:

* ``HEADER`` turns floating-point contraction off (Clang: ``STDC FP_CONTRACT``; GCC, which contracts across
  statements by default: ``optimize("fp-contract=off")``) and defines ``RTK_THREADS``, the pragma before a kernel's
  innermost thread loop: Clang does not unroll it (the loop's body is one thread; vectorizing it is what pays, and
  runtime-unrolling a loop with a run-time trip count multiplies the compiler's work);
* bits move with ``__builtin_memcpy``; float16 converts with integer code rounding to nearest even; rounding to odd
  (see ``cstyle.values``) truncates by comparing with the exact value, the 16-bit FMA's sum uses TwoSum;
* math calls are ``__builtin_*``: SQRT, TRUNC and FMA become instructions (with ``-fno-math-errno`` and
  ``-march=native``) or whitelisted libm calls, EXP2/LOG2/SIN call ``exp2f/exp2``, ``log2f/log2``, ``sinf/sin`` (the
  execmem resolver's libm whitelist).
"""

from __future__ import annotations

from runtime_backends.cstyle.values import Dialect

__all__ = ["CPU_DIALECT", "HEADER"]

HEADER = r"""#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#define RTK_THREADS _Pragma("clang loop unroll(disable)")
#else
#if defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#define RTK_THREADS
#endif
"""

_INTRINSICS = (
    ("rtk_fbits", "unsigned int rtk_fbits(float f) { unsigned int x; __builtin_memcpy(&x, &f, 4); return x; }"),
    ("rtk_bitsf", "float rtk_bitsf(unsigned int x) { float f; __builtin_memcpy(&f, &x, 4); return f; }"),
    ("rtk_dbits", "unsigned long long rtk_dbits(double d) { unsigned long long x; __builtin_memcpy(&x, &d, 8); "
                  "return x; }"),
    ("rtk_bitsd", "double rtk_bitsd(unsigned long long x) { double d; __builtin_memcpy(&d, &x, 8); return d; }"),
    ("rtk_h2f", """float rtk_h2f(unsigned short h) {  /* float16 bits -> float (exact) */
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return rtk_bitsf(sign | 0x7f800000u | (m << 13));
  if (e != 0) return rtk_bitsf(sign | ((e + 112u) << 23) | (m << 13));
  return rtk_bitsf(sign | rtk_fbits((float)m * 0x1p-24f));
}"""),
    ("rtk_f2h", """unsigned short rtk_f2h(float f) {  /* round to nearest even; NaN stays NaN (quieted, top payload kept) */
  unsigned int x = rtk_fbits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  /* >= 65520 (or inf) -> inf */
  if (ax >= 0x38800000u) {  /* normal result: rebias the exponent, round 13 bits away */
    unsigned int r = ax - 0x38000000u;
    return (unsigned short)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (ax <= 0x33000000u) return (unsigned short)sign;  /* <= 2**-25 (half of the smallest subnormal) -> 0 */
  {  /* subnormal result in units of 2**-24 */
    unsigned int m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);
    unsigned int q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    return (unsigned short)(sign | q);
  }
}"""),
    ("rtk_d2f_odd", """float rtk_d2f_odd(double d) {
  float f = (float)d;
  unsigned int x;
  if ((double)f == d || d != d) return f;
  x = rtk_fbits(f);
  if (__builtin_fabs((double)f) > __builtin_fabs(d)) x -= 1u;
  return rtk_bitsf(x | 1u);
}"""),
    ("rtk_u2f_odd", """float rtk_u2f_odd(unsigned long long m) {
  int s;
  if (m < (1ull << 24)) return (float)m;
  s = 40 - __builtin_clzll(m);
  return (float)((m >> s) | ((m & ((1ull << s) - 1ull)) != 0ull)) * (float)(1ull << s);
}"""),
    ("rtk_i2f_odd", """float rtk_i2f_odd(long long v) {
  return v < 0 ? -rtk_u2f_odd(0ull - (unsigned long long)v) : rtk_u2f_odd((unsigned long long)v);
}"""),
    ("rtk_fma_odd", """double rtk_fma_odd(double a, double b, double c) {  /* 16-bit inputs: the product is exact */
  double p = a * b, s = p + c, bp = s - c, e = (p - bp) + (c - (s - bp));
  unsigned long long x;
  if (e == 0.0 || !__builtin_isfinite(s)) return s;
  x = rtk_dbits(s);
  if ((x & 1u) == 0u) x = ((e > 0.0) == (s > 0.0)) ? x + 1u : x - 1u;
  return rtk_bitsd(x);
}"""),
)

CPU_DIALECT = Dialect(name="CPU", bool_type="_Bool", qualifier="static inline", math_prefix="__builtin_",
                      intrinsics=_INTRINSICS)
"""Plain C for the CPU backend (module docstring)."""
