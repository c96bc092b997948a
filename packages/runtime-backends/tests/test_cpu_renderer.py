"""CRenderer: kernels built with KernelBuilder, compiled with clang and gcc, run on numpy arrays, checked against
references computed independently (Python integers, exact fractions, numpy/ml_dtypes where they are correct)."""

from __future__ import annotations

import math
import shutil
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from float_refs import round_float

from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer, index_only_ops
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, KernelBuilder, Ops

HALF = (dtypes.float16, dtypes.bfloat16)


@pytest.fixture(scope="module", params=["clang", "gcc"])
def cc(request) -> ClangCompiler:
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    return ClangCompiler(None, cc=request.param)


def run(cc: ClangCompiler, kernel: Kernel, arrays: list[np.ndarray], vals: tuple[int, ...] = ()) -> None:
    """Render, compile, load and launch ``kernel`` on ``arrays`` (modified in place) with its default shape."""
    prg = CPUProgram(None, kernel.name, cc.compile(CRenderer(memcheck=False).render(kernel)))
    prg(*[a.ctypes.data for a in arrays], global_size=kernel.global_size, local_size=kernel.local_size, vals=vals)


def wrap(x: int, dt: DType) -> int:
    """``x`` reduced modulo 2**bits into ``dt``'s range (two's complement)."""
    x %= 1 << dt.bits
    return x - (1 << dt.bits) if not dt.is_unsigned and x > dt.max else x


def as_f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


# ---- integers ---------------------------------------------------------------------------------------------------

INT_BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.MIN, Ops.SHL,
              Ops.SHR, Ops.CMPLT, Ops.CMPNE]


def int_reference(op: Ops, a: int, b: int, dt: DType) -> int:
    if op is Ops.IDIV or op is Ops.MOD:
        q = abs(a) // abs(b) * (-1 if (a < 0) != (b < 0) else 1)
        return q if op is Ops.IDIV else a - q * b
    table = {Ops.ADD: lambda: a + b, Ops.SUB: lambda: a - b, Ops.MUL: lambda: a * b, Ops.AND: lambda: a & b,
             Ops.OR: lambda: a | b, Ops.XOR: lambda: a ^ b, Ops.MAX: lambda: max(a, b), Ops.MIN: lambda: min(a, b),
             Ops.SHL: lambda: a << b, Ops.SHR: lambda: a >> b, Ops.CMPLT: lambda: int(a < b),
             Ops.CMPNE: lambda: int(a != b)}
    return wrap(table[op](), dt)


@pytest.mark.parametrize("dt", dtypes.ints, ids=lambda d: d.name)
def test_integer_ops_wrap_truncate_and_shift(cc, dt):
    rng = np.random.default_rng(dt.bits)
    edges = [dt.min, dt.max, 0, 1, dt.max - 1, dt.min + 1] + ([-1, -7] if not dt.is_unsigned else [7, 200])
    a = [wrap(v, dt) for v in edges] + [int(v) for v in rng.integers(dt.min, dt.max, 10, dtype=dt.np, endpoint=True)]
    b = [wrap(v, dt) for v in [dt.max, dt.max, dt.min, 3, 2, -1, 5, 1]] + \
        [int(v) for v in rng.integers(dt.min, dt.max, 10, dtype=dt.np, endpoint=True)]
    n = len(a)
    div = [(-3 if not dt.is_unsigned else 3) if v == 0 or (x == dt.min and v == -1) else v for x, v in zip(a, b)]
    shift = [int(v) for v in rng.integers(0, dt.bits, n)]
    shift[:2] = [dt.bits - 1, 0]
    kb = KernelBuilder(f"ints_{dt.name}", (n,))
    pa, pb, pdiv, pshift = (kb.buffer(dt) for _ in range(4))
    outs = [kb.buffer(dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt) for op in INT_BINARY + [Ops.NEG]]
    i = kb.global_id(0)
    x, y, d, s = (kb.load(p, i) for p in (pa, pb, pdiv, pshift))
    rhs = {Ops.IDIV: (d, div), Ops.MOD: (d, div), Ops.SHL: (s, shift), Ops.SHR: (s, shift)}
    for op, out in zip(INT_BINARY, outs):
        kb.store(out, i, kb.alu(op, x, rhs.get(op, (y, b))[0]))
    kb.store(outs[-1], i, kb.alu(Ops.NEG, x))
    outputs = [np.zeros(n, o.dtype.np) for o in outs]
    run(cc, kb.build(), [np.array(v, dt.np) for v in (a, b, div, shift)] + outputs)
    for op, got in zip(INT_BINARY, outputs):
        want = [int_reference(op, p, q, dt) for p, q in zip(a, rhs.get(op, (y, b))[1])]
        assert [int(v) for v in got] == want, f"{op.name} {dt.name}"
    assert [int(v) for v in outputs[-1]] == [wrap(-v, dt) for v in a]


# ---- floats -----------------------------------------------------------------------------------------------------

def float_inputs(dt: DType) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    nan, inf = math.nan, math.inf
    a = [nan, 1.5, nan, inf, -inf, 2.0, 0.0, -3.25, 1.0, 100.5, 7.0, -0.5]
    b = [2.0, nan, nan, 1.0, 3.0, -inf, 5.0, -3.25, 3.0, 0.1, 1e-3, 0.25]
    a += list(rng.normal(0, 10, 12))
    b += list(rng.normal(0, 10, 12))
    return np.array(a).astype(dt.np), np.array(b).astype(dt.np)


def float_reference(op: Ops, a: np.ndarray, b: np.ndarray, dt: DType) -> np.ndarray:
    """The op computed in float32 (float64 for float64) with numpy, then rounded once to ``dt``."""
    cdt = np.float64 if dt is dtypes.float64 else np.float32
    x, y = a.astype(cdt), b.astype(cdt)
    with np.errstate(all="ignore"):
        r = {Ops.ADD: lambda: x + y, Ops.SUB: lambda: x - y, Ops.MUL: lambda: x * y, Ops.DIV: lambda: x / y,
             Ops.MAX: lambda: np.fmax(x, y), Ops.MIN: lambda: np.fmin(x, y), Ops.NEG: lambda: -x,
             Ops.RECIP: lambda: cdt(1) / x, Ops.SQRT: lambda: np.sqrt(x), Ops.TRUNC: lambda: np.trunc(x),
             Ops.EXP2: lambda: np.exp2(x), Ops.LOG2: lambda: np.log2(x), Ops.SIN: lambda: np.sin(x),
             Ops.CMPLT: lambda: x < y, Ops.CMPNE: lambda: x != y}[op]()
        return r if r.dtype == np.bool_ else r.astype(dt.np)


EXACT_FLOAT = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPNE, Ops.NEG, Ops.RECIP,
               Ops.SQRT, Ops.TRUNC]
TRANSCENDENTAL = [Ops.EXP2, Ops.LOG2, Ops.SIN]
RTOL = {dtypes.float16: 2e-3, dtypes.bfloat16: 1.6e-2, dtypes.float32: 1e-6, dtypes.float64: 1e-13}


@pytest.mark.parametrize("dt", dtypes.floats, ids=lambda d: d.name)
def test_float_ops_round_once_and_maxnum(cc, dt):
    a, b = float_inputs(dt)
    n = len(a)
    ops = EXACT_FLOAT + TRANSCENDENTAL
    kb = KernelBuilder(f"floats_{dt.name}", (n,))
    pa, pb = kb.buffer(dt), kb.buffer(dt)
    outs = [kb.buffer(dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt) for op in ops]
    where_out = kb.buffer(dt)
    i = kb.global_id(0)
    x, y = kb.load(pa, i), kb.load(pb, i)
    for op, out in zip(ops, outs):
        kb.store(out, i, kb.alu(op, x, y) if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.MAX, Ops.MIN, Ops.CMPLT,
                                                      Ops.CMPNE) else kb.alu(op, x))
    kb.store(where_out, i, kb.where(kb.lt(x, y), x, y))
    outputs = [np.zeros(n, o.dtype.np) for o in outs] + [np.zeros(n, dt.np)]
    run(cc, kb.build(), [a, b] + outputs)
    for op, got in zip(ops, outputs):
        want = float_reference(op, a, b, dt)
        if op in TRANSCENDENTAL:
            np.testing.assert_allclose(as_f64(got), as_f64(want), rtol=RTOL[dt], atol=RTOL[dt], err_msg=op.name)
        else:
            np.testing.assert_array_equal(as_f64(got), as_f64(want), err_msg=op.name)
    np.testing.assert_array_equal(as_f64(outputs[-1]), np.where(as_f64(a) < as_f64(b), as_f64(a), as_f64(b)))


def test_max_min_of_nan_return_the_number(cc):
    nan = math.nan
    a = np.array([nan, 1.0, nan, -2.0], np.float32)
    b = np.array([4.0, nan, nan, -3.0], np.float32)
    kb = KernelBuilder("maxnum", (4,))
    pa, pb, pmax, pmin = (kb.buffer(dtypes.float32) for _ in range(4))
    i = kb.global_id(0)
    x, y = kb.load(pa, i), kb.load(pb, i)
    kb.store(pmax, i, kb.alu(Ops.MAX, x, y))
    kb.store(pmin, i, kb.alu(Ops.MIN, x, y))
    mx, mn = np.zeros(4, np.float32), np.zeros(4, np.float32)
    run(cc, kb.build(), [a, b, mx, mn])
    np.testing.assert_array_equal(mx, [4.0, 1.0, nan, -2.0])
    np.testing.assert_array_equal(mn, [4.0, 1.0, nan, -3.0])


# ---- casts ------------------------------------------------------------------------------------------------------

def cast_inputs(src: DType) -> list:
    """Corner cases for casts out of ``src`` (python values exactly representable in ``src``)."""
    if src is dtypes.bool:
        return [False, True]
    if src.is_int:
        cands = [0, 1, -1, 2, -2, 127, 128, 255, 256, -129, 2048 + 1, 65504, 65519, 65520, 65535, 2**24 + 1,
                 2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**31 - 1, -(2**31), 2**31 + 2**23 + 1, 2**53 + 1,
                 2**63 - 1, -(2**63), 2**64 - 1, 2**63 + 2**39 + 1, src.min, src.max]
        return [v for v in cands if src.min <= v <= src.max]
    nan, inf = math.nan, math.inf
    cands = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -3.99, 127.9, -128.9, 255.5, 300.25, -40000.75, 65504.0,
             65519.99, 65520.0, 1e10, -1e10, 3e9, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-40, 1 + 2**-8,
             1 + 2**-8 + 2**-40, 1 + 3 * 2**-8, 2**-24, 2**-25, 3 * 2**-25, 5 * 2**-25, 1.5 * 2**-24, 2**-14 - 2**-25,
             2**-14 - 2**-26, 1e-40, 3.4e38, 3.5e38, 1e300, 2.0**-1050, nan, inf, -inf]
    with np.errstate(all="ignore"):
        values = np.array(cands).astype(src.np)
    return [float(v) for v in values]


def cast_reference(value, src: DType, dst: DType):
    """The IR's CAST of python ``value`` to ``dst``; None where it is undefined (float out of int range, NaN)."""
    if dst is dtypes.bool:
        return value != 0 or (isinstance(value, float) and math.isnan(value))
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None if not dst.is_float else value
    if dst.is_float:
        return round_float(Fraction(value), dst) if value != 0 else float(value)
    if isinstance(value, float):
        t = math.trunc(value)
        return t if dst.min <= t <= dst.max else None
    return wrap(int(value), dst)


@pytest.mark.parametrize("src", dtypes.all, ids=lambda d: d.name)
def test_cast_to_every_dtype(cc, src):
    values = cast_inputs(src)
    n = len(values)
    kb = KernelBuilder(f"cast_from_{src.name}", (n,))
    pin = kb.buffer(src)
    outs = [kb.buffer(dst) for dst in dtypes.all]
    i = kb.global_id(0)
    x = kb.load(pin, i)
    for dst, out in zip(dtypes.all, outs):
        kb.store(out, i, kb.cast(x, dst))
    arrays = [np.zeros(n, dst.np) for dst in dtypes.all]
    run(cc, kb.build(), [np.array(values, src.np)] + arrays)
    for dst, got in zip(dtypes.all, arrays):
        for v, g in zip(values, got):
            want = cast_reference(v, src, dst)
            if want is None:
                continue
            gv = bool(g) if dst is dtypes.bool else float(g) if dst.is_float else int(g)
            same = (math.isnan(gv) and math.isnan(want)) if dst.is_float and math.isnan(want) else gv == want
            assert same, f"cast {src.name} {v!r} -> {dst.name}: got {gv!r}, want {want!r}"


def test_16bit_rounding_corner_cases_match_numpy_and_ml_dtypes(cc):
    """float32 -> float16/bfloat16 ties, overflow and subnormals agree with numpy/ml_dtypes (both correct there)."""
    f = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65519.99, 65520, 2**-25, 3 * 2**-25, 5 * 2**-25, 2**-14 - 2**-25,
                  1 + 2**-8, 1 + 3 * 2**-8, 3.3895314e38, 3.4e38, np.nan, -np.inf, -0.0, 1e-40, 6e-8], np.float32)
    kb = KernelBuilder("to_half", (len(f),))
    pin, ph, pb = kb.buffer(dtypes.float32), kb.buffer(dtypes.float16), kb.buffer(dtypes.bfloat16)
    i = kb.global_id(0)
    x = kb.load(pin, i)
    kb.store(ph, i, kb.cast(x, dtypes.float16))
    kb.store(pb, i, kb.cast(x, dtypes.bfloat16))
    h, b = np.zeros(len(f), np.float16), np.zeros(len(f), ml_dtypes.bfloat16)
    run(cc, kb.build(), [f, h, b])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(h, f.astype(np.float16))
        np.testing.assert_array_equal(as_f64(b), as_f64(f.astype(ml_dtypes.bfloat16)))
    assert np.signbit(h[14]) and np.signbit(as_f64(b)[14])


def test_casts_to_16bit_round_once(cc):
    """float64 and 32/64-bit ints round directly (ml_dtypes goes through float32 and rounds twice here)."""
    kb = KernelBuilder("once", (3,))
    pd, pi, ph, pb, pib = (kb.buffer(dt) for dt in (dtypes.float64, dtypes.int32, dtypes.float16, dtypes.bfloat16,
                                                    dtypes.bfloat16))
    i = kb.global_id(0)
    kb.store(ph, i, kb.cast(kb.load(pd, i), dtypes.float16))
    kb.store(pb, i, kb.cast(kb.load(pd, i), dtypes.bfloat16))
    kb.store(pib, i, kb.cast(kb.load(pi, i), dtypes.bfloat16))
    d = np.array([1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, -(1 + 2**-11 + 2**-30)])
    ints = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**30 + 2**22 + 1], np.int32)
    h, b, ib = np.zeros(3, np.float16), np.zeros(3, ml_dtypes.bfloat16), np.zeros(3, ml_dtypes.bfloat16)
    run(cc, kb.build(), [d, ints, h, b, ib])
    assert list(as_f64(h)) == [1 + 2**-10, 1 + 2**-8, -(1 + 2**-10)]
    assert list(as_f64(b)) == [1.0, 1 + 2**-7, -1.0]
    assert list(as_f64(ib)) == [2**24 + 2**17, -(2**24 + 2**17), 2**30 + 2**23]


def test_bitcast_reinterprets_bits(cc):
    pairs = [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32),
             (dtypes.float64, dtypes.int64), (dtypes.uint64, dtypes.float64), (dtypes.float16, dtypes.int16),
             (dtypes.uint16, dtypes.float16), (dtypes.bfloat16, dtypes.uint16), (dtypes.float16, dtypes.bfloat16),
             (dtypes.int8, dtypes.uint8), (dtypes.bool, dtypes.uint8), (dtypes.uint8, dtypes.bool)]
    rng = np.random.default_rng(5)
    kb = KernelBuilder("bitcasts", (8,))
    ptrs = [(kb.buffer(s), kb.buffer(d)) for s, d in pairs]
    i = kb.global_id(0)
    for (_, d), (pin, pout) in zip(pairs, ptrs):
        kb.store(pout, i, kb.bitcast(kb.load(pin, i), d))
    arrays = []
    for s, d in pairs:
        raw = rng.integers(0, 256, 8 * s.itemsize, dtype=np.uint8) if s is not dtypes.bool else \
            rng.integers(0, 2, 8, dtype=np.uint8)
        arrays += [raw.view(s.np).copy(), np.zeros(8, d.np)]
    run(cc, kb.build(), arrays)
    for (s, d), src, got in zip(pairs, arrays[::2], arrays[1::2]):
        if d is dtypes.bool:
            assert list(got) == [v != 0 for v in src]
        else:
            assert got.view(np.uint8).tobytes() == src.view(np.uint8).tobytes(), f"bitcast {s.name} -> {d.name}"


# ---- constants --------------------------------------------------------------------------------------------------

CONSTS = {
    dtypes.int64: [-(2**63), 2**63 - 1, -1, 0], dtypes.uint64: [2**64 - 1, 2**63, 0],
    dtypes.int32: [-(2**31), 2**31 - 1],
    dtypes.uint32: [2**32 - 1], dtypes.int8: [-128, 127], dtypes.uint16: [65535], dtypes.bool: [True, False],
    dtypes.float32: [0.1, -0.0, math.inf, -math.inf, math.nan, 1e-45, 3.4028234663852886e38, 1e39],
    dtypes.float64: [0.1, 5e-324, -math.inf, 1.7976931348623157e308],
    dtypes.float16: [0.1, 1 + 2**-11 + 2**-40, 65520.0, 2**-25, 3 * 2**-25, -math.inf, math.nan],
    dtypes.bfloat16: [0.1, 1 + 2**-8 + 2**-40, 3.4e38, -2.5],
}


def const_reference(v, dt: DType):
    if dt.is_float and not math.isnan(v) and not math.isinf(v) and v != 0:
        return round_float(Fraction(v), dt)
    return v


def test_constants_are_exact(cc):
    kb = KernelBuilder("consts")
    ptrs = {dt: kb.buffer(dt) for dt in CONSTS}
    for dt, values in CONSTS.items():
        for j, v in enumerate(values):
            kb.store(ptrs[dt], j, kb.const(v, dt))
    arrays = [np.zeros(len(v), dt.np) for dt, v in CONSTS.items()]
    run(cc, kb.build(), arrays)
    for (dt, values), got in zip(CONSTS.items(), arrays):
        want = [const_reference(v, dt) for v in values]
        if dt.is_float:
            np.testing.assert_array_equal(as_f64(got), want, err_msg=dt.name)
            assert [math.copysign(1, float(g)) for g in got] == [math.copysign(1, w) for w in want]
        else:
            assert [int(g) for g in got] == [int(w) for w in want], dt.name


# ---- memory, control flow, vars ---------------------------------------------------------------------------------

def test_gated_load_and_store_do_not_touch_memory_when_false(cc):
    n = 10
    kb = KernelBuilder("gated", (n,))
    src, dst = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    ok = kb.lt(i, 6)
    wild = kb.where(ok, kb.cast(i, dtypes.int64), kb.const(2**60, dtypes.int64))  # would fault if dereferenced
    v = kb.load(src, wild, gate=ok, alt=-7.0)
    even = kb.ne(kb.alu(Ops.AND, i, 1), 1)
    kb.store(dst, kb.where(even, kb.cast(i, dtypes.int64), kb.const(-(2**59), dtypes.int64)), v, gate=even)
    a = np.arange(n, dtype=np.float32) + 0.5
    out = np.full(n, 99.0, np.float32)
    run(cc, kb.build(), [a, out])
    assert list(out) == [0.5, 99, 2.5, 99, 4.5, 99, -7, 99, -7, 99]


def test_loops_accumulators_and_if(cc):
    rows, cols = 5, 7
    kb = KernelBuilder("rowsum", (rows,))
    mat, isum, fpos, cnt = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32), kb.buffer(dtypes.float32), \
        kb.buffer(dtypes.int64)
    r = kb.global_id(0)
    acc = kb.acc(0, dtypes.int32)
    facc = kb.acc(0.0, dtypes.float32)
    count = kb.acc(0, dtypes.int64)
    with kb.range(0, cols) as c:
        v = kb.load(mat, kb.add(kb.mul(r, cols), c))
        kb.assign(acc, kb.add(acc, v))
        with kb.if_(kb.lt(0, v)):
            kb.assign(facc, kb.add(facc, kb.cast(v, dtypes.float32)))
        with kb.range(kb.const(0, dtypes.int64), kb.const(3, dtypes.int64), dtypes.int64) as j:
            kb.assign(count, kb.add(count, j))
    kb.store(isum, r, acc)
    kb.store(fpos, r, facc)
    kb.store(cnt, r, count)
    m = np.random.default_rng(1).integers(-(2**31), 2**31, (rows, cols)).astype(np.int32)
    m[0] = np.arange(cols) - 3  # small values: exact float sums
    out_i, out_f, out_c = np.zeros(rows, np.int32), np.zeros(rows, np.float32), np.zeros(rows, np.int64)
    run(cc, kb.build(), [m, out_i, out_f, out_c])
    assert [int(v) for v in out_i] == [wrap(sum(int(x) for x in row), dtypes.int32) for row in m]
    assert float(out_f[0]) == 1 + 2 + 3
    assert list(out_c) == [cols * 3] * rows


def test_int_vars_and_range_bound_by_var(cc):
    kb = KernelBuilder("axpb", (4,))
    a, out = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32)
    scale, bias, reps = kb.var("scale"), kb.var("bias"), kb.var("reps")
    i = kb.global_id(0)
    acc = kb.acc(0, dtypes.int32)
    with kb.range(0, reps):
        kb.assign(acc, kb.add(acc, kb.add(kb.mul(kb.load(a, i), scale), bias)))
    kb.store(out, i, acc)
    k = kb.build()
    prg = CPUProgram(None, k.name, cc.compile(CRenderer().render(k)))
    x, y = np.array([1, -2, 3, 2**30], np.int32), np.zeros(4, np.int32)
    for vals in ((3, -1, 2), (-5, 7, 0), (4, 1, 1)):
        prg(x.ctypes.data, y.ctypes.data, global_size=(4,), vals=vals)
        assert [int(v) for v in y] == [wrap((int(v) * vals[0] + vals[1]) * vals[2], dtypes.int32) for v in x]


def test_int64_index_is_not_truncated_to_int32(cc):
    """The buffer address is passed 2**35 elements early and indexed with 2**35 + i: only 64-bit pointer arithmetic
    lands on the real data (no 128 GiB allocation needed)."""
    kb = KernelBuilder("bigindex", (4,))
    src, dst = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    big = kb.add(kb.cast(i, dtypes.int64), kb.const(2**35, dtypes.int64))
    kb.store(dst, i, kb.load(src, big))
    k = kb.build()
    a, out = np.arange(4, dtype=np.float32) + 1, np.zeros(4, np.float32)
    shifted = a.ctypes.data - 2**35 * 4
    if shifted <= 0:
        pytest.skip("host buffer address too low for the shifted-pointer trick")
    CPUProgram(None, k.name, cc.compile(CRenderer(memcheck=False).render(k)))(shifted, out.ctypes.data, global_size=(4,))
    assert list(out) == [1, 2, 3, 4]


def test_index_arithmetic_is_64_bit_but_values_stay_int32(cc):
    """An int32 ADD/MUL used only as an index is rendered in long long (affine addresses, no sign extensions); the same
    arithmetic used as a value still wraps modulo 2**32."""
    kb = KernelBuilder("indexing", (2,), (4,))
    x, out, wrapped = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32), kb.buffer(dtypes.int32)
    i = kb.global_id(0)
    idx = kb.add(kb.mul(i, 2), 1)  # index only
    value = kb.mul(kb.add(i, 2**30), 4)  # a value: wraps
    kb.store(out, i, kb.load(x, idx))
    kb.store(wrapped, i, value)
    k = kb.build()
    assert index_only_ops(k) == {id(idx), id(idx.src[0])}
    src = CRenderer(memcheck=False).render(k)
    assert "long long v" in src and "const int* b0" in src and "int* b1" in src
    xs, outs, wraps = np.arange(16, dtype=np.int32) * 10, np.zeros(8, np.int32), np.zeros(8, np.int32)
    run(cc, k, [xs, outs, wraps])
    assert list(outs) == [10 * (2 * t + 1) for t in range(8)]
    assert list(wraps) == [wrap((t + 2**30) * 4, dtypes.int32) for t in range(8)]


# ---- rejected kernels -------------------------------------------------------------------------------------------

def test_local_memory_is_rejected():
    kb = KernelBuilder("shared", (1,), (4,))
    out = kb.buffer(dtypes.float32)
    tmp = kb.local("tmp", dtypes.float32, 4)
    lid = kb.special("local", 0)
    kb.store(tmp, lid, 1.0)
    kb.barrier()
    kb.store(out, lid, kb.load(tmp, lid))
    with pytest.raises(ValueError, match="local memory"):
        CRenderer().render(kb.build())


@pytest.mark.parametrize("name", ["int", "rtk_signature", "sinf", "memcpy", "has space", "caf\u00e9"])
def test_kernel_name_must_be_a_usable_c_symbol(name):
    kb = KernelBuilder(name)
    kb.store(kb.buffer(dtypes.int32), 0, 1)
    with pytest.raises(ValueError, match="kernel name"):
        CRenderer().render(kb.build())
