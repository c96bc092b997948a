"""Hand-written PTX for instruction forms compilers rarely emit on their own (inline asm, sm_90 packed integers):
lop3's predicate form, bmsk, szext, SIMD video with .sat/.add, packed half comparisons, u16x2 arithmetic,
cp.async zero-fill, atom.cas.b16 and .bf16x2 adds. Expected values are computed independently in Python."""

from __future__ import annotations

import numpy as np
from _ptx_util import HEADER, Device


def _run(body: str, regs: str, a: np.ndarray, b: np.ndarray, outs: int) -> np.ndarray:
    """Run ``body`` for 64 threads with %r1 = a[tid], %r2 = b[tid]; it stores ``outs`` words at [%rd9 + 4k]."""
    src = HEADER + f""".visible .entry t(.param .u64 pa, .param .u64 pb, .param .u64 po)
{{
    .reg .b32 %r<40>;
    .reg .b64 %rd<12>;
    .reg .pred %p<8>;
    .reg .b16 %h<8>;
{regs}
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [po];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd4, %r0, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r1, [%rd5];
    ld.global.u32 %r2, [%rd6];
    mul.wide.u32 %rd7, %r0, {4 * outs};
    add.s64 %rd9, %rd3, %rd7;
{body}
    ret;
}}
"""
    dev = Device(src)
    pa, pb, po = dev.buf(a), dev.buf(b), dev.space.alloc(64 * 4 * outs)
    dev.run("t", (1, 1, 1), (64, 1, 1), pa, pb, po)
    return dev.get(po, 64 * outs, np.uint32).reshape(64, outs)


def _words(rng: np.random.Generator, n: int = 64) -> np.ndarray:
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


def test_lop3_predicate_form_bmsk_and_szext(rng: np.random.Generator) -> None:
    a, b = _words(rng), _words(rng)
    a[:4] = 0
    body = """
    lop3.or.b32 %r3|%p1, %r1, %r2, %r1, 0x80, %p0;
    selp.u32 %r4, 1, 0, %p1;
    and.b32 %r5, %r2, 31;
    bmsk.wrap.b32 %r6, %r5, 7;
    bmsk.clamp.b32 %r7, %r2, %r1;
    szext.clamp.s32 %r8, %r1, %r5;
    szext.wrap.u32 %r10, %r1, %r2;
    st.global.u32 [%rd9], %r3;
    st.global.u32 [%rd9+4], %r4;
    st.global.u32 [%rd9+8], %r6;
    st.global.u32 [%rd9+12], %r7;
    st.global.u32 [%rd9+16], %r8;
    st.global.u32 [%rd9+20], %r10;"""
    got = _run(body, "    setp.ne.u32 %p0, %r0, %r0;", a, b, 6)
    m = 0xFFFFFFFF

    def mask(start: int, width: int) -> int:
        end = min(start + width, 32)
        return ((1 << end) - (1 << start)) & m if start < 32 else 0

    def ext(x: int, n: int, signed: bool) -> int:
        if n == 0:
            return 0
        if n >= 32:
            return x
        v = x & ((1 << n) - 1)
        return (v - (1 << n)) & m if signed and v >> (n - 1) else v

    for t in range(64):
        x, y = int(a[t]), int(b[t])
        d = x & y  # immLut 0x80 with c = a: a & b & a
        assert got[t, 0] == d and got[t, 1] == int(d != 0)  # p = (d != 0) | false
        assert got[t, 2] == mask(y & 31, 7)
        assert got[t, 3] == mask(min(y, 32), min(x, 32))
        assert got[t, 4] == ext(x, y & 31, True)
        assert got[t, 5] == ext(x, y & 31, False)


def test_simd_video_sat_add_and_vset(rng: np.random.Generator) -> None:
    a, b = _words(rng), _words(rng)
    body = """
    vsub4.s32.s32.s32.sat %r3, %r1, %r2, %r0;
    vabsdiff2.u32.u32.u32.add %r4, %r1, %r2, %r0;
    vset4.u32.u32.lt %r5, %r1, %r2, %r0;
    vmax2.s32.s32.s32 %r6, %r1, %r2, %r0;
    vavrg4.u32.u32.u32 %r7, %r1, %r2, %r0;
    st.global.u32 [%rd9], %r3;
    st.global.u32 [%rd9+4], %r4;
    st.global.u32 [%rd9+8], %r5;
    st.global.u32 [%rd9+12], %r6;
    st.global.u32 [%rd9+16], %r7;"""
    got = _run(body, "", a, b, 5)

    def lanes(v: int, w: int, signed: bool) -> list[int]:
        out = [(v >> (k * w)) & ((1 << w) - 1) for k in range(32 // w)]
        return [e - (1 << w) if signed and e >> (w - 1) else e for e in out]

    def pack(vals: list[int], w: int) -> int:
        return sum((e & ((1 << w) - 1)) << (k * w) for k, e in enumerate(vals))

    for t in range(64):
        x, y = int(a[t]), int(b[t])
        sx, sy = lanes(x, 8, True), lanes(y, 8, True)
        assert got[t, 0] == pack([max(-128, min(127, p - q)) for p, q in zip(sx, sy, strict=True)], 8)
        assert got[t, 1] == (t + sum(abs(p - q) for p, q in zip(lanes(x, 16, False), lanes(y, 16, False),
                                                                 strict=True))) & 0xFFFFFFFF
        assert got[t, 2] == pack([int(p < q) for p, q in zip(lanes(x, 8, False), lanes(y, 8, False), strict=True)], 8)
        assert got[t, 3] == pack([max(p, q) for p, q in zip(lanes(x, 16, True), lanes(y, 16, True), strict=True)], 16)
        assert got[t, 4] == pack([(p + q + 1) >> 1 for p, q in zip(lanes(x, 8, False), lanes(y, 8, False),
                                                                    strict=True)], 8)


def test_packed_half_comparisons_and_u16x2_arithmetic(rng: np.random.Generator) -> None:
    a = rng.integers(-4, 5, 128).astype(np.float16)
    b = rng.integers(-4, 5, 128).astype(np.float16)
    a[3] = np.nan
    body = """
    setp.lt.f16x2 %p1|%p2, %r1, %r2;
    selp.u32 %r3, 1, 0, %p1;
    selp.u32 %r4, 2, 0, %p2;
    or.b32 %r5, %r3, %r4;
    set.le.u32.f16x2 %r6, %r1, %r2;
    set.gtu.f16x2.f16x2 %r7, %r1, %r2;
    add.u16x2 %r8, %r1, %r2;
    min.s16x2 %r10, %r1, %r2;
    st.global.u32 [%rd9], %r5;
    st.global.u32 [%rd9+4], %r6;
    st.global.u32 [%rd9+8], %r7;
    st.global.u32 [%rd9+12], %r8;
    st.global.u32 [%rd9+16], %r10;"""
    got = _run(body, "", a.view(np.uint32), b.view(np.uint32), 5)
    lo, hi = a[0::2], a[1::2]
    blo, bhi = b[0::2], b[1::2]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[:, 0], (lo < blo) + 2 * (hi < bhi))
        np.testing.assert_array_equal(got[:, 1], np.where(lo <= blo, 0xFFFF, 0) | np.where(hi <= bhi, 0xFFFF0000, 0))
        gtu = ~(a <= b)  # unordered greater: true when either is NaN
    np.testing.assert_array_equal(np.ascontiguousarray(got[:, 2]).view(np.float16), gtu.astype(np.float16))
    ua, ub = a.view(np.uint16).astype(np.int64), b.view(np.uint16).astype(np.int64)
    np.testing.assert_array_equal(np.ascontiguousarray(got[:, 3]).view(np.uint16), ((ua + ub) & 0xFFFF).astype(np.uint16))
    np.testing.assert_array_equal(np.ascontiguousarray(got[:, 4]).view(np.int16), np.minimum(a.view(np.int16), b.view(np.int16)))


def test_cp_async_zero_fill_and_ignore_src(rng: np.random.Generator) -> None:
    a = _words(rng)
    body = """
    .shared .align 16 .b8 buf[1024];
    mov.u32 %r10, buf;
    shl.b32 %r11, %r0, 4;
    add.u32 %r12, %r10, %r11;
    and.b32 %r13, %r0, 15;
    shl.b32 %r14, %r0, 2;
    and.b32 %r14, %r14, -16;
    cvt.u64.u32 %rd10, %r14;
    add.s64 %rd11, %rd1, %rd10;
    setp.eq.u32 %p1, %r13, 5;
    @%p1 bra $L_ignore;
    cp.async.cg.shared.global [%r12], [%rd11], 16, %r13;
    bra $L_done;
$L_ignore:
    cp.async.ca.shared.global.L2::128B [%r12], [%rd11], 16, %p1;
$L_done:
    cp.async.commit_group;
    cp.async.wait_all;
    bar.sync 0;
    ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r12];
    st.global.v4.u32 [%rd9], {%r20, %r21, %r22, %r23};"""
    got = _run(body, "", a, a, 4)
    src = a.view(np.uint8)
    for t in range(64):
        keep = 0 if t % 16 == 5 else t % 16
        start = (4 * t) & ~15
        expect = np.zeros(16, np.uint8)
        expect[:keep] = src[start:start + keep]
        np.testing.assert_array_equal(got[t].view(np.uint8), expect)


def test_cas_b16_and_bf16x2_atomic_add() -> None:
    body = """
    cvt.u16.u32 %h1, %r0;
    add.u16 %h2, %h1, 1;
    atom.global.cas.b16 %h3, [%rd2], %h1, %h2;
    cvt.u32.u16 %r3, %h3;
    mov.b32 %r4, 0x3F804000;
    atom.global.add.noftz.bf16x2 %r5, [%rd2+4], %r4;
    st.global.u32 [%rd9], %r3;
    st.global.u32 [%rd9+4], %r5;"""
    b = np.zeros(64, np.uint32)
    dev_a = np.zeros(64, np.uint32)
    got = _run(body, "", dev_a, b, 2)
    # thread t swaps t -> t + 1 when the counter equals t: all 64 succeed in thread order
    np.testing.assert_array_equal(got[:, 0], np.arange(64))
    # bf16x2 halves: low += 2.0 (0x4000), high += 1.0 (0x3F80), exact up to 64 steps; old values in thread order
    lo = np.arange(64) * 2.0
    hi = np.arange(64) * 1.0
    import ml_dtypes

    expect = lo.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32) | (
        hi.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32) << 16)
    np.testing.assert_array_equal(got[:, 1], expect)


def test_cluster_special_registers_describe_clusters_of_one_block() -> None:
    src = HEADER + """.visible .entry k(.param .u64 o)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [o];
    mov.u32 %r0, %ctaid.x;
    mul.wide.u32 %rd2, %r0, 16;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r1, %clusterid.x;
    mov.u32 %r2, %nclusterid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %cluster_nctaid.y;
    st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
    ret;
}
"""
    dev = Device(src)
    po = dev.space.alloc(3 * 16)
    dev.run("k", (3, 1, 1), (4, 1, 1), po)
    np.testing.assert_array_equal(dev.get(po, 12, np.uint32).reshape(3, 4), [[0, 3, 0, 1], [1, 3, 0, 1], [2, 3, 0, 1]])
