"""Sized IR kernels for the benchmarks, built with ``runtime_core.ir.KernelBuilder``.

The kernel library (``harness.kernels``) builds small fixed-size correctness cases; benchmarks need the same shapes at
sizes chosen per run, so the few kernels they time are built here. Every kernel takes float32 buffers, indexes them
with int32 (so element counts stay below 2**31) and launches one thread per output element. Buffers are passed in
slot order: inputs first, the output last.
"""

from __future__ import annotations

from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder

__all__ = ["empty_kernel", "add_kernel", "row_sum_kernel", "matmul_kernel", "GROUP"]

GROUP = 256  # threads per group of the elementwise kernel (a common GPU block size)
_INT32_MAX = 2**31 - 1


def _check_count(what: str, value: int, limit: int = _INT32_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ValueError(f"{what} must be an int in [1, {limit}] (int32 indexing), got {value!r}")


def empty_kernel() -> Kernel:
    """A kernel with no parameters and no ops: launching it measures pure launch overhead."""
    return KernelBuilder("bench_empty").build()


def add_kernel(n: int) -> Kernel:
    """``c[i] = a[i] + b[i]`` for ``i < n`` float32 elements; buffers ``(a, b, c)``, ``n / GROUP`` groups of ``GROUP``.

    Raises ``ValueError`` unless ``n`` is a positive multiple of ``GROUP`` (no tail handling, so no gate is timed).
    """
    _check_count("n", n)
    if n % GROUP:
        raise ValueError(f"n must be a multiple of GROUP={GROUP} elements, got {n}; "
                         f"round it to {n - n % GROUP or GROUP}")
    kb = KernelBuilder("bench_add", (n // GROUP,), (GROUP,))
    a, b, c = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    kb.store(c, i, kb.add(kb.load(a, i), kb.load(b, i)))
    return kb.build()


def row_sum_kernel(rows: int, cols: int) -> Kernel:
    """``out[r] = sum(x[r, :])`` of a row-major ``rows x cols`` float32 matrix: one thread per row folds its row left
    to right in a RANGE loop into an ACC (float32, one rounding per add). Buffers ``(x, out)``; ``rows`` groups of one
    thread.

    Raises ``ValueError`` unless ``rows * cols`` fits int32.
    """
    _check_count("rows", rows)
    _check_count("cols", cols, _INT32_MAX // rows)
    kb = KernelBuilder("bench_row_sum", (rows,))
    x, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    r = kb.global_id(0)
    base = kb.mul(r, cols)
    acc = kb.acc(0.0, dtypes.float32)
    with kb.range(0, cols) as j:
        kb.assign(acc, kb.add(acc, kb.load(x, kb.add(base, j))))
    kb.store(out, r, acc)
    return kb.build()


def matmul_kernel(n: int) -> Kernel:
    """Naive ``c = a @ b`` of row-major ``n x n`` float32 matrices: thread ``(col, row)`` accumulates
    ``a[row, k] * b[k, col]`` for k = 0..n-1 in a float32 ACC. Buffers ``(a, b, c)``; ``n x n`` groups of 1 thread.

    Raises ``ValueError`` unless ``n * n`` fits int32.
    """
    _check_count("n", n, 46340)  # floor(sqrt(2**31 - 1))
    kb = KernelBuilder("bench_matmul", (n, n))
    a, b, c = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    col, row = kb.global_id(0), kb.global_id(1)
    acc = kb.acc(0.0, dtypes.float32)
    with kb.range(0, n) as k:
        prod = kb.mul(kb.load(a, kb.add(kb.mul(row, n), k)), kb.load(b, kb.add(kb.mul(k, n), col)))
        kb.assign(acc, kb.add(acc, prod))
    kb.store(c, kb.add(kb.mul(row, n), col), acc)
    return kb.build()
