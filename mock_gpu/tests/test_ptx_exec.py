"""Hand-written PTX: divergence and reconvergence, barriers, warp operations, atomics, calls, faults."""

from __future__ import annotations

import numpy as np
import pytest
from _ptx_util import HEADER, Device

from mock_gpu import ptx
from mock_gpu.address_space import MemoryFault
from mock_gpu.ptx.exec import engine

LOOP = HEADER + """
.visible .entry loop(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
LOOP:
    add.u32 %r3, %r3, %r2;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p2, %r2, %r1;
    @%p2 bra LOOP;
DONE:
    activemask.b32 %r4;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r3, %r4};
    ret;
}
"""


def test_divergent_loop_reconverges_before_activemask():
    dev = Device(LOOP)
    out = dev.buf(np.zeros(80, np.uint32))
    dev.run("loop", (1, 1, 1), (40, 1, 1), out)
    got = dev.get(out, 80, np.uint32).reshape(40, 2)
    tid = np.arange(40)
    assert got[:, 0].tolist() == (tid * (tid - 1) // 2).tolist()
    assert got[:32, 1].tolist() == [0xFFFFFFFF] * 32 and got[32:, 1].tolist() == [0xFF] * 8


BARRIERS = HEADER + """
.visible .entry twobar(.param .u64 out, .param .u32 mode)
{
    .shared .align 4 .b32 seen[32];
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [mode];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, seen;
    shl.b32 %r4, %r1, 2;
    add.u32 %r4, %r3, %r4;
    st.shared.u32 [%r4], %r1;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra LOW;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bar.sync 1;
    @!%p2 barrier.sync 0;
    bra.uni DONE;
LOW:
    barrier.sync 0;
DONE:
    sub.u32 %r5, 31, %r1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r3, %r5;
    ld.shared.u32 %r5, [%r5];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
.visible .entry halfexit(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 ret;
    bar.sync 0;
    mov.u32 %r2, %ctaid.x;
    mad.lo.u32 %r3, %r2, 32, %r1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""


def test_barrier_some_threads_can_never_reach_raises():
    dev = Device(BARRIERS)
    out = dev.buf(np.zeros(32, np.uint32))
    with pytest.raises(ptx.BarrierDivergence) as e:
        dev.run("twobar", (2, 1, 1), (32, 1, 1), out, 0)
    assert e.value.kernel == "twobar" and e.value.block == (0, 0, 0)


def test_non_aligned_barrier_at_two_instructions_synchronizes_the_block():
    """Each thread reads, after the barrier, what its mirror thread of the other half stored before it: only a
    barrier that holds both halves (arriving at two different barrier.sync instructions) gives 31 - tid."""
    dev = Device(BARRIERS)
    out = dev.buf(np.zeros(32, np.uint32))
    dev.run("twobar", (1, 1, 1), (32, 1, 1), out, 1)
    np.testing.assert_array_equal(dev.get(out, 32, np.uint32), 31 - np.arange(32))


def test_exited_threads_do_not_count_at_a_barrier():
    dev = Device(BARRIERS)
    out = dev.buf(np.zeros(3 * 32, np.uint32))
    dev.run("halfexit", (3, 1, 1), (32, 1, 1), out)
    tid = np.arange(32, dtype=np.uint32)
    np.testing.assert_array_equal(dev.get(out, 96, np.uint32).reshape(3, 32), np.tile(np.where(tid >= 16, tid, 0), (3, 1)))


SHARED_REVERSE = HEADER + """
.visible .entry rev(.param .u64 out)
{
    .shared .align 4 .b8 buf[256];
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mad.lo.u32 %r3, %r2, 1000, %r1;
    shl.b32 %r4, %r1, 2;
    mov.u32 %r5, buf;
    add.u32 %r5, %r5, %r4;
    st.shared.u32 [%r5], %r3;
    bar.sync 0;
    sub.u32 %r6, 63, %r1;
    shl.b32 %r6, %r6, 2;
    cvta.shared.u64 %rd2, buf;
    cvt.u64.u32 %rd3, %r6;
    add.u64 %rd2, %rd2, %rd3;
    ld.u32 %r7, [%rd2];
    mad.lo.u32 %r3, %r2, 64, %r1;
    mul.wide.u32 %rd4, %r3, 4;
    add.u64 %rd4, %rd1, %rd4;
    bar.red.popc.u32 %r4, 0, %p1;
    st.global.u32 [%rd4], %r7;
    ret;
}
"""


def test_shared_memory_is_per_block_and_generic_addresses_reach_it():
    dev = Device(SHARED_REVERSE)
    out = dev.buf(np.zeros(3 * 64, np.uint32))
    dev.run("rev", (3, 1, 1), (64, 1, 1), out)
    expect = np.array([b * 1000 + 63 - t for b in range(3) for t in range(64)])
    assert dev.get(out, 192, np.uint32).tolist() == expect.tolist()


def _shfl_ref(vals, mode, b, width):
    out, ok = vals.copy(), np.zeros(vals.size, bool)
    for t in range(vals.size):
        lane, base = t % 32, (t % 32) // width * width
        j = {"up": lane - b, "down": lane + b, "bfly": lane ^ b, "idx": base + b % width}[mode]
        inside = base <= j < base + width if mode != "idx" else True
        if inside:
            out[t], ok[t] = vals[t - lane + j], True
    return out, ok


@pytest.mark.parametrize(("mode", "b", "width"), [("down", 3, 32), ("up", 2, 8), ("bfly", 5, 16), ("idx", 9, 8),
                                                  ("idx", 3, 32)])
def test_shfl_modes_with_segments_and_predicate(mode, b, width):
    c = (32 - width) << 8 | (0 if mode == "up" else 31)
    src = HEADER + f"""
.visible .entry s(.param .u64 out)
{{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.lo.u32 %r2, %r1, 7;
    shfl.sync.{mode}.b32 %r3|%p1, %r2, {b}, {c}, -1;
    selp.u32 %r4, 1, 0, %p1;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {{%r3, %r4}};
    ret;
}}
"""
    dev = Device(src)
    out = dev.buf(np.zeros(128, np.uint32))
    dev.run("s", (1, 1, 1), (64, 1, 1), out)
    got = dev.get(out, 128, np.uint32).reshape(64, 2)
    want, ok = _shfl_ref(np.arange(64) * 7, mode, b, width)
    assert got[:, 0].tolist() == want.tolist() and got[:, 1].astype(bool).tolist() == ok.tolist()


VOTE = HEADER + """
.visible .entry v(.param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .reg .pred %p<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p1, %r2, 0;
    vote.sync.ballot.b32 %r3, %p1, -1;
    setp.lt.u32 %p2, %r1, 40;
    vote.sync.all.pred %p3, %p2, -1;
    vote.sync.any.pred %p4, !%p2, -1;
    vote.sync.uni.pred %p5, %p2, -1;
    selp.u32 %r4, 1, 0, %p3;
    selp.u32 %r5, 2, 0, %p4;
    selp.u32 %r6, 4, 0, %p5;
    or.b32 %r4, %r4, %r5;
    or.b32 %r4, %r4, %r6;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r3, %r4};
    ret;
}
"""


def test_vote_per_warp():
    dev = Device(VOTE)
    out = dev.buf(np.zeros(128, np.uint32))
    dev.run("v", (1, 1, 1), (64, 1, 1), out)
    got = dev.get(out, 128, np.uint32).reshape(64, 2)
    assert set(got[:, 0].tolist()) == {0x11111111}
    # warp 0: all < 40 -> all, uni; warp 1: lanes 0..7 < 40 -> any(!p), not uni
    assert set(got[:32, 1].tolist()) == {1 | 4} and set(got[32:, 1].tolist()) == {2}


ATOMICS = HEADER + """
.visible .entry at(.param .u64 cnt, .param .u64 olds, .param .u64 fsum, .param .u64 misc)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<3>;
    .shared .align 4 .b32 sh;
    ld.param.u64 %rd1, [cnt];
    ld.param.u64 %rd2, [olds];
    ld.param.u64 %rd3, [fsum];
    ld.param.u64 %rd9, [misc];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    and.b32 %r5, %r4, 1;
    mul.wide.u32 %rd4, %r5, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.u32 %r6, %r4, 1;
    atom.global.add.u32 %r7, [%rd5], %r6;
    mul.wide.u32 %rd6, %r4, 4;
    add.s64 %rd7, %rd2, %rd6;
    st.global.u32 [%rd7], %r7;
    cvt.rn.f32.u32 %f1, %r4;
    red.global.add.f32 [%rd3], %f1;
    atom.global.inc.u32 %r8, [%rd9], 4;
    atom.global.max.s32 %r8, [%rd9+4], %r4;
    atom.global.cas.b32 %r8, [%rd9+8], %r4, 1000;
    atom.shared.add.u32 %r8, [sh], 1;
    bar.sync 0;
    ld.shared.u32 %r9, [sh];
    atom.global.exch.b32 %r8, [%rd9+12], %r9;
    ret;
}
"""


@pytest.mark.parametrize("chunk_bytes", [None, 1])
def test_atomics_apply_in_thread_order(monkeypatch, chunk_bytes):
    if chunk_bytes is not None:  # one block per chunk: ordering must not depend on chunking
        monkeypatch.setattr(engine, "CHUNK_BYTES", chunk_bytes)
    dev = Device(ATOMICS)
    n = 96
    cnt, olds = dev.buf(np.zeros(2, np.uint32)), dev.buf(np.zeros(n, np.uint32))
    fsum, misc = dev.buf(np.zeros(1, np.float32)), dev.buf(np.array([0, -5, 2, 0], np.int32))
    dev.run("at", (3, 1, 1), (32, 1, 1), cnt, olds, fsum, misc)
    vals = np.arange(n) + 1
    want = np.zeros(n, np.int64)
    for parity in (0, 1):
        sel = np.arange(parity, n, 2)
        want[sel] = np.r_[0, np.cumsum(vals[sel])[:-1]]
    assert dev.get(olds, n, np.uint32).tolist() == want.tolist()
    assert dev.get(cnt, 2, np.uint32).tolist() == [vals[0::2].sum(), vals[1::2].sum()]
    assert dev.get(fsum, 1, np.float32)[0] == np.float32(np.arange(n).sum())
    # inc wraps at 4 -> 96 increments end at 96 % 5 == 1; max of tids; cas succeeds for thread 2 only; exch = 32
    assert dev.get(misc, 4, np.int32).tolist() == [96 % 5, n - 1, 1000, 32]


CALL = HEADER + """
.func (.param .b32 ret0) addmul(.param .b32 a, .param .b32 b)
{
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.b32 %r1, [a];
    ld.param.b32 %r2, [b];
    setp.gt.u32 %p1, %r1, 5;
    @%p1 bra BIG;
    add.u32 %r3, %r1, %r2;
    st.param.b32 [ret0], %r3;
    ret;
BIG:
    mul.lo.u32 %r3, %r1, %r2;
    st.param.b32 [ret0], %r3;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {
    .param .b32 p0;
    .param .b32 p1;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    st.param.b32 [p1], 10;
    call.uni (r0), addmul, (p0, p1);
    ld.param.b32 %r2, [r0];
    }
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


def test_call_with_params_return_value_and_divergent_ret():
    dev = Device(CALL)
    out = dev.buf(np.zeros(10, np.uint32))
    dev.run("k", (1, 1, 1), (10, 1, 1), out)
    t = np.arange(10)
    assert dev.get(out, 10, np.uint32).tolist() == np.where(t > 5, t * 10, t + 10).tolist()


FAULTS = HEADER + """
.visible .entry oob(.param .u64 out, .param .u32 n)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry shoob()
{
    .shared .align 4 .b8 s[64];
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    st.shared.u32 [%r2], %r1;
    ret;
}
.visible .entry mis(.param .u64 out)
{
    .reg .b64 %rd<3>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [out];
    ld.global.f32 %f1, [%rd1+2];
    ret;
}
.visible .entry tr()
{
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 5;
    @%p1 trap;
    ret;
}
"""


def test_global_out_of_bounds_names_kernel_block_thread():
    dev = Device(FAULTS, exact_bounds=True)
    out = dev.space.alloc(40)
    with pytest.raises(MemoryFault) as e:
        dev.run("oob", (2, 1, 1), (16, 1, 1), out, 10)
    f = e.value
    assert (f.kind, f.kernel, f.block, f.thread, f.address) == ("out-of-bounds", "oob", (0, 0, 0), (10, 0, 0), out + 40)
    dev.space.free(out)
    with pytest.raises(MemoryFault) as e:
        dev.run("oob", (1, 1, 1), (4, 1, 1), out, 10)
    assert e.value.kind == "use-after-free"


def test_shared_out_of_bounds_misaligned_and_trap():
    dev = Device(FAULTS)
    with pytest.raises(MemoryFault) as e:
        dev.run("shoob", (1, 1, 1), (32, 1, 1))
    assert (e.value.space, e.value.thread) == ("shared", (16, 0, 0))
    with pytest.raises(MemoryFault) as e:
        dev.run("mis", (1, 1, 1), (1, 1, 1), dev.space.alloc(16))
    assert e.value.kind == "misaligned"
    with pytest.raises(ptx.ExecutionError) as e2:
        dev.run("tr", (1, 1, 1), (8, 1, 1))
    assert e2.value.thread == (5, 0, 0) and "trap" in str(e2.value)


def test_launch_rejects_bad_configuration():
    dev = Device(FAULTS)
    k = dev.module.kernels["tr"]
    with pytest.raises(ValueError, match="1024"):
        ptx.launch(dev.module, k, (1, 1, 1), (2048, 1, 1), 0, b"", dev.space, 0)
    with pytest.raises(ValueError, match="parameter buffer"):
        ptx.launch(dev.module, k, (1, 1, 1), (1, 1, 1), 0, b"\0" * 8, dev.space, 0)


def test_module_globals_are_initialized_and_addressable():
    src = HEADER + """
.global .align 4 .u32 tab[4] = {5, 6, 7};
.const .align 8 .f64 scale = 0d4000000000000000;
.visible .entry g(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    .reg .f64 %fd<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    mov.u64 %rd3, tab;
    add.s64 %rd3, %rd3, %rd2;
    ld.global.u32 %r2, [%rd3];
    cvt.rn.f64.u32 %fd1, %r2;
    ld.const.f64 %fd2, [scale];
    mul.f64 %fd1, %fd1, %fd2;
    mul.wide.u32 %rd4, %r1, 8;
    add.s64 %rd5, %rd1, %rd4;
    st.global.f64 [%rd5], %fd1;
    ret;
}
"""
    dev = Device(src)
    assert dev.module.globals == {"tab": (16, 4), "scale": (8, 8)}
    ptr, size = dev.module.global_address("tab")
    assert size == 16 and dev.get(ptr, 4, np.uint32).tolist() == [5, 6, 7, 0]
    out = dev.buf(np.zeros(4))
    dev.run("g", (1, 1, 1), (4, 1, 1), out)
    assert dev.get(out, 4, np.float64).tolist() == [10.0, 12.0, 14.0, 0.0]
