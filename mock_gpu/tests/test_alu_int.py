"""PTX integer, logic, shift and bit-field instructions (mock_gpu.ptx.alu) against Python-int references."""

from __future__ import annotations

import numpy as np
import pytest

from mock_gpu.ptx import alu

S = alu.AluSpec
DT = {f"{k}{n}": np.dtype(f"{'i' if k == 's' else 'u'}{n // 8}") for k in "us" for n in (8, 16, 32, 64)}


def spec(op, t, *mods, **kw):
    return S(op, t, frozenset(mods), **kw)


def wrap(v, t):
    bits = int(t[1:])
    v &= (1 << bits) - 1
    return v - (1 << bits) if t[0] == "s" and v >> (bits - 1) else v


def rand(t, n, rng):
    info = np.iinfo(DT[t])
    edge = [info.min, info.max, 0, 1, -1 if t[0] == "s" else 2]
    vals = rng.integers(info.min, info.max, n, dtype=DT[t], endpoint=True)
    vals[: len(edge)] = np.array(edge, dtype=np.int64 if t[0] == "s" else np.uint64).astype(DT[t])
    return vals


def ints(arr):
    return [int(x) for x in arr]


TYPES = list(DT)


@pytest.mark.parametrize("t", TYPES)
def test_add_sub_mul_lo_wrap(t):
    rng = np.random.default_rng(1)
    a, b = rand(t, 200, rng), rand(t, 200, rng)
    for op, fn in (("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y)):
        got = alu.execute(spec(op, t, "lo") if op == "mul" else spec(op, t), a, b)
        assert got.dtype == DT[t]
        assert ints(got) == [wrap(fn(x, y), t) for x, y in zip(ints(a), ints(b))], op


@pytest.mark.parametrize("t", ["u16", "s16", "u32", "s32", "u64", "s64"])
def test_mul_hi_and_wide(t):
    rng = np.random.default_rng(2)
    bits = int(t[1:])
    a, b = rand(t, 200, rng), rand(t, 200, rng)
    hi = alu.execute(spec("mul", t, "hi"), a, b)
    assert ints(hi) == [wrap((x * y) >> bits, t) for x, y in zip(ints(a), ints(b))]
    c = rand(t, 200, rng)
    mad_hi = alu.execute(spec("mad", t, "hi"), a, b, c)
    assert ints(mad_hi) == [wrap(((x * y) >> bits) + z, t) for x, y, z in zip(ints(a), ints(b), ints(c))]
    if bits <= 32:
        wt = f"{t[0]}{bits * 2}"
        wide = alu.execute(spec("mul", t, "wide"), a, b)
        assert wide.dtype == DT[wt] and ints(wide) == [x * y for x, y in zip(ints(a), ints(b))]
        cw = rand(wt, 200, rng)
        mad_w = alu.execute(spec("mad", t, "wide"), a, b, cw)
        assert ints(mad_w) == [wrap(x * y + z, wt) for x, y, z in zip(ints(a), ints(b), ints(cw))]


def test_known_mul_hi_constants():
    u64max = np.array([2**64 - 1], np.uint64)
    assert int(alu.execute(spec("mul", "u64", "hi"), u64max, u64max)[0]) == 2**64 - 2
    m1 = np.array([-1], np.int64)
    assert int(alu.execute(spec("mul", "s64", "hi"), m1, m1)[0]) == 0
    big = np.array([2**31 - 1], np.int32)
    assert int(alu.execute(spec("mul", "s32", "hi"), big, big)[0]) == 0x3FFFFFFF
    assert int(alu.execute(spec("mul", "s64", "hi"), np.array([-(2**63)], np.int64), np.array([2], np.int64))[0]) == -1


def test_saturating_s32():
    a = np.array([2**31 - 1, -(2**31), 5], np.int32)
    b = np.array([1, -1, -7], np.int32)
    assert ints(alu.execute(spec("add", "s32", "sat"), a, b)) == [2**31 - 1, -(2**31), -2]
    assert ints(alu.execute(spec("sub", "s32", "sat"), a, -b)) == [2**31 - 1, -(2**31), -2]
    # mad.hi.sat: hi(a*b) + c saturated. (2^31-1)^2 >> 32 = 2^30 - 1; (-2^31)^2 >> 32 = 2^30;
    # (-2^31)(2^31-1) >> 32 = -2^30 (floor).
    x = np.array([2**31 - 1, -(2**31), -(2**31)], np.int32)
    y = np.array([2**31 - 1, -(2**31), 2**31 - 1], np.int32)
    c = np.array([2**31 - 1, -(2**31), -(2**31)], np.int32)
    assert ints(alu.execute(spec("mad", "s32", "hi", "sat"), x, y, c)) == [2**31 - 1, 2**30 - 2**31, -(2**31)]
    assert ints(alu.execute(spec("mad", "s32", "hi"), x, y, c)) == [wrap(2**30 - 1 + 2**31 - 1, "s32"),
                                                                    2**30 - 2**31, wrap(-(2**30) - 2**31, "s32")]


@pytest.mark.parametrize("t", ["u32", "s32"])
def test_mul24_mad24(t):
    rng = np.random.default_rng(3)
    a, b, c = rand(t, 200, rng), rand(t, 200, rng), rand(t, 200, rng)

    def low24(v):
        v &= 0xFFFFFF
        return v - (1 << 24) if t == "s32" and v >> 23 else v

    prods = [low24(x) * low24(y) for x, y in zip(ints(a), ints(b))]
    assert ints(alu.execute(spec("mul24", t, "lo"), a, b)) == [wrap(p, t) for p in prods]
    assert ints(alu.execute(spec("mul24", t, "hi"), a, b)) == [wrap(p >> 16, t) for p in prods]
    assert ints(alu.execute(spec("mad24", t, "lo"), a, b, c)) == [wrap(p + z, t) for p, z in zip(prods, ints(c))]


@pytest.mark.parametrize("t", TYPES)
def test_div_rem_truncate(t):
    rng = np.random.default_rng(4)
    a, b = rand(t, 300, rng), rand(t, 300, rng)
    b[b == 0] = 3
    b[7] = 0  # division by zero lane
    q, r = alu.execute(spec("div", t), a, b), alu.execute(spec("rem", t), a, b)
    for x, y, gq, gr in zip(ints(a), ints(b), ints(q), ints(r)):
        if y == 0:
            assert gq == wrap(-1, t) and gr == x  # documented hardware-like choice
            continue
        tq = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        assert gq == wrap(tq, t) and gr == wrap(x - tq * y, t)


def test_int_min_div_minus_one_wraps():
    a = np.array([-(2**31)], np.int32)
    m1 = np.array([-1], np.int32)
    assert int(alu.execute(spec("div", "s32"), a, m1)[0]) == -(2**31)
    assert int(alu.execute(spec("rem", "s32"), a, m1)[0]) == 0


def test_abs_neg_min_max_sad():
    a = np.array([-5, 7, -(2**31), 0], np.int32)
    b = np.array([3, -9, 5, 0], np.int32)
    assert ints(alu.execute(spec("abs", "s32"), a)) == [5, 7, -(2**31), 0]
    assert ints(alu.execute(spec("neg", "s32"), a)) == [5, -7, -(2**31), 0]
    assert ints(alu.execute(spec("min", "s32"), a, b)) == [-5, -9, -(2**31), 0]
    assert ints(alu.execute(spec("max", "s32", "relu"), a, b)) == [3, 7, 5, 0]
    ua, ub = np.array([1, 2**32 - 1], np.uint32), np.array([2, 0], np.uint32)
    assert ints(alu.execute(spec("min", "u32"), ua, ub)) == [1, 0]
    assert ints(alu.execute(spec("sad", "u32"), ua, ub, np.array([10, 1], np.uint32))) == [11, 0]


@pytest.mark.parametrize("t", ["b32", "b64"])
def test_popc_clz_brev(t):
    rng = np.random.default_rng(5)
    bits = int(t[1:])
    a = rand("u" + t[1:], 200, rng).astype(DT["u" + t[1:]])
    assert ints(alu.execute(spec("popc", t), a)) == [bin(x).count("1") for x in ints(a)]
    assert ints(alu.execute(spec("clz", t), a)) == [bits - x.bit_length() for x in ints(a)]
    assert ints(alu.execute(spec("brev", t), a)) == [int(format(x, f"0{bits}b")[::-1], 2) for x in ints(a)]


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfind(t):
    rng = np.random.default_rng(6)
    bits = int(t[1:])
    a = rand(t, 200, rng)

    def ref(x, shiftamt):
        v = ~x if x < 0 else x
        if v == 0:
            return 0xFFFFFFFF
        pos = v.bit_length() - 1
        return bits - 1 - pos if shiftamt else pos

    assert ints(alu.execute(spec("bfind", t), a)) == [ref(x, False) for x in ints(a)]
    assert ints(alu.execute(spec("bfind", t, "shiftamt"), a)) == [ref(x, True) for x in ints(a)]


def _bfe_ref(x, pos, length, t):
    """The ISA pseudocode for bfe, bit by bit."""
    bits = int(t[1:])
    msb = bits - 1
    pos, length = pos & 0xFF, length & 0xFF
    ux = x & ((1 << bits) - 1)
    sbit = 0 if t[0] == "u" or length == 0 else (ux >> min(pos + length - 1, msb)) & 1
    d = 0
    for i in range(bits):
        bit = (ux >> (pos + i)) & 1 if (i < length and pos + i <= msb) else sbit
        d |= bit << i
    return wrap(d, t)


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfe(t):
    rng = np.random.default_rng(7)
    a = rand(t, 300, rng)
    pos = rng.integers(0, 80, 300).astype(np.uint32)
    length = rng.integers(0, 80, 300).astype(np.uint32)
    pos[:4] = [0, 5, 300, 31]  # 300 & 0xff = 44
    length[:4] = [0, 0, 3, 256 + 2]
    got = alu.execute(spec("bfe", t), a, pos, length)
    assert ints(got) == [_bfe_ref(x, int(p), int(n), t) for x, p, n in zip(ints(a), pos, length)]


@pytest.mark.parametrize("t", ["b32", "b64"])
def test_bfi(t):
    rng = np.random.default_rng(8)
    ut = "u" + t[1:]
    bits = int(t[1:])
    a, b = rand(ut, 300, rng), rand(ut, 300, rng)
    pos = rng.integers(0, 80, 300).astype(np.uint32)
    length = rng.integers(0, 80, 300).astype(np.uint32)

    def ref(x, y, p, n):
        p, n = p & 0xFF, n & 0xFF
        f = y
        for i in range(n):
            if p + i > bits - 1:
                break
            f = (f & ~(1 << (p + i))) | (((x >> i) & 1) << (p + i))
        return f

    got = alu.execute(spec("bfi", t), a, b, pos, length)
    assert ints(got) == [ref(x, y, int(p), int(n)) for x, y, p, n in zip(ints(a), ints(b), pos, length)]


def test_prmt_generic_and_modes():
    a = np.array([0x33221100], np.uint32)
    b = np.array([0xF7665544], np.uint32)
    # generic: selector nibbles, msb of a nibble replicates the sign of the chosen byte
    assert int(alu.execute(spec("prmt", "b32"), a, b, np.array([0x3210], np.uint32))[0]) == 0x33221100
    assert int(alu.execute(spec("prmt", "b32"), a, b, np.array([0x7654], np.uint32))[0]) == 0xF7665544
    assert int(alu.execute(spec("prmt", "b32"), a, b, np.array([0xF140], np.uint32))[0]) == 0xFF114400
    assert int(alu.execute(spec("prmt", "b32"), a, b, np.array([0x0008], np.uint32))[0]) == 0x00000000
    c = np.arange(4, dtype=np.uint32)
    aa, bb = np.repeat(a, 4), np.repeat(b, 4)
    expect = {  # d.b3 d.b2 d.b1 d.b0 byte indices per c[1:0], from the ISA tables
        "f4e": ["3210", "4321", "5432", "6543"], "b4e": ["5670", "6701", "7012", "0123"],
        "rc8": ["0000", "1111", "2222", "3333"], "ecl": ["3210", "3211", "3222", "3333"],
        "ecr": ["0000", "1110", "2210", "3210"], "rc16": ["1010", "3232", "1010", "3232"],
    }
    source = (0xF7665544 << 32) | 0x33221100
    for mode, rows in expect.items():
        want = [sum(((source >> (8 * int(ch))) & 0xFF) << (8 * (3 - k)) for k, ch in enumerate(row)) for row in rows]
        assert ints(alu.execute(spec("prmt", "b32", mode), aa, bb, c)) == want, mode


@pytest.mark.parametrize("t", ["b16", "b32", "b64", "u32", "s32", "s64"])
def test_shifts_clamp(t):
    bits = int(t[1:])
    st = t if t[0] != "b" else "u" + t[1:]
    a = np.array([1, -5 if t[0] == "s" else 0x80, 3, 0x7F], dtype=np.int64).astype(DT[st])
    amt = np.array([0, 1, bits, 1000], dtype=np.uint32)
    got_l = alu.execute(spec("shl", t), a, amt)
    got_r = alu.execute(spec("shr", t), a, amt)
    for x, s, gl, gr in zip(ints(a), ints(amt), ints(got_l), ints(got_r)):
        assert gl == (wrap(x << s, st) if s < bits else 0)
        assert gr == (x >> min(s, bits - 1) if st[0] == "s" else (x >> s if s < bits else 0))


def test_logic_ops():
    a = np.array([0b1100, 0], np.uint32)
    b = np.array([0b1010, 7], np.uint32)
    assert ints(alu.execute(spec("and", "b32"), a, b)) == [0b1000, 0]
    assert ints(alu.execute(spec("or", "b32"), a, b)) == [0b1110, 7]
    assert ints(alu.execute(spec("xor", "b32"), a, b)) == [0b0110, 7]
    assert ints(alu.execute(spec("not", "b32"), a)) == [0xFFFFFFF3, 0xFFFFFFFF]
    assert ints(alu.execute(spec("cnot", "b32"), a)) == [0, 1]
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert alu.execute(spec("and", "pred"), p, q).tolist() == [True, False, False, False]
    assert alu.execute(spec("xor", "pred"), p, q).tolist() == [False, True, True, False]
    assert alu.execute(spec("not", "pred"), p).tolist() == [False, False, True, True]
