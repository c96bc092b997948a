"""Runtime API graphs: a graph built by hand (memcpy node from page-locked host memory, memset nodes, kernel
nodes, a memcpy node back to a pageable ctypes double), cudaGraphGetNodes, cudaGraphClone, and the same work
captured from three streams forked and joined with events."""

import ctypes
import sys

import numpy as np
from _common import check, compile_module
from cuda.bindings import driver as cuda
from cuda.bindings import runtime as cudart

SOURCE = """
extern "C" __global__ void partial(const float *in, double *out, size_t n)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
    atomicAdd(&out[blockIdx.x], s);
}
extern "C" __global__ void total(const double *in, double *result, unsigned int n)
{
    if (threadIdx.x == 0) { double s = 0.0; for (unsigned int i = 0; i < n; i++) s += in[i]; result[0] = s; }
}
"""
N, BLOCKS, THREADS = 1 << 14, 8, 128


def kernel_node(graph, deps, func, grid, args):
    params = cuda.CUDA_KERNEL_NODE_PARAMS()
    params.func = func
    params.gridDimX, params.gridDimY, params.gridDimZ = grid, 1, 1
    params.blockDimX, params.blockDimY, params.blockDimZ = THREADS, 1, 1
    params.sharedMemBytes = 0
    params.kernelParams = args
    return check(cuda.cuGraphAddKernelNode(graph, deps, len(deps), params))


def manual(host_in, d_in, d_partial, d_result, partial, total):
    result = ctypes.c_double(0.0)
    graph = check(cudart.cudaGraphCreate(0))
    copy = cudart.cudaMemcpy3DParms()
    copy.srcPos = copy.dstPos = cudart.make_cudaPos(0, 0, 0)
    copy.srcPtr = cudart.make_cudaPitchedPtr(host_in, 4 * N, N, 1)
    copy.dstPtr = cudart.make_cudaPitchedPtr(d_in, 4 * N, N, 1)
    copy.extent = cudart.make_cudaExtent(4 * N, 1, 1)
    copy.kind = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    copy_in = check(cudart.cudaGraphAddMemcpyNode(graph, None, 0, copy))
    memset = cudart.cudaMemsetParams()
    memset.dst, memset.value, memset.pitch, memset.elementSize = d_partial, 0, 0, 4
    memset.width, memset.height = BLOCKS * 2, 1
    clear = check(cudart.cudaGraphAddMemsetNode(graph, None, 0, memset))
    args = ((d_in, d_partial, N), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t))
    node = kernel_node(graph, [clear, copy_in], partial, BLOCKS, args)
    node = kernel_node(graph, [node], total, 1, ((d_partial, d_result, BLOCKS), (ctypes.c_void_p, ctypes.c_void_p,
                                                                                 ctypes.c_uint)))
    back = cudart.cudaMemcpy3DParms()
    back.srcPos = back.dstPos = cudart.make_cudaPos(0, 0, 0)
    back.srcPtr = cudart.make_cudaPitchedPtr(d_result, 8, 1, 1)
    back.dstPtr = cudart.make_cudaPitchedPtr(result, 8, 1, 1)
    back.extent = cudart.make_cudaExtent(8, 1, 1)
    back.kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
    check(cudart.cudaGraphAddMemcpyNode(graph, [node], 1, back))
    _, count = check(cudart.cudaGraphGetNodes(graph))
    return run_twice(graph, result), count


def run_twice(graph, result):
    stream = check(cudart.cudaStreamCreate())
    values = []
    for g in (graph, check(cudart.cudaGraphClone(graph))):
        result.value = 0.0
        executable = check(cudart.cudaGraphInstantiate(g, 0))
        check(cudart.cudaGraphLaunch(executable, stream))
        check(cudart.cudaStreamSynchronize(stream))
        values.append(result.value)
        check(cudart.cudaGraphExecDestroy(executable))
        check(cudart.cudaGraphDestroy(g))
    check(cudart.cudaStreamDestroy(stream))
    return values


def captured(host_in, d_in, d_partial, d_result, partial, total):
    result = ctypes.c_double(0.0)
    s1, s2, s3 = (check(cudart.cudaStreamCreate()) for _ in range(3))
    fork, done2, done3 = (check(cudart.cudaEventCreate()) for _ in range(3))
    check(cudart.cudaStreamBeginCapture(s1, cudart.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal))
    check(cudart.cudaEventRecord(fork, s1))
    check(cudart.cudaStreamWaitEvent(s2, fork, 0))
    check(cudart.cudaStreamWaitEvent(s3, fork, 0))
    check(cudart.cudaMemcpyAsync(d_in, host_in, 4 * N, cudart.cudaMemcpyKind.cudaMemcpyDefault, s1))
    check(cudart.cudaMemsetAsync(d_partial, 0, 8 * BLOCKS, s2))
    check(cudart.cudaEventRecord(done2, s2))
    check(cudart.cudaMemsetAsync(d_result, 0, 8, s3))
    check(cudart.cudaEventRecord(done3, s3))
    check(cudart.cudaStreamWaitEvent(s1, done2, 0))
    args = ((d_in, d_partial, N), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t))
    check(cuda.cuLaunchKernel(partial, BLOCKS, 1, 1, THREADS, 1, 1, 0, s1, args, 0))
    check(cudart.cudaStreamWaitEvent(s1, done3, 0))
    args = ((d_partial, d_result, BLOCKS), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint))
    check(cuda.cuLaunchKernel(total, 1, 1, 1, THREADS, 1, 1, 0, s1, args, 0))
    check(cudart.cudaMemcpyAsync(result, d_result, 8, cudart.cudaMemcpyKind.cudaMemcpyDefault, s1))
    graph = check(cudart.cudaStreamEndCapture(s1))
    _, count = check(cudart.cudaGraphGetNodes(graph))
    return run_twice(graph, result), count


def main():
    check(cudart.cudaSetDevice(0))
    module = compile_module(SOURCE)
    partial, total = (check(cuda.cuModuleGetFunction(module, n)) for n in (b"partial", b"total"))
    host_in = check(cudart.cudaMallocHost(4 * N))
    values = np.random.default_rng(3).random(N, dtype=np.float32)
    ctypes.memmove(host_in, values.ctypes.data, values.nbytes)
    d_in, d_partial, d_result = (check(cudart.cudaMalloc(size)) for size in (4 * N, 8 * BLOCKS, 8))
    expected = float(values.astype(np.float64).sum())
    results = [manual(host_in, d_in, d_partial, d_result, partial, total),
               captured(host_in, d_in, d_partial, d_result, partial, total)]
    for ptr in (d_in, d_partial, d_result):
        check(cudart.cudaFree(ptr))
    check(cudart.cudaFreeHost(host_in))
    ok = all(abs(v - expected) < 1e-6 * expected for sums, _ in results for v in sums)
    counts = [count for _, count in results]
    print(f"nodes {counts}, sums {[sums for sums, _ in results]}, expected {expected}")
    if not ok or counts != [5, 6]:
        sys.exit("FAILED")
    print("PASS")


if __name__ == "__main__":
    main()
