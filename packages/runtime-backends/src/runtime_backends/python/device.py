"""The PYTHON device: the kernel IR interpreted with numpy. Works on any machine; the reference semantics."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence

import numpy as np

from runtime_backends.python.interpreter import run_kernel
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.compiler import CompileError, Compiler
from runtime_core.device import Compiled
from runtime_core.ir import Kernel, validate
from runtime_core.ir_serial import dumps, loads
from runtime_core.program import check_launch
from runtime_core.renderer import Renderer

__all__ = ["PythonDevice", "PythonAllocator", "PythonRenderer", "PythonCompiler", "PythonProgram", "MAX_GROUP",
           "MAX_THREADS"]

MAX_GROUP = 1024
"""Threads per group (CUDA's limit per block)."""
MAX_THREADS = 1 << 26
"""Threads per launch: the interpreter keeps a value per thread for every op, 8 bytes each for indices."""


class PythonAllocator(LRUAllocator):
    """Host memory as numpy ``uint8`` arrays; the opaque handle is the array itself (views share its memory)."""

    def _alloc(self, size: int, spec: BufferSpec) -> np.ndarray:
        if spec.external_ptr is not None:
            raise ValueError("the PYTHON device cannot wrap external pointers")
        return np.zeros(size, dtype=np.uint8)

    def _free(self, opaque: np.ndarray, size: int, spec: BufferSpec) -> None:
        pass  # numpy releases the memory when the last reference goes

    def _copyin(self, dest: np.ndarray, src: memoryview) -> None:
        dest[:] = np.frombuffer(src, dtype=np.uint8)

    def _copyout(self, dest: memoryview, src: np.ndarray) -> None:
        np.frombuffer(dest, dtype=np.uint8)[:] = src

    def _as_buffer(self, src: np.ndarray, size: int) -> memoryview:
        return memoryview(src[:size])  # type: ignore[arg-type]

    def _offset(self, opaque: np.ndarray, size: int, offset: int) -> np.ndarray:
        return opaque[offset:offset + size]

    def _transfer(self, dest: np.ndarray, src: np.ndarray, size: int, src_dev: object, dest_dev: object) -> None:
        dest[:size] = src[:size]


class PythonRenderer(Renderer):
    """"Renders" a kernel as its IR text (``runtime_core.ir_serial``); supports local memory and every dtype."""

    device = "PYTHON"
    has_local = True
    has_shared = True
    local_max = (1024, 1024, 64)
    shared_max = 48 * 1024

    def render(self, kernel: Kernel) -> str:
        """The IR text of ``kernel``; ``ValueError`` (``IRError``) if it is malformed or exceeds the device's limits."""
        self.check(validate(kernel))
        return dumps(kernel)


class PythonCompiler(Compiler):
    """Checks the IR text: the "binary" is the validated IR itself. Not cached (parsing is cheaper than a lookup)."""

    def __init__(self) -> None:
        super().__init__(cachekey=None)

    def compile(self, src: str) -> bytes:
        """Validate IR text ``src`` and check it against the device's limits (local memory, dtypes).

        Raises ``CompileError`` for malformed IR or a kernel the device cannot run (IR text need not come from
        :class:`PythonRenderer`, so its checks are repeated here).
        """
        _load(src)
        return src.encode()


def _load(text: str | bytes) -> Kernel:
    """The kernel of IR text, checked against the device's limits; ``CompileError`` otherwise."""
    try:
        kernel = loads(text)
        PythonRenderer().check(kernel)
    except ValueError as e:  # IRError is a ValueError
        raise CompileError(f"invalid kernel IR: {e}", source=text if isinstance(text, str) else "") from e
    return kernel


class PythonProgram:
    """Kernel ``name`` of IR text ``lib`` on ``dev``, run by the numpy interpreter; follows the
    ``runtime_core.program.Program`` protocol.
    ``CompileError`` for invalid IR or a kernel of another name."""

    def __init__(self, dev: Compiled, name: str, lib: bytes) -> None:
        self.dev, self.kernel = dev, _load(lib)
        if self.kernel.name != name:
            raise CompileError(f"program {name!r} not found; the IR defines {self.kernel.name!r}")
        self.name = name
        self.arg_counts = (len(self.kernel.buffers), len(self.kernel.vars))

    def __call__(self, *bufs: np.ndarray, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None:
        gs, ls = check_launch(self.name, bufs, vals, *self.arg_counts, global_size, local_size)
        _check_shape(self.name, gs, ls)
        for u, b in zip(self.kernel.buffers, bufs):
            if not isinstance(b, np.ndarray) or b.dtype != np.uint8 or b.ndim != 1:
                raise TypeError(f"kernel {self.name!r}: buffer {u.arg} is not a PYTHON device buffer handle (the "
                                f"opaque of a PYTHON Buffer), got {type(b).__name__}")
            if not b.flags.c_contiguous or not b.flags.writeable:
                raise ValueError(f"kernel {self.name!r}: buffer {u.arg} must be a contiguous, writable uint8 array")
            if b.nbytes % u.dtype.itemsize:
                raise ValueError(f"kernel {self.name!r}: buffer {u.arg} has {b.nbytes} bytes, not a multiple of "
                                 f"{u.dtype.name}'s {u.dtype.itemsize}")
        start = time.perf_counter()
        run_kernel(self.kernel, list(bufs), tuple(vals), gs, ls)
        return time.perf_counter() - start if wait else None


def _check_shape(name: str, gs: tuple[int, ...], ls: tuple[int, ...]) -> None:
    """Launch limits: ``PythonRenderer.local_max`` per dimension and ``MAX_GROUP`` threads per group (as on CUDA), and
    at most ``MAX_THREADS`` threads in all (the interpreter holds one value per thread for every op)."""
    if any(s > m for s, m in zip(ls, PythonRenderer.local_max)) or math.prod(ls) > MAX_GROUP:
        raise ValueError(f"kernel {name!r}: local_size {ls} exceeds the PYTHON device's limits: at most "
                         f"{PythonRenderer.local_max} per dimension and {MAX_GROUP} threads per group")
    if (n := math.prod(gs) * math.prod(ls)) > MAX_THREADS:
        raise ValueError(f"kernel {name!r}: {n} threads (global_size {gs} x local_size {ls}) exceed the PYTHON "
                         f"interpreter's limit of {MAX_THREADS}; launch fewer threads (loop inside the kernel) or use "
                         f"a compiled device")


class PythonDevice(Compiled):
    """Device ``PYTHON``: always available."""

    DEFAULT_PRIORITY = 100

    def __init__(self, device: str) -> None:
        if device != "PYTHON":
            raise ValueError(f"the PYTHON backend has a single device, 'PYTHON'; got {device!r}")
        super().__init__(device, PythonAllocator(self), PythonRenderer(), PythonCompiler(),
                         functools.partial(PythonProgram, self))
