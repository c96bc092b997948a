"""CUDAAllocator on the emulated GPU, whose streams run deferred (work runs when something waits for it, pinned host
memory is read when a copy runs): staging, pinned buffers, views, out of memory, peer and staged transfers."""

from __future__ import annotations

import numpy as np
import pytest
from _cuda_util import program, scale_kernel

from runtime_backends.cuda.allocator import HostPointer
from runtime_backends.cuda.sink import StagingSink
from runtime_backends.cuda.staging import StagingPool
from runtime_backends.disk.files import DiskFile
from runtime_core.buffer import Buffer
from runtime_core.buffer_spec import BufferSpec
from runtime_core.dtype import dtypes


def _small_staging(dev, monkeypatch: pytest.MonkeyPatch, chunks: int = 1, chunk_bytes: int = 4096) -> StagingPool:
    dev.allocator.staging.close()
    pool = StagingPool(dev, chunk_bytes, chunks)
    monkeypatch.setattr(dev.allocator, "staging", pool)
    return pool


def test_premature_staging_reuse_is_caught_by_the_deferred_streams(cuda, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool that hands a chunk out again before its copy ran (the classic staging bug) delivers the second payload
    to the first buffer; the real pool, which waits for the chunk's event, delivers both."""
    pool = _small_staging(cuda, monkeypatch)
    first, second = (Buffer("CUDA", 1024, dtypes.uint8).allocate() for _ in range(2))
    cuda.synchronize()
    monkeypatch.setattr(pool, "_finished", lambda chunk: True)  # never wait for a chunk's copy
    first.copyin(np.full(1024, 1, np.uint8))
    second.copyin(np.full(1024, 2, np.uint8))
    np.testing.assert_array_equal(first.numpy(), np.full(1024, 2, np.uint8))  # the bug is visible
    monkeypatch.undo()
    pool = _small_staging(cuda, monkeypatch)
    first.copyin(np.full(1024, 1, np.uint8))
    second.copyin(np.full(1024, 2, np.uint8))
    np.testing.assert_array_equal(first.numpy(), np.full(1024, 1, np.uint8))
    np.testing.assert_array_equal(second.numpy(), np.full(1024, 2, np.uint8))


def test_staging_stays_bounded_under_thousands_of_copies(cuda, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _small_staging(cuda, monkeypatch, chunks=3)
    bufs = [Buffer("CUDA", 64, dtypes.int32).allocate() for _ in range(8)]
    for k in range(2000):
        bufs[k % 8].copyin(np.full(64, k, np.int32))
        assert pool.count <= 3
    for j, buf in enumerate(bufs):
        np.testing.assert_array_equal(buf.numpy(), np.full(64, 2000 - 8 + j, np.int32))


def test_copyin_larger_than_the_pool_is_chunked_and_correct(cuda, monkeypatch: pytest.MonkeyPatch,
                                                            rng: np.random.Generator) -> None:
    pool = _small_staging(cuda, monkeypatch, chunks=2, chunk_bytes=1000)
    data = rng.integers(0, 256, 10_007, dtype=np.uint8)
    buf = Buffer.from_numpy("CUDA", data)
    assert pool.count == 2
    np.testing.assert_array_equal(buf.numpy(), data)


def test_copyout_waits_for_its_own_device_only(open_cuda) -> None:
    a, b = open_cuda("CUDA", devices=2), open_cuda("CUDA:1")
    kernel = scale_kernel()
    src_b = Buffer.from_numpy("CUDA:1", np.ones(128, np.float32))
    out_b = Buffer("CUDA:1", 128, dtypes.float32).allocate()
    b.synchronize()
    on_b, on_a = program(b, kernel), program(a, kernel)  # kept alive: unloading a module waits for its kernels
    on_b(src_b.opaque, out_b.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(128, 2))
    src_a = Buffer.from_numpy("CUDA", np.arange(128, dtype=np.float32))
    out_a = Buffer("CUDA", 128, dtypes.float32).allocate()
    on_a(src_a.opaque, out_a.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(100, 3))
    result = out_a.numpy()  # waits for CUDA's kernel ...
    np.testing.assert_array_equal(result[:100], np.arange(100, dtype=np.float32) * 4)
    (err,) = b.cu.cuStreamQuery(b.stream)  # ... and not for CUDA:1's, which has not run yet
    assert err.name == "CUDA_ERROR_NOT_READY"
    np.testing.assert_array_equal(out_b.numpy(), 2 + np.arange(128, dtype=np.float32))


def test_pinned_host_buffers_views_and_transfers(cuda) -> None:
    pinned = Buffer("CUDA", 256, dtypes.int32, BufferSpec(host=True)).allocate()
    assert isinstance(pinned.opaque, HostPointer)
    pinned.copyin(np.arange(256, dtype=np.int32))
    np.testing.assert_array_equal(pinned.view(16, dtypes.int32, offset=64).numpy(), np.arange(16, 32))
    device = Buffer("CUDA", 256, dtypes.int32).allocate()
    device.copy_from(pinned)
    np.testing.assert_array_equal(device.numpy(), np.arange(256))
    device.copyin(np.arange(256, dtype=np.int32) * -1)
    pinned.copy_from(device)
    np.testing.assert_array_equal(pinned.numpy(), np.arange(256) * -1)


def test_kernels_refuse_pinned_host_memory(cuda) -> None:
    pinned = Buffer("CUDA", 128, dtypes.float32, BufferSpec(host=True)).allocate()
    out = Buffer.from_numpy("CUDA", np.full(128, 5, np.float32))
    with pytest.raises(TypeError, match=r"buffer 0 is pinned host memory \(BufferSpec\(host=True\)\)"):
        program(cuda, scale_kernel())(pinned.opaque, out.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1),
                                      vals=(128, 1))
    np.testing.assert_array_equal(out.numpy(), np.full(128, 5, np.float32))


def test_out_of_memory_empties_the_cache_and_retries(open_cuda) -> None:
    dev = open_cuda(memory="1MiB")
    allocator = dev.allocator
    held = allocator.alloc(600 << 10)
    allocator.free(held, 600 << 10)
    assert allocator.cached_bytes == 600 << 10
    bigger = allocator.alloc(700 << 10)  # fails while the 600 KiB are cached, succeeds after emptying the cache
    assert allocator.cached_bytes == 0
    allocator.free(bigger, 700 << 10)


def test_external_device_pointers_are_wrapped_not_freed(cuda) -> None:
    owned = cuda.allocator.alloc(512, BufferSpec(nolru=True))
    wrapped = Buffer("CUDA", 128, dtypes.float32, BufferSpec(external_ptr=owned)).allocate()
    assert wrapped.opaque == owned
    wrapped.copyin(np.arange(128, dtype=np.float32))
    wrapped.deallocate()
    again = Buffer("CUDA", 128, dtypes.float32, BufferSpec(external_ptr=owned)).allocate()
    np.testing.assert_array_equal(again.numpy(), np.arange(128, dtype=np.float32))  # still alive
    cuda.allocator.free(owned, 512, BufferSpec(nolru=True))


@pytest.mark.parametrize("peer", [True, False], ids=["peer", "staged-through-host"])
def test_transfers_between_devices(open_cuda, peer: bool, rng: np.random.Generator,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = open_cuda("CUDA", devices=2), open_cuda("CUDA:1")
    if not peer:  # as between GPUs the driver will not connect: copies go through pinned host chunks
        monkeypatch.setattr(a, "_peers", {b.ordinal: False})
        monkeypatch.setattr(b, "_peers", {a.ordinal: False})
        _small_staging(b, monkeypatch, chunks=2, chunk_bytes=4096)
    data = rng.standard_normal(10_000).astype(np.float32)
    src = Buffer.from_numpy("CUDA", data)
    dst = Buffer("CUDA:1", 10_000, dtypes.float32).allocate()
    dst.copy_from(src)
    src.copyin(np.zeros(10_000, np.float32))  # queued after the copy on CUDA: must not reach it
    np.testing.assert_array_equal(dst.numpy(), data)
    back = Buffer("CUDA", 10_000, dtypes.float32).allocate()
    back.copy_from(dst)
    np.testing.assert_array_equal(back.numpy(), data)


@pytest.mark.parametrize("cached", [False, True], ids=["read-into-pinned-chunks", "from-the-page-cache"])
def test_a_file_streams_into_device_memory(cuda, tmp_path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch,
                                           cached: bool) -> None:
    """DISK -> CUDA: reads land in the device's pinned chunks (cold ones and page-cache hits alike: DISK copies never
    read the file mapping, which a shrinking file would turn into SIGBUS) and are copied out of them asynchronously
    while the next ones are read. The pool gets every chunk back."""
    nbytes = (5 << 20) + 4093  # beyond DISK's streaming threshold, several chunks, not a page multiple
    path = tmp_path / "weights.bin"
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    if not cached:
        monkeypatch.setattr(DiskFile, "resident", lambda self, start, end: np.zeros(-(-end // 4096) - start // 4096, bool))
    pool = _small_staging(cuda, monkeypatch, chunks=3, chunk_bytes=1 << 20)
    from_chunks: list[bool] = []
    deliver = StagingSink.deliver

    def counted(sink: StagingSink, piece: memoryview, offset: int, slot: int | None) -> None:
        from_chunks.append(slot is not None and slot < len(sink.chunks))
        deliver(sink, piece, offset, slot)
    monkeypatch.setattr(StagingSink, "deliver", counted)
    src = Buffer(f"DISK:{path}", nbytes, dtypes.uint8).allocate()
    dst = Buffer("CUDA", nbytes, dtypes.uint8).allocate()
    dst.copy_from(src)
    np.testing.assert_array_equal(dst.numpy(), data)
    assert pool.out == 0 and pool.count <= 3
    assert from_chunks and all(from_chunks)
