"""Exceptions of the PTX loader and interpreter."""

from __future__ import annotations

__all__ = ["PTXError", "BarrierDivergence", "ExecutionError", "DeviceAssertion", "LaunchTimeout"]


class PTXError(Exception):
    """PTX text that cannot be loaded: a syntax error or a construct the interpreter does not support.

    Fields: ``line`` (1-based line number in the PTX text), ``text`` (that line, stripped), ``message`` (what is wrong).
    Raised by :func:`mock_gpu.ptx.load_module` before anything runs (the mock of CUDA_ERROR_INVALID_PTX).
    """

    def __init__(self, line: int, text: str, message: str) -> None:
        self.line = line
        self.text = text
        self.message = message
        super().__init__(f"PTX line {line}: {message}\n    {text}")


class BarrierDivergence(Exception):
    """Threads of a block wait at a barrier that the other live threads of the block can never reach.

    On hardware this hangs or is undefined behaviour (PTX ISA 9.7.13.1 bar/barrier: all non-exited threads of the CTA
    must arrive; ``bar.sync`` is ``.aligned`` so all threads must execute the same barrier instruction). Fields:
    ``kernel``, ``block`` (x, y, z), ``pc`` (instruction index), ``line`` (PTX line of the barrier).
    """

    def __init__(self, kernel: str, block: tuple[int, int, int], pc: int, line: int, message: str) -> None:
        self.kernel = kernel
        self.block = block
        self.pc = pc
        self.line = line
        super().__init__(f"barrier divergence in kernel {kernel!r}, block {block}, at pc {pc} (PTX line {line}): "
                         f"{message}")


class ExecutionError(Exception):
    """A kernel stopped abnormally: ``trap``/``brkpt``, an unsupported runtime situation, a bad launch.

    Fields: ``kernel``, ``block`` and ``thread`` (tuples or None), ``line`` (PTX line or None).
    """

    def __init__(self, message: str, *, kernel: str | None = None, block: tuple[int, int, int] | None = None,
                 thread: tuple[int, int, int] | None = None, line: int | None = None) -> None:
        self.kernel = kernel
        self.block = block
        self.thread = thread
        self.line = line
        where = f" in kernel {kernel!r}" if kernel else ""
        if block is not None:
            where += f", block {block}, thread {thread}"
        if line is not None:
            where += f" (PTX line {line})"
        super().__init__(f"{message}{where}")


class DeviceAssertion(ExecutionError):
    """A device-side ``assert`` failed: the kernel called ``__assertfail`` (CUDA C++ Programming Guide, "Assertion";
    the driver then returns CUDA_ERROR_ASSERT). The message holds the asserted expression, file, line and function."""


class LaunchTimeout(ExecutionError):
    """A kernel ran longer than the launch's time limit: usually an endless loop, or a spin-wait on a flag that another
    block sets (the emulator runs blocks in order, so such a wait never ends). The driver returns
    CUDA_ERROR_LAUNCH_TIMEOUT."""
