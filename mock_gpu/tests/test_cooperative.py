"""Cooperative launches (CUDA driver API cuLaunchCooperativeKernel) and cooperative groups' grid-wide barrier: the
values each block reads after ``this_grid().sync()`` must be those the other blocks wrote before it."""

from __future__ import annotations

from typing import Any

import numpy as np
from _driver_util import I32, PTR, check, from_device, load, report, to_device

from mock_gpu import driver as cu

R = cu.CUresult
SRC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void rotate(int *x, int *y, int rounds) {
    cg::grid_group grid = cg::this_grid();
    unsigned n = grid.size(), i = grid.thread_rank();
    for (int r = 0; r < rounds; ++r) {
        y[i] = x[(i + blockDim.x) % n] + 1;  // read what another block wrote in the previous round
        grid.sync();
        x[i] = y[i];
        grid.sync();
    }
}
"""


def _args(x: Any, y: Any, rounds: int) -> tuple:
    return ((x, y, rounds), (PTR, PTR, I32))


def test_grid_sync_orders_every_block_of_a_cooperative_launch(ctx: Any) -> None:
    fn = load(SRC, "rotate", includes=True)[1][0]
    blocks, threads, rounds = 6, 64, 3
    start = np.arange(blocks * threads, dtype=np.int32)
    x, y = to_device(start), to_device(np.zeros_like(start))
    check(cu.cuLaunchCooperativeKernel(fn, blocks, 1, 1, threads, 1, 1, 0, None, _args(x, y, rounds)))
    check(cu.cuCtxSynchronize())
    want = start.copy()
    for _ in range(rounds):
        want = np.roll(want, -threads) + 1
    np.testing.assert_array_equal(from_device(x, start.size, np.int32), want)


def test_grid_sync_outside_a_cooperative_launch_traps(ctx: Any) -> None:
    fn = load(SRC, "rotate", includes=True)[1][0]
    x = to_device(np.zeros(64, np.int32))
    check(cu.cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, None, _args(x, x, 1), 0))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_FAILED,)


def test_a_cooperative_grid_must_fit_the_device_at_once(ctx: Any) -> None:
    fn = load(SRC, "rotate", includes=True)[1][0]
    per_sm = check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 1024, 0))
    sms = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0))
    assert per_sm == 2  # 2048 resident threads per SM of sm_90 (CUDA C++ Programming Guide, table 21)
    assert check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0)) == 1
    x = to_device(np.zeros(4, np.int32))
    too_many = sms * per_sm + 1
    assert cu.cuLaunchCooperativeKernel(fn, too_many, 1, 1, 1024, 1, 1, 0, None, _args(x, x, 0)) == \
        (R.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,)


EARLY_EXIT = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void early_exit(int *x, int skipping) {
    cg::grid_group grid = cg::this_grid();
    if (blockIdx.x < skipping) return;  // these blocks never reach the grid-wide barrier
    x[grid.thread_rank()] = 1;
    grid.sync();
    x[grid.thread_rank()] += 1;
}
"""


def test_a_grid_sync_some_blocks_never_reach_is_a_deadlock_reported_at_once(make_system: Any) -> None:
    """Block 0 returns before grid.sync(): the other blocks could wait forever (a GPU hangs). With every other
    thread spinning or parked at a barrier, the emulator reports it at once, long before the launch timeout."""
    make_system(launch_timeout="3600")
    fn = load(EARLY_EXIT, "early_exit", includes=True)[1][0]
    x = to_device(np.zeros(4 * 32, np.int32))
    check(cu.cuLaunchCooperativeKernel(fn, 4, 1, 1, 32, 1, 1, 0, None, ((x, 1), (PTR, I32))))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_TIMEOUT,)
    text = report()
    assert "deadlock" in text and "early_exit" in text and "(0, 0, 0) exited" in text, text
    check(cu.cuDevicePrimaryCtxReset(0))


def test_a_grid_sync_every_block_reaches_completes(ctx: Any) -> None:
    fn = load(EARLY_EXIT, "early_exit", includes=True)[1][0]
    x = to_device(np.zeros(4 * 32, np.int32))
    check(cu.cuLaunchCooperativeKernel(fn, 4, 1, 1, 32, 1, 1, 0, None, ((x, 0), (PTR, I32))))
    check(cu.cuCtxSynchronize())
    np.testing.assert_array_equal(from_device(x, 4 * 32, np.int32), 2)


HANDOFF = r"""
extern "C" __global__ void handoff(volatile int *flag, int *out) {
    if (threadIdx.x >= 32) {
        while (*flag == 0) { }  // warp 1 waits for warp 0, as independent thread scheduling allows
        out[threadIdx.x] = *flag + 1;
    } else {
        if (threadIdx.x == 0) *flag = 41;
        out[threadIdx.x] = 1;
    }
}
"""


def test_a_spinning_warp_lets_the_warp_it_waits_for_run(make_system: Any) -> None:
    make_system(launch_timeout="120")
    fn = load(HANDOFF, "handoff")[1][0]
    flag, out = to_device(np.zeros(1, np.int32)), to_device(np.zeros(64, np.int32))
    check(cu.cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, None, ((flag, out), (PTR, PTR)), 0))
    check(cu.cuCtxSynchronize())
    np.testing.assert_array_equal(from_device(out, 64, np.int32), [1] * 32 + [42] * 32)


SPIN_FOREVER = r"""
extern "C" __global__ void wait_for_nothing(volatile int *flag) {
    while (*flag == 0) { }  // nothing ever sets it
}
"""


def test_a_cooperative_spin_on_a_flag_nothing_sets_is_a_deadlock_but_not_called_a_grid_sync(make_system: Any) -> None:
    make_system(launch_timeout="3600")
    fn = load(SPIN_FOREVER, "wait_for_nothing")[1][0]
    flag = to_device(np.zeros(1, np.int32))
    check(cu.cuLaunchCooperativeKernel(fn, 2, 1, 1, 32, 1, 1, 0, None, ((flag,), (PTR,))))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_TIMEOUT,)
    text = report()
    assert "deadlock" in text and "grid-wide sync" not in text and "nothing that is still running sets" in text, text
    check(cu.cuDevicePrimaryCtxReset(0))


SPINLOCK = r"""
extern "C" __global__ void locked_increment(int *lock, volatile int *count) {
    while (atomicCAS(lock, 0, 1) != 0) { }  // every thread of the warp contends for one lock
    *count = *count + 1;
    __threadfence();
    atomicExch(lock, 0);
}
"""


def test_a_spinlock_every_thread_of_a_block_takes_in_turn_counts_each_once(make_system: Any) -> None:
    """Independent thread scheduling lets the lock's holder run while the other threads of its warp spin on it."""
    make_system(launch_timeout="600")
    fn = load(SPINLOCK, "locked_increment")[1][0]
    lock, count = to_device(np.zeros(1, np.int32)), to_device(np.zeros(1, np.int32))
    check(cu.cuLaunchKernel(fn, 2, 1, 1, 64, 1, 1, 0, None, ((lock, count), (PTR, PTR)), 0))
    check(cu.cuCtxSynchronize())
    assert (int(from_device(count, 1, np.int32)[0]), int(from_device(lock, 1, np.int32)[0])) == (128, 0)
