"""PTX setp/set/selp/slct/testp (mock_gpu.ptx.alu) against Python comparison references, and the agreement of
alu.supports with alu.execute over a grid of instruction forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mock_gpu.ptx import alu

S = alu.AluSpec

FLOAT_REF = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y and not (math.isnan(x) or math.isnan(y)),
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
    "equ": lambda x, y: x == y or math.isnan(x) or math.isnan(y), "neu": lambda x, y: not x == y,
    "ltu": lambda x, y: not x >= y, "leu": lambda x, y: not x > y, "gtu": lambda x, y: not x <= y,
    "geu": lambda x, y: not x < y, "num": lambda x, y: not (math.isnan(x) or math.isnan(y)),
    "nan": lambda x, y: math.isnan(x) or math.isnan(y),
}
INT_REF = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
           "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y, "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y,
           "hi": lambda x, y: x > y, "hs": lambda x, y: x >= y}


@pytest.mark.parametrize("fmt", ["f32", "f64", "f16"])
def test_setp_float_all_comparisons(fmt):
    vals = [-np.inf, -1.0, -0.0, 0.0, 0.5, 1.0, np.inf, np.nan]
    pairs = list(itertools.product(vals, vals))
    dt = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[fmt]
    a = np.array([p[0] for p in pairs], dt)
    b = np.array([p[1] for p in pairs], dt)
    for cmp, ref in FLOAT_REF.items():
        got = alu.execute(S("setp", fmt, frozenset(), cmp=cmp), a, b)
        assert got.dtype == np.bool_ and got.tolist() == [ref(float(x), float(y)) for x, y in pairs], cmp


def test_setp_bf16_uses_values():
    one, two = np.array([0x3F80], np.uint16), np.array([0x4000], np.uint16)
    assert alu.execute(S("setp", "bf16", frozenset(), cmp="lt"), one, two).tolist() == [True]


@pytest.mark.parametrize("t", ["s32", "u32", "b32", "s64", "u64", "s16", "u16"])
def test_setp_int_signedness(t):
    dt = np.dtype(f"{'i' if t[0] == 's' else 'u'}{int(t[1:]) // 8}")
    raw = np.array([0, 1, 2 ** (int(t[1:]) - 1), 2 ** int(t[1:]) - 1], dtype=np.uint64).astype(
        np.dtype(f"u{dt.itemsize}")).view(dt)
    pairs = list(itertools.product(raw, raw))
    a = np.array([p[0] for p in pairs], dt)
    b = np.array([p[1] for p in pairs], dt)
    for cmp, ref in INT_REF.items():
        got = alu.execute(S("setp", t, frozenset(), cmp=cmp), a, b)
        assert got.tolist() == [ref(int(x), int(y)) for x, y in pairs], cmp


def test_setp_boolop_and_q():
    a = np.array([1, 1, 5, 5], np.int32)
    b = np.array([2, 2, 2, 2], np.int32)
    c = np.array([True, False, True, False])
    for boolop, fn in (("and", lambda t, c: t and c), ("or", lambda t, c: t or c), ("xor", lambda t, c: t != c)):
        p, q = alu.execute(S("setp", "s32", frozenset({"pq"}), cmp="lt", boolop=boolop), a, b, c)
        t = [True, True, False, False]
        assert p.tolist() == [fn(x, y) for x, y in zip(t, c)]
        assert q.tolist() == [fn(not x, y) for x, y in zip(t, c)]
    p, q = alu.execute(S("setp", "s32", frozenset({"pq"}), cmp="lt"), a, b)
    assert p.tolist() == [True, True, False, False] and q.tolist() == [False, False, True, True]


def test_set_values():
    a, b = np.array([1.0, np.nan], np.float32), np.array([2.0, 2.0], np.float32)
    assert alu.execute(S("set", "u32", frozenset(), stype="f32", cmp="lt"), a, b).tolist() == [0xFFFFFFFF, 0]
    assert alu.execute(S("set", "s32", frozenset(), stype="f32", cmp="ltu"), a, b).tolist() == [-1, -1]
    assert alu.execute(S("set", "f32", frozenset(), stype="f32", cmp="ge"), a, b).tolist() == [0.0, 0.0]
    got = alu.execute(S("set", "f32", frozenset(), stype="f32", cmp="lt", boolop="and"), a, b, np.array([False, True]))
    assert got.tolist() == [0.0, 0.0]


def test_selp_slct():
    a, b = np.array([1, 2, 3], np.int32), np.array([10, 20, 30], np.int32)
    assert alu.execute(S("selp", "s32", frozenset()), a, b, np.array([True, False, True])).tolist() == [1, 20, 3]
    c_int = np.array([0, -1, 5], np.int32)
    assert alu.execute(S("slct", "s32", frozenset(), stype="s32"), a, b, c_int).tolist() == [1, 20, 3]
    c_f = np.array([-0.0, np.nan, -1e-40], np.float32)
    assert alu.execute(S("slct", "s32", frozenset(), stype="f32"), a, b, c_f).tolist() == [1, 20, 30]
    assert alu.execute(S("slct", "s32", frozenset({"ftz"}), stype="f32"), a, b, c_f).tolist() == [1, 20, 3]


def test_testp_classes():
    x = np.array([0.0, 1e-40, 1.0, np.inf, -np.inf, np.nan, -3e38], np.float32)
    want = {"finite": [1, 1, 1, 0, 0, 0, 1], "infinite": [0, 0, 0, 1, 1, 0, 0], "number": [1, 1, 1, 1, 1, 0, 1],
            "notanumber": [0, 0, 0, 0, 0, 1, 0], "normal": [0, 0, 1, 0, 0, 0, 1], "subnormal": [0, 1, 0, 0, 0, 0, 0]}
    for kind, expected in want.items():
        assert alu.execute(S("testp", "f32", frozenset({kind})), x).tolist() == [bool(v) for v in expected], kind
    assert alu.execute(S("testp", "f64", frozenset({"subnormal"})), np.array([1e-310, 1e-300])).tolist() == [
        True, False]


# ---- supports() agrees with execute() -------------------------------------------------------------------------
STORAGE = {"pred": np.bool_, "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
           "f16x2": np.uint32, "bf16x2": np.uint32}
STORAGE.update({f"{k}{n}": np.dtype(f"{'i' if k == 's' else 'u'}{n // 8}").type for k in "bus" for n in (8, 16, 32,
                                                                                                           64)})
OPS = ["add", "sub", "mul", "mad", "fma", "mul24", "mad24", "sad", "div", "rem", "abs", "neg", "min", "max",
       "copysign", "and", "or", "xor", "not", "cnot", "shl", "shr", "bfe", "bfi", "prmt", "popc", "clz", "brev",
       "bfind", "selp", "slct", "setp", "set", "cvt", "ex2", "lg2", "sin", "cos", "sqrt", "rsqrt", "rcp", "tanh",
       "testp", "frobnicate"]
MODSETS = [(), ("lo",), ("hi",), ("wide",), ("sat",), ("rn",), ("rz", "ftz"), ("rni",), ("approx", "ftz"),
           ("hi", "sat"), ("f4e",), ("shiftamt",), ("finite",), ("rn", "rz"), ("NaN",), ("relu",), ("cc",),
           ("pq",), ("bogus",)]


def _operands(spec: alu.AluSpec, n: int = 3):
    """Operand arrays of the dtypes the contract prescribes for this instruction form."""
    def arr(t):
        return np.ones(n, dtype=STORAGE[t])

    t, op = spec.type, spec.op
    if op == "cvt":
        return [arr(spec.stype)] * (2 if t in ("f16x2", "bf16x2") else 1)
    if op in ("shl", "shr"):
        return [arr(t), arr("u32")]
    if op == "bfe":
        return [arr(t), arr("u32"), arr("u32")]
    if op == "bfi":
        return [arr(t), arr(t), arr("u32"), arr("u32")]
    if op == "selp":
        return [arr(t), arr(t), arr("pred")]
    if op == "slct":
        return [arr(t), arr(t), arr(spec.stype)]
    if op in ("setp", "set"):
        ct = t if op == "setp" else spec.stype
        return [arr(ct), arr(ct)] + ([arr("pred")] if spec.boolop else [])
    if op in ("mad", "mad24", "fma", "sad"):
        wide = f"{t[0]}{int(t[1:]) * 2}" if "wide" in spec.mods and t[1:].isdigit() and int(t[1:]) <= 32 else t
        return [arr(t), arr(t), arr(wide)]
    arity = {"abs": 1, "neg": 1, "not": 1, "cnot": 1, "popc": 1, "clz": 1, "brev": 1, "bfind": 1, "ex2": 1, "lg2": 1,
             "sin": 1, "cos": 1, "sqrt": 1, "rsqrt": 1, "rcp": 1, "tanh": 1, "testp": 1, "prmt": 3}.get(op, 2)
    return [arr(t)] * arity


def _specs():
    for op, t, mods in itertools.product(OPS, list(STORAGE), MODSETS):
        if op == "cvt":
            for src in ("s32", "f32", "f16", "u64", "bf16", "pred"):
                yield S(op, t, frozenset(mods), stype=src)
        elif op in ("setp", "set"):
            for cmp, boolop in (("lt", None), ("ltu", "and"), ("lo", "xor"), ("bogus", None)):
                yield S(op, t if op == "setp" else "u32", frozenset(mods), stype=t if op == "set" else None,
                        cmp=cmp, boolop=boolop)
        elif op == "slct":
            yield S(op, t, frozenset(mods), stype="f32")
        else:
            yield S(op, t, frozenset(mods))


def test_supports_agrees_with_execute():
    supported = 0
    for spec in _specs():
        ops = _operands(spec)
        if alu.supports(spec):
            supported += 1
            with np.errstate(all="ignore"):
                out = alu.execute(spec, *ops)
            for o in out if isinstance(out, tuple) else (out,):
                assert isinstance(o, np.ndarray) and o.shape == (3,), spec
        else:
            with pytest.raises(alu.UnsupportedInstruction, match="unsupported ALU instruction"):
                alu.execute(spec, *ops)
    assert supported > 500  # the grid exercises many supported forms, not only rejections


def test_unsupported_forms_are_rejected():
    assert not alu.supports(S("add", "u32", frozenset({"cc"})))
    assert not alu.supports(S("fma", "u32", frozenset()))
    assert not alu.supports(S("frobnicate", "u32", frozenset()))
    assert not alu.supports(S("add", "f32", frozenset({"rn", "rz"})))
    assert alu.supports(S("add", "f16x2", frozenset({"rn"})))
    with pytest.raises(alu.UnsupportedInstruction, match="add.cc.u32"):
        alu.execute(S("add", "u32", frozenset({"cc"})), np.ones(2, np.uint32), np.ones(2, np.uint32))


def test_wrong_operand_count_raises_value_error():
    with pytest.raises(ValueError, match="takes 2 source operands"):
        alu.execute(S("add", "u32", frozenset()), np.ones(2, np.uint32))
