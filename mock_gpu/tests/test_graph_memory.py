"""Graph memory nodes (CUDA driver API 6.24; CUDA C++ Programming Guide "Graph Memory Nodes"): what an allocation
node reserves, when it is released, and a failed allocation that adds nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _driver_util import check, from_device

import mock_gpu
from mock_gpu import driver as cu

R = cu.CUresult
A = cu.CUgraphMem_attribute
MIB = 1 << 20


def alloc_params(nbytes: int) -> Any:
    params = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
    params.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    params.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    params.bytesize = nbytes
    return params


def free_bytes() -> int:
    return int(check(cu.cuMemGetInfo())[0])


def graph_memory() -> int:
    return int(check(cu.cuDeviceGetGraphMemAttribute(cu.CUdevice(0), A.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)))


def test_an_allocation_beyond_the_device_is_out_of_memory_and_adds_no_node(make_system: Any) -> None:
    make_system(memory="64MiB")
    graph = check(cu.cuGraphCreate(0))
    before = free_bytes()
    params = alloc_params(65 * MIB)
    assert cu.cuGraphAddMemAllocNode(graph, None, 0, params) == (R.CUDA_ERROR_OUT_OF_MEMORY, None)
    assert check(cu.cuGraphGetNodes(graph, 0))[1] == 0
    assert (free_bytes(), graph_memory(), int(params.dptr)) == (before, 0, 0)


def test_bad_dependencies_leave_nothing_allocated(ctx: Any) -> None:
    graph, other = check(cu.cuGraphCreate(0)), check(cu.cuGraphCreate(0))
    foreign = check(cu.cuGraphAddEmptyNode(other, None, 0))
    before = free_bytes()
    assert cu.cuGraphAddMemAllocNode(graph, [foreign], 1, alloc_params(MIB))[0] == R.CUDA_ERROR_INVALID_VALUE
    assert (free_bytes(), graph_memory()) == (before, 0)


def test_destroying_the_graph_and_its_executables_releases_the_reservation(ctx: Any) -> None:
    before = free_bytes()
    graph = check(cu.cuGraphCreate(0))
    params = alloc_params(4 * MIB)
    node = check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    check(cu.cuGraphAddMemFreeNode(graph, [node], 1, params.dptr))
    assert (before - free_bytes(), graph_memory()) == (4 * MIB, 4 * MIB)
    exec_ = check(cu.cuGraphInstantiate(graph, 0))
    check(cu.cuGraphDestroy(graph))
    assert graph_memory() == 4 * MIB  # the executable graph still holds the node
    check(cu.cuGraphLaunch(exec_, None))
    check(cu.cuCtxSynchronize())
    check(cu.cuGraphExecDestroy(exec_))
    assert (free_bytes(), graph_memory()) == (before, 0)
    high = check(cu.cuDeviceGetGraphMemAttribute(cu.CUdevice(0), A.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH))
    assert int(high) == 4 * MIB


def test_memory_a_launch_left_allocated_belongs_to_the_program_until_freed(ctx: Any) -> None:
    before = free_bytes()
    graph = check(cu.cuGraphCreate(0))
    params = alloc_params(MIB)
    check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    exec_ = check(cu.cuGraphInstantiate(graph, 0))
    check(cu.cuGraphLaunch(exec_, None))
    check(cu.cuCtxSynchronize())
    check(cu.cuGraphExecDestroy(exec_))
    check(cu.cuGraphDestroy(graph))
    data = np.arange(MIB // 4, dtype=np.uint32)
    check(cu.cuMemcpyHtoD(params.dptr, data, data.nbytes))  # still the program's memory
    np.testing.assert_array_equal(from_device(params.dptr, data.size, np.uint32), data)
    check(cu.cuMemFree(params.dptr))
    assert (free_bytes(), graph_memory()) == (before, 0)


@pytest.mark.parametrize("free_async", [False, True], ids=["cuMemFree", "cuMemFreeAsync"])
def test_freeing_graph_memory_gives_it_back_to_a_graph_that_still_holds_it(ctx: Any, free_async: bool) -> None:
    graph = check(cu.cuGraphCreate(0))
    params = alloc_params(MIB)
    check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    exec_ = check(cu.cuGraphInstantiate(graph, 0))
    for _ in range(2):  # the second launch reuses the address the first one's memory was given back to
        check(cu.cuGraphLaunch(exec_, None))
        if free_async:
            check(cu.cuMemFreeAsync(params.dptr, None))
        else:
            check(cu.cuCtxSynchronize())
            check(cu.cuMemFree(params.dptr))
        check(cu.cuCtxSynchronize())
    assert graph_memory() == MIB
    check(cu.cuGraphExecDestroy(exec_))
    check(cu.cuGraphDestroy(graph))
    assert graph_memory() == 0


def launched_allocation(flags: int = 0) -> tuple[Any, Any]:
    """(executable graph, allocation params) of a graph whose one allocation node leaves its memory to the program."""
    graph = check(cu.cuGraphCreate(0))
    params = alloc_params(MIB)
    check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    exec_ = check(cu.cuGraphInstantiate(graph, flags))
    check(cu.cuGraphLaunch(exec_, None))
    return exec_, params


def test_relaunching_while_the_last_launch_s_allocation_is_unfreed_is_invalid_value(ctx: Any) -> None:
    """cuGraphLaunch: unfreed allocations of an earlier launch fail the launch with CUDA_ERROR_INVALID_VALUE unless
    the graph was instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH."""
    exec_, params = launched_allocation()
    assert cu.cuGraphLaunch(exec_, None) == (R.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuMemFreeAsync(params.dptr, None))
    check(cu.cuGraphLaunch(exec_, None))  # freed: the launch may allocate it again
    check(cu.cuCtxSynchronize())


def test_auto_free_on_launch_lets_a_graph_relaunch_over_its_unfreed_allocation(ctx: Any) -> None:
    auto_free = cu.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
    exec_, params = launched_allocation(int(auto_free))
    check(cu.cuGraphLaunch(exec_, None))
    check(cu.cuCtxSynchronize())
    check(cu.cuMemFree(params.dptr))


@pytest.mark.parametrize("second", ["cuMemFree", "cuMemFreeAsync"])
def test_freeing_a_graph_allocation_twice_is_invalid_value(ctx: Any, second: str) -> None:
    _, params = launched_allocation()
    check(cu.cuMemFreeAsync(params.dptr, None))
    again = cu.cuMemFree(params.dptr) if second == "cuMemFree" else cu.cuMemFreeAsync(params.dptr, None)
    assert again == (R.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuCtxSynchronize())  # the failed second free left nothing pending


def test_memory_freed_in_its_own_graph_cannot_be_freed_by_the_program(ctx: Any) -> None:
    """cuGraphAddMemAllocNode: allocations freed in the same graph cannot be freed outside it."""
    graph = check(cu.cuGraphCreate(0))
    params = alloc_params(MIB)
    node = check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    check(cu.cuGraphAddMemFreeNode(graph, [node], 1, params.dptr))
    check(cu.cuGraphLaunch(check(cu.cuGraphInstantiate(graph, 0)), None))
    check(cu.cuCtxSynchronize())
    assert cu.cuMemFree(params.dptr) == (R.CUDA_ERROR_INVALID_VALUE,)


def test_a_copy_from_freed_graph_memory_faults(ctx: Any) -> None:
    exec_, params = launched_allocation()
    check(cu.cuMemcpyHtoD(params.dptr, np.ones(4, np.uint32), 16))  # the program's memory after the launch
    check(cu.cuMemFree(params.dptr))
    out = np.zeros(4, np.uint32)
    assert cu.cuMemcpyDtoH(out, params.dptr, 16) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert "freed" in mock_gpu.last_error_report()


def test_async_frees_of_graph_memory_nothing_holds_any_more_each_release_their_own(ctx: Any) -> None:
    """Two allocations whose graphs are gone, freed on two streams: the first free to run must not release the
    memory of the second, which its stream still uses before its own free."""
    before = free_bytes()
    allocations = []
    for _ in range(2):
        graph = check(cu.cuGraphCreate(0))
        params = alloc_params(MIB)
        check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
        exec_ = check(cu.cuGraphInstantiate(graph, 0))
        check(cu.cuGraphLaunch(exec_, None))
        check(cu.cuGraphExecDestroy(exec_))
        check(cu.cuGraphDestroy(graph))
        allocations.append(params.dptr)
    check(cu.cuCtxSynchronize())  # the launches ran: the memory is the program's
    first, second = (check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)) for _ in allocations)
    check(cu.cuMemFreeAsync(allocations[0], first))
    check(cu.cuMemsetD8Async(allocations[1], 7, MIB, second))  # stream-ordered use before its free
    check(cu.cuMemFreeAsync(allocations[1], second))
    check(cu.cuStreamSynchronize(first))  # the first free runs; the second allocation is still in use
    check(cu.cuStreamSynchronize(second))
    assert (free_bytes(), graph_memory()) == (before, 0)
