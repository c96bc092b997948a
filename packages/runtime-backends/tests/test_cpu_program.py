"""CPUProgram and CPUDevice: loading, launch shapes, launch validation, timing, lifetime, errors, device wiring."""

from __future__ import annotations

import copy
import gc
import shutil
import weakref

import numpy as np
import pytest

from runtime_backends.cpu.allocator import CPUAllocator, HostPointer
from runtime_backends.cpu.compiler import ClangCompiler, CompilerNotFoundError
from runtime_backends.cpu.device import CPUDevice
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer
from runtime_core.buffer import Buffer
from runtime_core.compiler import CompileError
from runtime_core.device import Device
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder


@pytest.fixture(scope="module", params=["clang", "gcc"])
def cc(request) -> ClangCompiler:
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    return ClangCompiler(None, cc=request.param)


def load(cc: ClangCompiler, kernel: Kernel) -> CPUProgram:
    return CPUProgram(None, kernel.name, cc.compile(CRenderer(memcheck=False).render(kernel)))


def thread_ids_kernel() -> Kernel:
    """out[t] = t + 1000 * v0, t the thread's linear id over (z, y, x) of groups then threads; sizes[0:6] = shape."""
    kb = KernelBuilder("thread_ids")
    out, sizes = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32)
    v = kb.var("offset")
    gid = [kb.special("group", d) for d in range(3)]
    gsz = [kb.special("gsize", d) for d in range(3)]
    lid = [kb.special("local", d) for d in range(3)]
    lsz = [kb.special("lsize", d) for d in range(3)]
    group = kb.add(kb.mul(kb.add(kb.mul(gid[2], gsz[1]), gid[1]), gsz[0]), gid[0])
    local = kb.add(kb.mul(kb.add(kb.mul(lid[2], lsz[1]), lid[1]), lsz[0]), lid[0])
    nlocal = kb.mul(kb.mul(lsz[0], lsz[1]), lsz[2])
    t = kb.add(kb.mul(group, nlocal), local)
    kb.store(out, t, kb.add(t, kb.mul(v, 1000)))
    for d, s in enumerate(gsz + lsz):
        kb.store(sizes, d, s)
    return kb.build()


@pytest.mark.parametrize("gs,ls", [((3, 2, 2), (2, 2, 1)), ((5,), (1,)), ((1, 1, 2), (1, 3, 2))])
def test_launch_shape_comes_from_the_call(cc, gs, ls):
    prg = load(cc, thread_ids_kernel())
    n = int(np.prod(gs) * np.prod(ls))
    out, sizes = np.full(n + 1, -1, np.int32), np.zeros(6, np.int32)
    prg(out.ctypes.data, sizes.ctypes.data, global_size=gs, local_size=ls, vals=(7,))
    assert list(out) == [t + 7000 for t in range(n)] + [-1]
    pad = (1,) * 3
    assert list(sizes) == list((tuple(gs) + pad)[:3] + (tuple(ls) + pad)[:3])


def test_wait_returns_elapsed_seconds(cc):
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.zeros(4, np.int32), np.zeros(6, np.int32)
    elapsed = prg(out.ctypes.data, sizes.ctypes.data, global_size=(4,), vals=(0,), wait=True)
    assert isinstance(elapsed, float) and 0 < elapsed < 10
    assert prg(out.ctypes.data, sizes.ctypes.data, global_size=(4,), vals=(0,)) is None


@pytest.mark.parametrize("args,kwargs,match", [
    ((1,), {"vals": (1,)}, "takes 2 buffers, got 1"),
    ((1, 2, 3), {"vals": (1,)}, "takes 2 buffers, got 3"),
    ((None, None), {"vals": ()}, "takes 1 int vals, got 0"),
    ((None, None), {"vals": (1, 2)}, "takes 1 int vals, got 2"),
    ((None, None), {"vals": (2**31,)}, "int32"),
    ((None, None), {"vals": (1,), "global_size": (0,)}, "global_size"),
    ((None, None), {"vals": (1,), "global_size": (2**31,)}, "exceeds"),
    ((None, 0), {"vals": (1,)}, "buffer 1 must be a host address"),
    ((None, "x"), {"vals": (1,)}, "buffer 1 must be a host address"),
])
def test_bad_launch_raises_before_running(cc, args, kwargs, match):
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.full(4, -1, np.int32), np.full(6, -1, np.int32)
    real = (out.ctypes.data, sizes.ctypes.data)
    bufs = tuple(real[i] if a is None else a for i, a in enumerate(args))
    with pytest.raises(ValueError, match=match):
        prg(*bufs, global_size=kwargs.get("global_size", (4,)), vals=kwargs["vals"])
    assert list(out) == [-1] * 4 and list(sizes) == [-1] * 6


def test_bad_launch_after_good_ones_is_still_refused(cc):
    """Equal arguments reuse a validated launch; anything else is validated again before it runs."""
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.full(4, -1, np.int32), np.full(6, -1, np.int32)
    bufs = (out.ctypes.data, sizes.ctypes.data)
    for _ in range(2):
        prg(*bufs, global_size=(4,), vals=(1,))
    out[:] = -1
    for args, kwargs in [(bufs, {"vals": (2**31,)}), (bufs, {"vals": (1, 2)}), (bufs[:1], {"vals": (1,)}),
                         ((bufs[0], "x"), {"vals": (1,)}), (bufs, {"vals": (1,), "global_size": (0,)}),
                         (bufs, {"vals": (1,), "global_size": [2**31]})]:
        with pytest.raises(ValueError):
            prg(*args, global_size=kwargs.get("global_size", (4,)), vals=kwargs["vals"])
    assert list(out) == [-1] * 4


def test_each_launch_runs_with_its_own_arguments(cc):
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.zeros(12, np.int32), np.zeros(6, np.int32)
    for v, gs in [(1, (4,)), (2, (4,)), (2, [3, 2]), (1, (4,))]:  # a list (unhashable) is validated every time
        out[:] = 0
        prg(out.ctypes.data, sizes.ctypes.data, global_size=gs, vals=(v,))
        n = int(np.prod(gs))
        assert list(out[:n]) == [t + 1000 * v for t in range(n)] and not out[n:].any()


def test_repeated_argument_objects_still_launch_what_they_hold_now(cc):
    """The same size tuple with other buffers, and a size list mutated between calls, launch their current values."""
    prg = load(cc, thread_ids_kernel())
    outs = [np.zeros(8, np.int32) for _ in range(2)]
    sizes = np.zeros(6, np.int32)
    gs, vals = (4,), (5,)
    for out in outs:
        prg(out.ctypes.data, sizes.ctypes.data, global_size=gs, vals=vals)
    assert all(list(out[:4]) == [t + 5000 for t in range(4)] for out in outs)
    shape = [2]
    for n in (2, 8):
        shape[0] = n
        prg(outs[0].ctypes.data, sizes.ctypes.data, global_size=shape, vals=vals)
        assert sizes[0] == n


def test_bind_validates_once_and_replays(cc):
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.zeros(8, np.int32), np.zeros(6, np.int32)
    replay = prg.bind(out.ctypes.data, sizes.ctypes.data, global_size=(2,), local_size=(4,), vals=(3,))
    assert replay() is None and list(out) == [t + 3000 for t in range(8)]
    out[:] = 0
    elapsed = replay(wait=True)
    assert isinstance(elapsed, float) and elapsed > 0 and list(out) == [t + 3000 for t in range(8)]
    with pytest.raises(ValueError, match="takes 1 int vals"):
        prg.bind(out.ctypes.data, sizes.ctypes.data)


def _uses(kernel: Kernel, cc: ClangCompiler) -> tuple[str, ...]:
    sig = load(cc, kernel).signature
    assert sig is not None
    return sig.launch


def test_only_the_launch_parameters_a_kernel_uses_are_passed(cc):
    assert _uses(KernelBuilder("nothing").build(), cc) == ()
    kb = KernelBuilder("reads_only", (4,))  # stores nothing: no effect, no loops, no parameters
    kb.load(kb.buffer(dtypes.float32), kb.global_id(0))
    assert _uses(kb.build(), cc) == ()
    kb = KernelBuilder("flat", (4,))
    out = kb.buffer(dtypes.float32)
    kb.store(out, kb.global_id(0), 1.0)
    assert _uses(kb.build(), cc) == ("lsz0", "lsz1", "lsz2", "rlo", "rhi", "xlo", "xhi")
    assert _uses(thread_ids_kernel(), cc) == ("gsz0", "gsz1", "gsz2", "lsz0", "lsz1", "lsz2", "rlo", "rhi", "xlo",
                                             "xhi")


def test_mapping_released_when_collected_or_closed(cc):
    prg = load(cc, thread_ids_kernel())
    image = weakref.ref(prg._image)
    del prg
    gc.collect()
    assert image() is None
    prg = load(cc, thread_ids_kernel())
    prg.close()
    assert prg._image.closed


def test_unknown_kernel_name_is_refused(cc):
    obj = cc.compile(CRenderer().render(thread_ids_kernel()))
    with pytest.raises(CompileError, match="does not define kernel 'other'"):
        CPUProgram(None, "other", obj)


def test_c_that_does_not_compile_raises_compile_error_with_stderr(cc):
    src = CRenderer().render(thread_ids_kernel()).replace("void thread_ids(", "void thread_ids(undeclared_t x, ")
    with pytest.raises(CompileError) as info:
        cc.compile(src)
    assert "undeclared_t" in info.value.stderr and "error" in info.value.stderr
    assert info.value.source == src


# ---- device -----------------------------------------------------------------------------------------------------

def test_device_wiring():
    dev = Device["CPU"]
    assert isinstance(dev, CPUDevice) and dev.device == "CPU" and CPUDevice.DEFAULT_PRIORITY == 10
    assert isinstance(dev.allocator, CPUAllocator) and dev.allocator.dev is dev
    assert isinstance(dev.renderer, CRenderer) and dev.renderer.device == "CPU" and not dev.renderer.has_shared
    assert isinstance(dev.compiler, ClangCompiler) and dev.compiler.cachekey == "cpu-c"
    assert dev.runtime.func is CPUProgram and dev.runtime.args == (dev,)  # type: ignore[attr-defined]


def test_device_runs_a_kernel_on_buffers_through_the_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    dev = Device["CPU"]
    kb = KernelBuilder("scale_add", (8,))
    a, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    kb.store(out, i, kb.add(kb.mul(kb.load(a, i), 3.0), 0.5))
    k = kb.build()
    src = Buffer("CPU", 8, dtypes.float32).allocate()
    dst = Buffer("CPU", 8, dtypes.float32).allocate()
    src.copyin(np.arange(8, dtype=np.float32))
    for _ in range(2):  # second time from the cache
        prg = dev.runtime(k.name, dev.compiler.compile_cached(dev.renderer.render(k)))
        prg(src.opaque, dst.opaque, global_size=k.global_size, local_size=k.local_size)
        assert list(dst.numpy()) == [v * 3 + 0.5 for v in range(8)]
    assert (tmp_path / "cache.db").is_file()


def test_device_name_other_than_cpu_is_refused():
    with pytest.raises(ValueError, match="single device named 'CPU'"):
        CPUDevice("CPU:1")


def test_missing_compiler_fails_to_open_with_the_reason(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc-for-tests")
    with pytest.raises(CompilerNotFoundError, match="no-such-cc-for-tests.*apt-get install clang"):
        CPUDevice()


def test_buffer_handles_are_addresses_that_know_their_size():
    buf = Buffer("CPU", 16, dtypes.float32).allocate()
    view = buf.view(4, dtypes.float32, 8)
    ptr = buf.opaque
    assert isinstance(ptr, HostPointer) and isinstance(ptr, int) and ptr.nbytes == 64
    assert int(view.opaque) == int(ptr) + 8 and view.opaque.nbytes == 16
    assert buf.view(2, dtypes.float32, 0).opaque.nbytes == 8  # a smaller view at offset 0 has its own size
    again = copy.copy(ptr)
    assert (int(again), again.nbytes) == (int(ptr), 64) and bytes(again.memory) == bytes(ptr.memory)


@pytest.mark.parametrize("bad", [True, 4.0])
def test_a_value_equal_to_a_validated_one_is_still_refused(bad):
    from runtime_core import Buffer, Device, dtypes
    from runtime_core.ir import KernelBuilder

    kb = KernelBuilder("store_val", (4,))
    out, n = kb.buffer(dtypes.int32), kb.var("n")
    i = kb.global_id(0)
    kb.store(out, i, kb.add(n, 0))
    k = kb.build()
    dev = Device["CPU"]
    prg = dev.runtime(k.name, dev.compiler.compile_cached(dev.renderer.render(k)))
    buf = Buffer("CPU", 4, dtypes.int32).allocate()
    prg(buf.opaque, global_size=(4,), vals=(int(bad),))
    with pytest.raises(ValueError, match="vals must be int32"):
        prg(buf.opaque, global_size=(4,), vals=(bad,))


@pytest.mark.parametrize(("good", "bad"), [({"global_size": (4,)}, {"global_size": (4.0,)}),
                                           ({"global_size": (1,)}, {"global_size": (True,)}),
                                           ({"local_size": (1, 1, 1)}, {"local_size": (1.0, 1, 1)})])
def test_a_size_equal_to_a_validated_one_is_still_refused(cc, good, bad):
    prg = load(cc, thread_ids_kernel())
    out, sizes = np.full(4, -1, np.int32), np.zeros(6, np.int32)
    for _ in range(2):  # validated, then replayed from the memo
        prg(out.ctypes.data, sizes.ctypes.data, vals=(0,), **good)
    out[:] = -1
    with pytest.raises(ValueError, match="_size must be 1-3 positive ints"):
        prg(out.ctypes.data, sizes.ctypes.data, vals=(0,), **bad)
    assert list(out) == [-1] * 4
