"""CUDA benchmarks: launch latency, host <-> device copies from pageable and pinned memory, device-to-device copies and
vector-add kernel throughput, on a real GPU or on the emulated one (``MOCKGPU=1``).

Every group holds an entry (the runtime: ``CUDAProgram``, ``Buffer.copyin``/``copyout``/``copy_from``), a limit (the same
operation as bare driver calls through the device's own driver module: what the runtime costs on top of the driver)
and, on a real GPU with CuPy installed, CuPy's figure for the same operation as a peer. The report has no role for
peers yet, so a peer is recorded as a limit entry whose ``reference`` names CuPy (``peer: "cupy"``): shown, never
failing the run. Each timed call ends with the stream synchronized, so it measures finished work. On the emulated
GPU the vector add also joins the ``emulator-vector_add`` group of ``test_bench_mockgpu``, beside numba's simulator
and mock_gpu driven directly (threads/s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from harness.benchmarks.kernels import GROUP, add_kernel, empty_kernel
from harness.benchmarks.measure import MakeBuffer, check_equal, launcher, load, probe, random_bytes, record_rate, record_time, run
from runtime_backends.cuda.device import CUDADevice
from runtime_backends.cuda.program import CUDAProgram
from runtime_core.buffer import Buffer
from runtime_core.buffer_spec import BufferSpec
from runtime_core.config import MOCKGPU
from runtime_core.device import Device
from runtime_core.dtype import dtypes

pytestmark = pytest.mark.backends("CUDA")
MiB = 1 << 20
SIZES = [pytest.param(MiB, id="1MiB"), pytest.param(64 * MiB, id="64MiB")]
VADD_N = 1 << 20
EMULATED = bool(MOCKGPU.get())


def _check(result: tuple, call: str) -> Any:
    err, *out = result
    if int(err) != 0:
        raise RuntimeError(f"{call} failed: {err!r}")
    return out[0] if out else None


def _cupy(device: str) -> Any:
    """CuPy, working on the same GPU as ``device``; skips on the emulated GPU or without CuPy."""
    if EMULATED:
        pytest.skip("CuPy needs a real GPU (MOCKGPU=1 emulates one)")
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    cp.cuda.Device(_cuda(device).ordinal).use()
    return cp


def _peer(benchmark: Any, device: str, per_call: dict[str, float] | None, what: str, **info: Any) -> None:
    reference = f"CuPy {what}"
    if per_call is None:
        record_time(benchmark, device, "us/call", limit=True, reference=reference, peer="cupy", **info)
    else:
        record_rate(benchmark, device, per_call, limit=True, reference=reference, peer="cupy", **info)


def _cuda(device: str) -> CUDADevice:
    dev = Device[device]
    if not isinstance(dev, CUDADevice):
        pytest.skip(f"{device} is not a CUDA device")
    return dev


def _synced(device: str, fn: Callable[[], Any]) -> Callable[[], None]:
    dev = Device[device]

    def call() -> None:
        fn()
        dev.synchronize()
    return call


@pytest.mark.benchmark(group="cuda-launch-empty")
def test_cuda_launch_empty(benchmark: Any, device: str) -> None:
    kernel = empty_kernel()
    call = _synced(device, launcher(load(device, kernel), kernel, [], wait=False))
    _, t = probe(call)
    run(benchmark, call, t)
    record_time(benchmark, device, "us/call")


@pytest.mark.benchmark(group="cuda-launch-empty")
def test_cuda_launch_limit_driver(benchmark: Any, device: str) -> None:
    dev = _cuda(device)
    prg = load(device, empty_kernel())
    if not isinstance(prg, CUDAProgram):
        pytest.fail(f"{device} loaded a {type(prg).__name__}, not a CUDAProgram")
    cu, stream = dev.activate(), dev.stream

    def call() -> None:
        _check(cu.cuLaunchKernel(prg.function, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0), "cuLaunchKernel")
        _check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    _, t = probe(call)
    run(benchmark, call, t)
    record_time(benchmark, device, "us/call", limit=True, reference="cuLaunchKernel + cuStreamSynchronize")


@pytest.mark.benchmark(group="cuda-launch-empty")
def test_cuda_launch_peer_cupy(benchmark: Any, device: str) -> None:
    cp = _cupy(device)
    kernel = cp.RawKernel(r'extern "C" __global__ void bench_empty() {}', "bench_empty")
    stream = cp.cuda.get_current_stream()

    def call() -> None:
        kernel((1,), (1,), ())
        stream.synchronize()
    _, t = probe(call)
    run(benchmark, call, t)
    _peer(benchmark, device, None, "RawKernel launch + stream synchronize")


@pytest.fixture
def pinned_buffers(device: str, device_buffers: MakeBuffer) -> Iterator[Callable[[int], Buffer]]:
    """``make(nbytes)``: a pinned host buffer (``BufferSpec(host=True)``) of ``device``, freed after the test (before
    ``device_buffers`` empties the device's cache)."""
    made: list[Buffer] = []

    def make(nbytes: int) -> Buffer:
        made.append(Buffer(device, nbytes, dtypes.uint8, BufferSpec(host=True)).allocate())
        return made[-1]
    yield make
    for buf in made:
        buf.deallocate()


def _copy_case(device: str, make: MakeBuffer, pinned_of: Callable[[int], Buffer], nbytes: int, kind: str,
               rng: np.random.Generator) -> Callable[[], Any]:
    """The runtime's copy of ``kind`` (htod/dtoh x pageable/pinned, or d2d) of ``nbytes``, checked once."""
    data = random_bytes(rng, nbytes)
    dev_buf = make(data)
    host = np.ones(nbytes, np.uint8)
    fn: Callable[[], Any]
    if kind.endswith("pinned"):
        pinned = pinned_of(nbytes)
        pinned.copyin(data)
        fn = (lambda: dev_buf.copy_from(pinned)) if kind.startswith("htod") else (lambda: pinned.copy_from(dev_buf))
        check = pinned
    elif kind == "d2d":
        other = make(nbytes, dtypes.uint8)
        fn, check = (lambda: other.copy_from(dev_buf)), other
    else:
        fn = (lambda: dev_buf.copyin(data)) if kind == "htod-pageable" else (lambda: dev_buf.copyout(host))
        check = dev_buf
    _synced(device, fn)()
    got = host if kind == "dtoh-pageable" else check.numpy()
    check_equal(got, data, f"{device}: {kind} copy of {nbytes} bytes changed them")
    return _synced(device, fn)


def _driver_copy(device: str, make: MakeBuffer, pinned_of: Callable[[int], Buffer], nbytes: int,
                 kind: str) -> Callable[[], None]:
    """The same copy as bare driver calls: cuMemcpyHtoD/DtoH from/to pageable numpy memory, the *Async forms from/to
    cuMemHostAlloc memory and for device-to-device, each followed by cuStreamSynchronize."""
    dev = _cuda(device)
    cu, stream = dev.activate(), dev.stream
    src, dst = make(nbytes, dtypes.uint8), make(nbytes, dtypes.uint8)
    if kind == "htod-pageable":
        host = np.ones(nbytes, np.uint8)
        return lambda: _check(cu.cuMemcpyHtoD(dst.opaque, host, nbytes), "cuMemcpyHtoD")
    if kind == "dtoh-pageable":
        host = np.ones(nbytes, np.uint8)
        return lambda: _check(cu.cuMemcpyDtoH(host, src.opaque, nbytes), "cuMemcpyDtoH")
    if kind == "d2d":
        copy = lambda: cu.cuMemcpyDtoDAsync(dst.opaque, src.opaque, nbytes, stream)  # noqa: E731
    else:
        pinned = pinned_of(nbytes)
        copy = (lambda: cu.cuMemcpyHtoDAsync(dst.opaque, pinned.opaque, nbytes, stream)) if kind.startswith("htod") \
            else (lambda: cu.cuMemcpyDtoHAsync(pinned.opaque, src.opaque, nbytes, stream))

    def call() -> None:
        _check(copy(), "cuMemcpy*Async")
        _check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    return call


KINDS = ["htod-pageable", "dtoh-pageable", "htod-pinned", "dtoh-pinned", "d2d"]


def _group(kind: str, nbytes: int) -> str:
    return f"cuda-copy-{kind}-{nbytes // MiB}MiB"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nbytes", SIZES)
def test_cuda_copy(benchmark: Any, device: str, device_buffers: MakeBuffer, pinned_buffers: Callable[[int], Buffer],
                   rng: np.random.Generator, nbytes: int, kind: str) -> None:
    benchmark.group = _group(kind, nbytes)
    call = _copy_case(device, device_buffers, pinned_buffers, nbytes, kind, rng)
    _, t = probe(call)
    run(benchmark, call, t)
    record_rate(benchmark, device, {"GB/s": nbytes / 1e9}, size_bytes=nbytes, direction=kind)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nbytes", SIZES)
def test_cuda_copy_limit_driver(benchmark: Any, device: str, device_buffers: MakeBuffer,
                                pinned_buffers: Callable[[int], Buffer], nbytes: int, kind: str) -> None:
    benchmark.group = _group(kind, nbytes)
    call = _driver_copy(device, device_buffers, pinned_buffers, nbytes, kind)
    _, t = probe(call)
    run(benchmark, call, t)
    record_rate(benchmark, device, {"GB/s": nbytes / 1e9}, limit=True, reference=f"driver {kind} copy",
                size_bytes=nbytes, direction=kind)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nbytes", SIZES)
def test_cuda_copy_peer_cupy(benchmark: Any, device: str, nbytes: int, kind: str) -> None:
    cp = _cupy(device)
    benchmark.group = _group(kind, nbytes)
    dev_arr, other = cp.zeros(nbytes, cp.uint8), cp.zeros(nbytes, cp.uint8)
    host = (cp.cuda.alloc_pinned_memory(nbytes) if kind.endswith("pinned") else None)
    host_arr = np.frombuffer(host, np.uint8, nbytes) if host is not None else np.ones(nbytes, np.uint8)
    ops = {"htod": lambda: dev_arr.set(host_arr), "dtoh": lambda: dev_arr.get(out=host_arr),
           "d2d": lambda: cp.copyto(other, dev_arr)}
    op = ops[kind.split("-")[0]]
    stream = cp.cuda.get_current_stream()

    def call() -> None:
        op()
        stream.synchronize()
    _, t = probe(call)
    run(benchmark, call, t)
    _peer(benchmark, device, {"GB/s": nbytes / 1e9}, f"{kind} copy", size_bytes=nbytes, direction=kind)


def _vadd_group() -> str:
    return "emulator-vector_add" if EMULATED else "cuda-kernel-vector_add"


def _threads(benchmark: Any, n: int) -> None:
    if not benchmark.disabled:
        rate = n / benchmark.stats.stats.median
        benchmark.extra_info.update({"kernel": "vector_add", "threads": n, "block": GROUP, "threads_per_s": rate})


@pytest.mark.bench_threshold(0.5)  # the emulator has no practical limit to normalize by (see test_bench_mockgpu)
def test_cuda_vector_add_throughput(benchmark: Any, device: str, device_buffers: MakeBuffer,
                                    rng: np.random.Generator) -> None:
    benchmark.group = _vadd_group()
    kernel = add_kernel(VADD_N)
    a, b = rng.standard_normal(VADD_N).astype(np.float32), rng.standard_normal(VADD_N).astype(np.float32)
    bufs = [device_buffers(a), device_buffers(b), device_buffers(VADD_N, dtypes.float32)]
    call = _synced(device, launcher(load(device, kernel), kernel, bufs, wait=False))
    _, t = probe(call)
    check_equal(bufs[2].numpy(), a + b)
    run(benchmark, call, t)
    record_rate(benchmark, device, {"threads/s": VADD_N},
                emulator="runtime_backends.cuda on mock_gpu" if EMULATED else "none: a real GPU")
    _threads(benchmark, VADD_N)


@pytest.mark.bench_threshold(0.5)
def test_cuda_vector_add_peer_cupy(benchmark: Any, device: str) -> None:
    cp = _cupy(device)
    benchmark.group = _vadd_group()
    a, b, c = (cp.ones(VADD_N, cp.float32) for _ in range(3))
    stream = cp.cuda.get_current_stream()

    def call() -> None:
        cp.add(a, b, out=c)
        stream.synchronize()
    _, t = probe(call)
    run(benchmark, call, t)
    _peer(benchmark, device, {"threads/s": VADD_N}, "cupy.add of float32 vectors")
    _threads(benchmark, VADD_N)
