"""``KernelCase``: one IR kernel, how to make its inputs, and the numpy reference of what it must write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from runtime_core.dtype import DType
from runtime_core.ir import Kernel

__all__ = ["KernelCase", "Inputs", "Reference"]

Inputs = Callable[[np.random.Generator], list[np.ndarray]]
"""rng -> one 1-D array per buffer slot (in slot order, each of the slot's dtype), outputs included (their initial
contents, so elements a kernel must not touch can be checked)."""
Reference = Callable[[list[np.ndarray]], dict[int, np.ndarray]]
"""the arrays made by ``Inputs`` -> slot -> the full contents that slot must hold after the launch."""


@dataclass(frozen=True)
class KernelCase:
    """A kernel-library test case.

    Attributes:
        name: unique id, e.g. ``"alu_add_float32"`` (used as the pytest id).
        kernel: the IR kernel (built with ``KernelBuilder``; several cases may share one kernel and check different
            output slots).
        inputs: makes the buffers' initial contents from a seeded rng.
        reference: the expected contents of the checked slots.
        dtype: the element type under test (for selection and reporting; tolerances come from each slot's dtype).
        vals: int32 launch values, in ``kernel.vars`` order.
        global_size, local_size: launch shape; default the kernel's.
        needs_local: the kernel uses local memory and real group threads (renderer.has_local and has_shared).
        rtol, atol: tolerance overrides for float outputs (``None``: the dtype's default, see ``harness.assertions``).
        marks: names of pytest marks the suite applies (e.g. ``("slow",)``).
    """

    name: str
    kernel: Kernel
    inputs: Inputs
    reference: Reference
    dtype: DType
    vals: tuple[int, ...] = ()
    global_size: tuple[int, int, int] | None = None
    local_size: tuple[int, int, int] | None = None
    needs_local: bool = False
    rtol: float | None = None
    atol: float | None = None
    marks: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.vals) != len(self.kernel.vars):
            raise ValueError(f"case {self.name!r}: kernel {self.kernel.name!r} takes {len(self.kernel.vars)} vals, "
                             f"got {len(self.vals)}")
        if self.kernel.uses_local and not self.needs_local:
            raise ValueError(f"case {self.name!r}: kernel {self.kernel.name!r} uses local memory; set needs_local=True")

    @property
    def launch(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(global_size, local_size) of the launch."""
        return (self.global_size or self.kernel.global_size, self.local_size or self.kernel.local_size)
