"""PTX interpreter: load PTX text into a Module and launch its kernels on an AddressSpace, vectorized with numpy.

Public API: :func:`load_module`, :class:`Module`, :class:`Kernel`, :func:`launch` and the errors :class:`PTXError`,
:class:`BarrierDivergence`, :class:`ExecutionError` and its subclasses :class:`DeviceAssertion` and
:class:`LaunchTimeout` (memory faults are :class:`mock_gpu.address_space.MemoryFault`).
"""

from __future__ import annotations

from .errors import BarrierDivergence, DeviceAssertion, ExecutionError, LaunchTimeout, PTXError
from .exec.engine import launch
from .loader import Kernel, Module, load_module

__all__ = ["BarrierDivergence", "DeviceAssertion", "ExecutionError", "Kernel", "LaunchTimeout", "Module", "PTXError",
           "launch", "load_module"]
