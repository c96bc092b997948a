"""The kernel library: IR kernels built with ``runtime_core.ir.KernelBuilder`` only, each with a numpy reference that
implements the IR semantics independently (``harness.kernels.semantics``).

``all_cases()`` lists every :class:`KernelCase` (elementwise, casts, reductions, matmul, transpose, gated, vars); the
large-index case lives apart (``large_index_case()``) because it needs more than 2 GiB of address space.
"""

from __future__ import annotations

from harness.kernels.case import KernelCase
from harness.kernels.casts import cast_cases
from harness.kernels.elementwise import elementwise_cases
from harness.kernels.gated import gated_cases, var_cases
from harness.kernels.large_index import LargeIndexCase, large_index_case
from harness.kernels.layout import transpose_cases
from harness.kernels.matmul import matmul_cases
from harness.kernels.reductions import serial_reduce_cases, tree_reduce_cases

__all__ = ["KernelCase", "LargeIndexCase", "all_cases", "elementwise_cases", "cast_cases", "serial_reduce_cases",
           "tree_reduce_cases", "matmul_cases", "transpose_cases", "gated_cases", "var_cases", "large_index_case"]


def all_cases() -> list[KernelCase]:
    """Every kernel case of the library, in a stable order with unique names."""
    cases = (elementwise_cases() + cast_cases() + serial_reduce_cases() + tree_reduce_cases() + matmul_cases()
             + transpose_cases() + gated_cases() + var_cases())
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"kernel case names must be unique; repeated: {dupes}")
    return cases
