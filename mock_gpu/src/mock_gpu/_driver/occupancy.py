"""Occupancy (CUDA driver API 6.23 "Occupancy"): how many blocks of a kernel fit one multiprocessor at once, from the
emulated architecture's resident threads and blocks per SM and its shared memory per SM (registers are not
modelled: the interpreter has none). Cooperative launches are bounded by it (cuLaunchCooperativeKernel)."""

from __future__ import annotations

from typing import Any

from .handles import Function
from .marshal import uint_arg
from .results import error
from .system import api, system

BLOCKS_PER_SM = 32  # CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR of every emulated architecture


def max_active_blocks(fn: Function, threads: int, dynamic_smem: int) -> int:
    """Blocks of ``threads`` threads using ``dynamic_smem`` bytes beyond the kernel's static shared memory that one
    multiprocessor holds at once (0 if one block does not fit)."""
    arch = fn.owner.ctx.device.arch
    smem = fn.kernel.static_shared_bytes + dynamic_smem
    by_smem = arch.smem_per_sm // smem if smem else BLOCKS_PER_SM
    return max(0, min(arch.threads_per_sm // threads, BLOCKS_PER_SM, by_smem))


@api(1)
def cuOccupancyMaxActiveBlocksPerMultiprocessor(func: Any, blockSize: Any, dynamicSMemSize: Any) -> tuple:  # noqa: N803
    """cuOccupancyMaxActiveBlocksPerMultiprocessor(func, blockSize, dynamicSMemSize) -> (CUresult, int): blocks of
    ``blockSize`` threads that fit one SM by resident threads, the per-SM block limit and shared memory;
    CUDA_ERROR_INVALID_VALUE for a block size of 0."""
    threads = uint_arg(blockSize, "blockSize")
    if threads == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "blockSize must be positive")
    fn = system().lookup(func, Function, "function")
    return (max_active_blocks(fn, threads, uint_arg(dynamicSMemSize, "dynamicSMemSize", bits=64)),)
