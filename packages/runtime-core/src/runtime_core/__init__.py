"""Device runtime core: dtypes, buffers, allocators, compilers, renderers, the kernel IR and the device registry.

This package knows no backend: backends register through the entry-point group ``runtime_core.backends``.
"""

from runtime_core.allocator import Allocator, Capabilities, LRUAllocator, MallocAllocator
from runtime_core.buffer import Buffer
from runtime_core.buffer_spec import BufferSpec
from runtime_core.compiler import CompileError, Compiler
from runtime_core.device import Compiled, Device, DeviceError
from runtime_core.dtype import DType, dtypes
from runtime_core.program import Program
from runtime_core.renderer import Renderer
from runtime_core.transfer import Route

__all__ = ["Allocator", "Capabilities", "LRUAllocator", "MallocAllocator", "Buffer", "BufferSpec", "CompileError", "Compiler",
           "Compiled", "Device", "DeviceError", "DType", "dtypes", "Program", "Renderer", "Route"]
