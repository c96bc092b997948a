"""The PYTHON backend against hand-computed values of the IR semantics."""

import math

import ml_dtypes
import numpy as np
import pytest

from runtime_core import Buffer, CompileError, Device, dtypes
from runtime_core.ir import KernelBuilder, Ops


def run(kernel, *arrays, vals=(), global_size=None, local_size=None):
    dev = Device["PYTHON"]
    prg = dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))
    bufs = [Buffer.from_numpy("PYTHON", a) for a in arrays]
    prg(*[b.opaque for b in bufs], global_size=global_size or kernel.global_size,
        local_size=local_size or kernel.local_size, vals=vals)
    return [b.numpy() for b in bufs]


def binary_kernel(op, dtype, n):
    kb = KernelBuilder(f"k_{op.name}", (n,))
    out, a, b = kb.buffer(dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dtype), kb.buffer(dtype), kb.buffer(dtype)
    i = kb.global_id(0)
    kb.store(out, i, kb.alu(op, kb.load(a, i), kb.load(b, i)))
    return kb.build()


def test_idiv_and_mod_truncate_like_c():
    a = np.array([7, -7, 7, -7, 0, -1], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], dtype=np.int32)
    q = run(binary_kernel(Ops.IDIV, dtypes.int32, 6), np.zeros(6, np.int32), a, b)[0]
    r = run(binary_kernel(Ops.MOD, dtypes.int32, 6), np.zeros(6, np.int32), a, b)[0]
    assert q.tolist() == [3, -3, -3, 3, 0, 0]
    assert r.tolist() == [1, -1, 1, -1, 0, -1]


def test_integer_overflow_wraps():
    a = np.array([2**31 - 1, -(2**31)], dtype=np.int32)
    out = run(binary_kernel(Ops.ADD, dtypes.int32, 2), np.zeros(2, np.int32), a, np.array([1, -1], np.int32))[0]
    assert out.tolist() == [-(2**31), 2**31 - 1]
    out = run(binary_kernel(Ops.MUL, dtypes.uint8, 2), np.zeros(2, np.uint8), np.array([16, 255], np.uint8),
              np.array([16, 255], np.uint8))[0]
    assert out.tolist() == [0, 1]


def test_float_max_min_return_the_number_when_one_side_is_nan():
    a = np.array([np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([3.0, np.nan, np.nan, 5.0], np.float32)
    mx = run(binary_kernel(Ops.MAX, dtypes.float32, 4), np.zeros(4, np.float32), a, b)[0]
    mn = run(binary_kernel(Ops.MIN, dtypes.float32, 4), np.zeros(4, np.float32), a, b)[0]
    assert mx[0] == 3.0 and mx[1] == 1.0 and math.isnan(mx[2]) and mx[3] == 5.0
    assert mn[0] == 3.0 and mn[1] == 1.0 and math.isnan(mn[2]) and mn[3] == -2.0


def test_comparisons_with_nan():
    a = np.array([np.nan, 1.0], np.float64)
    b = np.array([1.0, np.nan], np.float64)
    lt = run(binary_kernel(Ops.CMPLT, dtypes.float64, 2), np.zeros(2, bool), a, b)[0]
    ne = run(binary_kernel(Ops.CMPNE, dtypes.float64, 2), np.zeros(2, bool), a, b)[0]
    assert lt.tolist() == [False, False] and ne.tolist() == [True, True]


def cast_kernel(src, dst, n):
    kb = KernelBuilder("cast", (n,))
    out, a = kb.buffer(dst), kb.buffer(src)
    i = kb.global_id(0)
    kb.store(out, i, kb.cast(kb.load(a, i), dst))
    return kb.build()


def test_casts_truncate_and_round_to_even():
    f = np.array([2.9, -2.9, 0.5, -0.0], np.float32)
    assert run(cast_kernel(dtypes.float32, dtypes.int32, 4), np.zeros(4, np.int32), f)[0].tolist() == [2, -2, 0, 0]
    # 2049 is halfway between float16 neighbours 2048 and 2050: ties to even -> 2048; 2051 -> 2052
    i = np.array([2049, 2051, 70000, -3], np.int32)
    h = run(cast_kernel(dtypes.int32, dtypes.float16, 4), np.zeros(4, np.float16), i)[0]
    assert h.tolist() == [2048.0, 2052.0, math.inf, -3.0]
    assert run(cast_kernel(dtypes.float32, dtypes.bool, 4), np.zeros(4, bool), f)[0].tolist() == [True, True, True, False]


def test_float64_to_bfloat16_rounds_once():
    x = np.array([1 + 2**-8 + 2**-30, 1 - 2**-9 - 2**-40], np.float64)  # float32 rounding would land on a tie
    out = run(cast_kernel(dtypes.float64, dtypes.bfloat16, 2), np.zeros(2, ml_dtypes.bfloat16), x)[0]
    assert out.astype(np.float64).tolist() == [1 + 2**-7, 1 - 2**-8]


def test_gated_load_gives_alt_and_loop_accumulates_with_var():
    kb = KernelBuilder("masked_sum", (2,), (4,))
    out, a = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32)
    n, i = kb.var("n"), kb.global_id(0)
    acc = kb.acc(0, dtypes.int32)
    with kb.range(0, 3) as r:
        idx = kb.add(kb.mul(r, 8), i)
        kb.assign(acc, kb.add(acc, kb.load(a, idx, gate=kb.lt(i, n), alt=-1)))
    kb.store(out, i, acc)
    a = np.arange(24, dtype=np.int32)
    got = run(kb.build(), np.zeros(8, np.int32), a, vals=(5,))[0]
    expect = [a[i] + a[8 + i] + a[16 + i] if i < 5 else -3 for i in range(8)]
    assert got.tolist() == expect


def test_local_memory_tree_reduction_per_group():
    group = 8
    kb = KernelBuilder("tree", (3,), (group,))
    out, a = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    smem = kb.local("smem", dtypes.float32, group)
    lid, gid = kb.special("local", 0), kb.special("group", 0)
    kb.store(smem, lid, kb.load(a, kb.global_id(0)))
    kb.barrier()
    for stride in (4, 2, 1):
        with kb.if_(kb.lt(lid, stride)):
            kb.store(smem, lid, kb.add(kb.load(smem, lid), kb.load(smem, kb.add(lid, stride))))
        kb.barrier()
    with kb.if_(kb.lt(lid, 1)):
        kb.store(out, gid, kb.load(smem, 0))
    a = np.arange(24, dtype=np.float32)
    got = run(kb.build(), np.zeros(3, np.float32), a)[0]
    np.testing.assert_array_equal(got, a.reshape(3, 8).sum(axis=1))


def test_out_of_bounds_store_names_thread_and_index():
    kb = KernelBuilder("oob", (5,))
    out = kb.buffer(dtypes.float32)
    kb.store(out, kb.global_id(0), 1.0)
    with pytest.raises(IndexError, match=r"thread 4 .* index 4 of buffer 0 with 4 elements"):
        run(kb.build(), np.zeros(4, np.float32))


def test_wrong_buffer_or_val_count_fails_before_running():
    k = binary_kernel(Ops.ADD, dtypes.int32, 2)
    dev = Device["PYTHON"]
    prg = dev.runtime(k.name, dev.compiler.compile(dev.renderer.render(k)))
    b = Buffer("PYTHON", 2, dtypes.int32).allocate()
    with pytest.raises(ValueError, match="takes 3 buffers, got 2"):
        prg(b.opaque, b.opaque)
    with pytest.raises(ValueError, match="takes 0 int vals, got 1"):
        prg(b.opaque, b.opaque, b.opaque, vals=(1,))


def test_compiler_rejects_invalid_ir_text():
    with pytest.raises(CompileError, match="invalid kernel IR"):
        Device["PYTHON"].compiler.compile('{"format": "runtime-ir/1"}')


def test_wide_integers_to_bfloat16_round_once():
    # 2**24 + 2**16 + 1 lies just above the tie between bfloat16 neighbours 2**24 and 2**24 + 2**17: it rounds up
    x = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 257, 383, 2**63 - 1], np.int64)
    out = run(cast_kernel(dtypes.int64, dtypes.bfloat16, 5), np.zeros(5, ml_dtypes.bfloat16), x)[0]
    assert out.astype(np.float64).tolist() == [2**24 + 2**17, -(2**24 + 2**17), 256, 384, 2.0**63]
