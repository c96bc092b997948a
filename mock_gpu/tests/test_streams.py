"""Stream-ordered deferred execution (MOCKGPU_DEFERRED=1, the default): work runs when something waits for it,
page-locked host memory is read and written when the copy runs, pageable memory is staged at enqueue, and the
legacy default stream orders itself with blocking streams (CUDA driver API 2 and 3, "API synchronization behavior",
"Stream synchronization behavior"). Each test states what a GPU would do and checks that the mock does the same."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from _driver_util import PTR, U32, check, fill, from_device, kernels, launch, pinned, report, to_device

import mock_gpu
from mock_gpu import driver as cu

R = cu.CUresult
NON_BLOCKING = cu.CUstream_flags.CU_STREAM_NON_BLOCKING


def test_premature_reuse_of_a_pinned_staging_buffer_overwrites_the_pending_copy(ctx: Any) -> None:
    """The bug a backend makes when it recycles a staging buffer before its copy ran: on a GPU the DMA reads the
    buffer when the copy executes, so the first copy delivers the second payload."""
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    staging = pinned(64)
    first, second = to_device(np.zeros(64, np.uint8)), to_device(np.zeros(64, np.uint8))
    staging[:] = 1
    check(cu.cuMemcpyHtoDAsync(first, staging, 64, stream))
    staging[:] = 2  # reused without waiting for the first copy
    check(cu.cuMemcpyHtoDAsync(second, staging, 64, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(first, 64, np.uint8), 2)
    np.testing.assert_array_equal(from_device(second, 64, np.uint8), 2)


def test_pinned_staging_reuse_after_an_event_synchronize_is_correct(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    done = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    staging = pinned(64)
    first, second = to_device(np.zeros(64, np.uint8)), to_device(np.zeros(64, np.uint8))
    staging[:] = 1
    check(cu.cuMemcpyHtoDAsync(first, staging, 64, stream))
    check(cu.cuEventRecord(done, stream))
    check(cu.cuEventSynchronize(done))  # the copy has read the buffer: it may be reused
    staging[:] = 2
    check(cu.cuMemcpyHtoDAsync(second, staging, 64, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(first, 64, np.uint8), 1)
    np.testing.assert_array_equal(from_device(second, 64, np.uint8), 2)


def test_pageable_host_memory_is_read_when_the_copy_is_enqueued(ctx: Any) -> None:
    """The driver stages pageable memory at the call, so overwriting it afterwards is safe (unlike pinned memory)."""
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    source = np.full(64, 1, np.uint8)
    dst = to_device(np.zeros(64, np.uint8))
    check(cu.cuMemcpyHtoDAsync(dst, source, 64, stream))
    source[:] = 2
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(dst, 64, np.uint8), 1)


def test_results_read_before_the_copy_to_pinned_memory_ran_are_stale(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    src = to_device(np.arange(64, dtype=np.uint8))
    result = pinned(64)
    check(cu.cuMemcpyDtoHAsync(result, src, 64, stream))
    np.testing.assert_array_equal(result, 0)  # read too early: nothing has been copied yet
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(result, np.arange(64))


def test_copy_to_pageable_memory_is_complete_when_the_call_returns(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    src = to_device(np.arange(64, dtype=np.uint8))
    result = np.zeros(64, np.uint8)
    check(cu.cuMemcpyDtoHAsync(result, src, 64, stream))
    np.testing.assert_array_equal(result, np.arange(64))


def test_a_non_blocking_stream_is_not_ordered_with_the_legacy_stream(ctx: Any) -> None:
    """cuMemcpyDtoH runs on the legacy stream, which waits for blocking streams only: the kernel on a
    CU_STREAM_NON_BLOCKING stream has not run when the copy reads its output."""
    fn = kernels()["fill"]
    quiet, blocking = check(cu.cuStreamCreate(NON_BLOCKING)), check(cu.cuStreamCreate(0))
    a, b = to_device(np.zeros(256, np.uint32)), to_device(np.zeros(256, np.uint32))
    fill(fn, a, 7, 256, quiet)
    fill(fn, b, 9, 256, blocking)
    np.testing.assert_array_equal(from_device(a, 256, np.uint32), 0)
    np.testing.assert_array_equal(from_device(b, 256, np.uint32), 9)
    check(cu.cuStreamSynchronize(quiet))
    np.testing.assert_array_equal(from_device(a, 256, np.uint32), 7)


def test_work_on_a_blocking_stream_waits_for_earlier_legacy_stream_work(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(0))
    src, dst = to_device(np.zeros(64, np.uint8)), to_device(np.zeros(64, np.uint8))
    check(cu.cuMemsetD8(src, 5, 64))  # legacy stream, left pending (no host synchronization for device memsets)
    check(cu.cuMemcpyDtoDAsync(dst, src, 64, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(dst, 64, np.uint8), 5)


@pytest.mark.parametrize("wait", [True, False])
def test_stream_wait_event_orders_work_across_streams(ctx: Any, wait: bool) -> None:
    fn = kernels()["fill"]
    producer, consumer = check(cu.cuStreamCreate(NON_BLOCKING)), check(cu.cuStreamCreate(NON_BLOCKING))
    made = check(cu.cuEventCreate(0))
    x, y = to_device(np.zeros(128, np.uint32)), to_device(np.zeros(128, np.uint32))
    fill(fn, x, 3, 128, producer)
    check(cu.cuEventRecord(made, producer))
    if wait:
        check(cu.cuStreamWaitEvent(consumer, made, 0))
    check(cu.cuMemcpyDtoDAsync(y, x, 128 * 4, consumer))
    check(cu.cuStreamSynchronize(consumer))  # only the consumer: the producer's kernel runs if it is waited for
    np.testing.assert_array_equal(from_device(y, 128, np.uint32), 3 if wait else 0)


def test_queries_run_pending_work_and_report_not_ready_once(ctx: Any) -> None:
    fn = kernels()["fill"]
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    event = check(cu.cuEventCreate(0))
    out = to_device(np.zeros(128, np.uint32))
    assert cu.cuStreamQuery(stream) == (R.CUDA_SUCCESS,)
    fill(fn, out, 4, 128, stream)
    assert cu.cuStreamQuery(stream) == (R.CUDA_ERROR_NOT_READY,)
    assert cu.cuStreamQuery(stream) == (R.CUDA_SUCCESS,)
    np.testing.assert_array_equal(from_device(out, 128, np.uint32), 4)
    fill(fn, out, 5, 128, stream)
    check(cu.cuEventRecord(event, stream))
    assert cu.cuEventQuery(event) == (R.CUDA_ERROR_NOT_READY,)
    assert cu.cuEventQuery(event) == (R.CUDA_SUCCESS,)
    np.testing.assert_array_equal(from_device(out, 128, np.uint32), 5)


def test_context_synchronize_runs_every_stream_including_destroyed_ones(ctx: Any) -> None:
    fn = kernels()["fill"]
    outs = [to_device(np.zeros(128, np.uint32)) for _ in range(3)]
    streams = [check(cu.cuStreamCreate(NON_BLOCKING)) for _ in outs]
    for k, (out, stream) in enumerate(zip(outs, streams, strict=True)):
        fill(fn, out, k + 1, 128, stream)
    check(cu.cuStreamDestroy(streams[2]))  # its pending work still runs (the driver releases it afterwards)
    check(cu.cuCtxSynchronize())
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(from_device(out, 128, np.uint32), k + 1)


def test_freeing_memory_runs_the_pending_work_that_uses_it(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    src = to_device(np.arange(32, dtype=np.uint8))
    result = pinned(32)
    check(cu.cuMemcpyDtoHAsync(result, src, 32, stream))
    check(cu.cuMemFree(src))
    np.testing.assert_array_equal(result, np.arange(32))


def test_event_elapsed_time_spans_the_emulated_work_between_records(ctx: Any) -> None:
    fn = kernels()["fill"]
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    start, end = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
    out = to_device(np.zeros(1 << 16, np.uint32))
    check(cu.cuEventRecord(start, stream))
    for value in range(20):
        fill(fn, out, value, 1 << 16, stream)
    check(cu.cuEventRecord(end, stream))
    assert cu.cuEventElapsedTime(start, end) == (R.CUDA_ERROR_NOT_READY, None)
    check(cu.cuEventSynchronize(end))
    assert check(cu.cuEventElapsedTime(start, end)) > 0.0
    assert check(cu.cuEventElapsedTime(end, start)) < 0.0


def test_a_kernel_fault_surfaces_at_the_synchronize_with_its_report(make_system: Any,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The launch succeeds (the kernel has not run); the call that waits returns the sticky error, and the report
    naming kernel, block, thread and address is in the mock_gpu log and last_error_report(); cuGetErrorString
    gives the driver's own text."""
    make_system(exact_bounds="1")
    fn = kernels()["fill"]
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    out = check(cu.cuMemAlloc(100 * 4))
    fill(fn, out, 1, 101, stream)  # thread 100 of block 0 stores one u32 past the end
    with caplog.at_level(logging.ERROR, logger="mock_gpu"):
        assert cu.cuStreamSynchronize(stream) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert cu.cuGetErrorString(R.CUDA_ERROR_ILLEGAL_ADDRESS) == (R.CUDA_SUCCESS,
                                                                 b"an illegal memory access was encountered")
    text = mock_gpu.last_error_report() or ""
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for needle in ("CUDA_ERROR_ILLEGAL_ADDRESS", "'fill'", "block (0, 0, 0)", "thread (100, 0, 0)",
                   f"{int(out) + 400:#x}"):
        assert needle in text
    for needle in ("'fill'", "thread (100, 0, 0)", f"{int(out) + 400:#x}"):
        assert needle in logged
    assert cu.cuStreamQuery(stream) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)  # sticky
    assert cu.cuEventCreate(0) == (R.CUDA_ERROR_ILLEGAL_ADDRESS, None)


def test_immediate_mode_runs_each_work_when_it_is_enqueued(make_system: Any) -> None:
    make_system(deferred="0", exact_bounds="1")
    fn = kernels()["fill"]
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    staging = pinned(64)
    first = to_device(np.zeros(64, np.uint8))
    staging[:] = 1
    check(cu.cuMemcpyHtoDAsync(first, staging, 64, stream))
    staging[:] = 2
    np.testing.assert_array_equal(from_device(first, 64, np.uint8), 1)
    out = check(cu.cuMemAlloc(100 * 4))
    args = [(out, PTR), (1, U32), (101, U32)]
    assert launch(fn, (1, 1, 1), (128, 1, 1), args, stream=stream) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert "thread (100, 0, 0)" in report()


def test_peer_copies_and_cross_device_event_waits(make_system: Any) -> None:
    ctx0 = make_system(devices="2")
    fn0 = kernels()["fill"]
    ctx1 = check(cu.cuDevicePrimaryCtxRetain(1))
    assert check(cu.cuDeviceCanAccessPeer(0, 1)) == 1
    check(cu.cuCtxEnablePeerAccess(ctx1, 0))
    assert cu.cuCtxEnablePeerAccess(ctx1, 0) == (R.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,)
    src = to_device(np.zeros(128, np.uint32))
    s0 = check(cu.cuStreamCreate(NON_BLOCKING))
    made = check(cu.cuEventCreate(0))
    fill(fn0, src, 11, 128, s0)
    check(cu.cuEventRecord(made, s0))
    check(cu.cuCtxSetCurrent(ctx1))
    dst = check(cu.cuMemAlloc(128 * 4))
    s1 = check(cu.cuStreamCreate(NON_BLOCKING))
    check(cu.cuStreamWaitEvent(s1, made, 0))  # an event of device 0 orders work of device 1
    check(cu.cuMemcpyPeerAsync(dst, ctx1, src, ctx0, 128 * 4, s1))
    check(cu.cuStreamSynchronize(s1))
    np.testing.assert_array_equal(from_device(dst, 128, np.uint32), 11)
