"""Argument marshalling: host pointers, sizes and kernel parameters in the forms cuda-python's driver functions
accept (CUDA driver API 6.13 "Memory Management" for host pointers, 6.22 "Execution Control" for cuLaunchKernel's
``kernelParams`` and ``extra``).

Host pointers (``srcHost``/``dstHost`` of cuMemcpy*, ``kernelParams``, ``extra``): ``None`` (NULL), an ``int``
address, or an object with the buffer protocol (bytes, bytearray, numpy array, ctypes object), whose buffer
address is used, as cuda-python's ``_HelperInputVoidPtr`` does.

Kernel parameters (CUDA driver API, cuLaunchKernel): either ``kernelParams``, an array of N pointers each pointing
at the value of one parameter (an ``int`` address or a buffer holding the ``void*`` array), or cuda-python's
``(values, types)`` tuple, which cuda-python packs into such an array (``types[i]`` a ctypes type, or ``None`` for
a cuda-python object passed by reference via ``getPtr()``, a ``ctypes.Structure`` or an enum); or ``extra``, an
array of ``CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END``.

Unlike the real driver, which trusts the caller, the emulator checks what it can: the number of values (tuple
form, or a ``void*`` array of known length), each value's size against the kernel's ``.param`` size (tuple form),
and the ``extra`` buffer size against the kernel's parameter buffer. Mismatches are CUDA_ERROR_INVALID_VALUE.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import numpy as np
from cuda.bindings.driver import CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END

from .results import error, logger

_PTR = ctypes.sizeof(ctypes.c_void_p)
# The widest alignment a C compiler gives a parameter struct on x86-64/aarch64 (long double, __int128):
# a CU_LAUNCH_PARAM_BUFFER_SIZE up to the kernel's parameter bytes rounded up to it is padding, not a mismatch.
_MAX_STRUCT_ALIGN = 16
MIN_HOST_ADDRESS = 1 << 16  # the lowest pages are never mapped: such an int is a mistake, not a pointer


def host_address(obj: Any, what: str) -> tuple[int, int | None]:
    """(address, length or None if unknown) of a host pointer argument; raises TypeError like cuda-python."""
    if obj is None:
        return 0, None
    if isinstance(obj, int):
        return obj, None
    if isinstance(obj, ctypes._SimpleCData | ctypes.Array | ctypes.Structure | ctypes.Union):
        return ctypes.addressof(obj), ctypes.sizeof(obj)
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: expected None, an int address or an object with the buffer protocol, "
                        f"got {type(obj).__name__}") from None
    if not view.contiguous:
        raise TypeError(f"{what}: the buffer must be contiguous")
    arr = np.frombuffer(view.cast("B"), dtype=np.uint8)
    return int(arr.ctypes.data), view.nbytes


def struct_arg(value: Any, cls: type, what: str) -> Any:
    """A pointer-to-struct argument (``CUDA_TEXTURE_DESC*``...) as cuda-python passes it: ``None`` is NULL, which the
    driver answers with CUDA_ERROR_INVALID_VALUE; anything but a ``cls`` is the TypeError of cuda-python's typed
    Cython argument. Returns ``value``."""
    if value is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} is NULL")
    if not isinstance(value, cls):
        raise TypeError(f"Argument '{what}' has incorrect type (expected {cls.__module__}.{cls.__name__}, got "
                        f"{type(value).__name__})")
    return value


def struct_list(value: Any, count: int, cls: type, what: str) -> list[Any]:
    """The first ``count`` items of a list argument of structs or enums (``CUmemAccessDesc*``,
    ``CUpointer_attribute*``), checked as cuda-python's wrapper checks it before calling the driver: ``None`` is an
    empty list, an item that is not a ``cls`` is a TypeError, and a list shorter than ``count`` is cuda-python's
    RuntimeError ("List is too small")."""
    items = [] if value is None else list(value)
    if not all(isinstance(item, cls) for item in items):
        raise TypeError(f"Argument '{what}' is not instance of type (expected tuple[{cls.__name__}] or "
                        f"list[{cls.__name__}])")
    if count > len(items):
        raise RuntimeError(f"List is too small: {len(items)} < {count}")
    return items[:count]


def enum_field(struct: Any, field: str) -> int:
    """The value of enum field ``field`` of a cuda-python struct (``srcMemoryType`` of CUDA_MEMCPY3D...).
    CUDA_ERROR_INVALID_VALUE if it holds no member of its enum (left unset: 0), which cuda-python cannot even read
    back (ValueError) and the driver rejects."""
    try:
        return int(getattr(struct, field))
    except ValueError:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{field} is not set to a valid value") from None


def as_int(value: Any, what: str) -> int:
    """A C integer argument converted as cuda-python's Cython wrappers convert it: ``int(value)``, so a float is
    truncated (``196.3`` -> 196), a 0-d numpy array or numpy scalar gives its value; ``None``, ``str`` and ``bytes``
    are a TypeError ("an integer is required"), and an array of more than one value is numpy's TypeError."""
    if value is None or isinstance(value, str | bytes):
        raise TypeError(f"{what}: an integer is required, got {type(value).__name__}: {value!r}")
    return int(value)


def byte_count(value: Any, what: str) -> int:
    """A size_t argument (converted by :func:`as_int`); OverflowError for a negative or too large one (what
    cuda-python's size_t conversion raises)."""
    number = as_int(value, what)
    if not 0 <= number < 1 << 64:
        raise OverflowError(f"{what} {number} does not fit a size_t (0 .. 2**64 - 1)")
    return number


def uint_arg(value: Any, what: str, bits: int = 32) -> int:
    """An unsigned int argument (grid/block dims, shared memory bytes), converted by :func:`as_int`;
    OverflowError outside 0 .. 2**bits - 1, as cuda-python's conversion to ``unsigned int`` raises."""
    number = as_int(value, what)
    if not 0 <= number < 1 << bits:
        raise OverflowError(f"{what} {number} does not fit an unsigned {bits}-bit int")
    return number


def host_range(obj: Any, what: str, nbytes: int, *, writable: bool) -> int:
    """The address of a host buffer argument about to be read (or, ``writable``, written) for ``nbytes`` bytes.

    A buffer whose length is known must hold ``nbytes`` bytes (CUDA_ERROR_INVALID_VALUE otherwise: the real driver
    would silently touch memory past its end) and, when written, must not be read-only (TypeError). A plain int
    address is trusted, as the real driver trusts it.
    """
    address, length = host_address(obj, what)
    if length is not None and nbytes > length:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} holds {length} bytes but {nbytes} bytes were requested; the "
                    "copy would run past the end of the host buffer")
    if writable and length is not None and not isinstance(obj, ctypes._SimpleCData | ctypes.Array | ctypes.Structure
                                                          | ctypes.Union) and memoryview(obj).readonly:
        raise TypeError(f"{what} is a read-only buffer ({type(obj).__name__}); pass a writable one such as a numpy "
                        "array or bytearray")
    return address


def read_host(address: int, nbytes: int, what: str) -> bytes:
    """Copy ``nbytes`` from host memory at ``address`` (CUDA_ERROR_INVALID_VALUE for NULL with nbytes > 0)."""
    if nbytes and address == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} is NULL")
    return ctypes.string_at(address, nbytes) if nbytes else b""


def write_host(address: int, data: bytes, what: str) -> None:
    """Copy ``data`` to host memory at ``address`` (CUDA_ERROR_INVALID_VALUE for NULL)."""
    if data and address == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} is NULL")
    ctypes.memmove(address, data, len(data))


def pack_params(kernel: Any, kernel_params: Any, extra: Any) -> bytes:
    """The kernel's parameter buffer (``kernel.param_bytes`` bytes, each value at its ``.param`` offset).

    ``kernel``: a ``mock_gpu.ptx.Kernel`` (``params``: list of (offset, size) in bytes, ``param_bytes``).
    Raises DriverError(CUDA_ERROR_INVALID_VALUE) for both or neither of kernelParams/extra given (with parameters
    declared), a wrong count, or a wrong size; TypeError for an argument of a type cuda-python rejects too.
    """
    extra_addr, _ = host_address(extra, "extra")
    given_params = kernel_params is not None and not (isinstance(kernel_params, int) and kernel_params == 0)
    if given_params and extra_addr:
        raise error("CUDA_ERROR_INVALID_VALUE", "both kernelParams and extra were given; pass one of them")
    if extra_addr:
        if extra_addr < MIN_HOST_ADDRESS:
            raise error("CUDA_ERROR_INVALID_VALUE", f"extra address {extra_addr:#x} is not a host address")
        return _from_extra(kernel, extra_addr)
    if not given_params:
        if kernel.params:
            raise error("CUDA_ERROR_INVALID_VALUE", f"kernel {kernel.name!r} takes {len(kernel.params)} parameters "
                        "but neither kernelParams nor extra was given")
        return b""
    if isinstance(kernel_params, tuple):
        return _from_values(kernel, kernel_params)
    address, length = host_address(kernel_params, "kernelParams")
    if address < MIN_HOST_ADDRESS:
        raise error("CUDA_ERROR_INVALID_VALUE", f"kernelParams address {address:#x} is not a host address")
    if length is not None and length < _PTR * len(kernel.params):
        raise error("CUDA_ERROR_INVALID_VALUE", f"kernel {kernel.name!r} takes {len(kernel.params)} parameters but "
                    f"the kernelParams array holds {length // _PTR} pointers")
    return _from_pointer_array(kernel, address)


def _from_pointer_array(kernel: Any, address: int) -> bytes:
    buf = bytearray(kernel.param_bytes)
    pointers: Any = (ctypes.c_void_p * len(kernel.params)).from_address(address) if kernel.params else []
    for i, ((offset, size), ptr) in enumerate(zip(kernel.params, pointers, strict=True)):
        if not ptr:
            raise error("CUDA_ERROR_INVALID_VALUE", f"kernelParams[{i}] of kernel {kernel.name!r} is NULL")
        buf[offset:offset + size] = ctypes.string_at(ptr, size)
    return bytes(buf)


def _from_values(kernel: Any, kernel_params: tuple) -> bytes:
    if len(kernel_params) != 2 or not all(isinstance(t, tuple) for t in kernel_params):
        raise TypeError("kernelParams tuple must be (values, types), two tuples of the same length")
    values, types = kernel_params
    if len(values) != len(types):
        raise TypeError(f"kernelParams has {len(values)} values but {len(types)} types")
    if len(values) != len(kernel.params):
        raise error("CUDA_ERROR_INVALID_VALUE",
                    f"kernel {kernel.name!r} takes {len(kernel.params)} parameters, {len(values)} were given")
    buf = bytearray(kernel.param_bytes)
    for i, ((offset, size), value, ctype) in enumerate(zip(kernel.params, values, types, strict=True)):
        data = _value_bytes(value, ctype)
        given = f"value given ({type(value).__name__} as {getattr(ctype, '__name__', ctype)}) is {len(data)}"
        if len(data) > size:
            raise error("CUDA_ERROR_INVALID_VALUE", f"parameter {i} of kernel {kernel.name!r} is {size} bytes but the "
                        f"{given}")
        if len(data) < size:
            # The driver copies the parameter's size from the value's address, reading past a narrower value
            # (NVIDIA's simpleCudaGraphs passes c_uint for a size_t); the emulator zero-extends it instead.
            logger.warning("parameter %d of kernel %r is %d bytes but the %s: zero-extended", i, kernel.name,
                           size, given)
        buf[offset:offset + len(data)] = data
    return bytes(buf)


def _value_bytes(value: Any, ctype: Any) -> bytes:
    """The bytes cuda-python's packing puts behind one parameter pointer (cuda.bindings utils ``_pack_argument``)."""
    if ctype is None:
        if callable(getattr(value, "getPtr", None)):  # a cuda-python object: the pointer-sized value it stores
            return ctypes.string_at(value.getPtr(), _PTR)
        if isinstance(value, ctypes.Structure):
            return bytes(value)
        if isinstance(value, enum.Enum) or (isinstance(value, int) and type(value) not in (int, bool)):
            # an enum passed by value as a C int (cuda-python's FastEnum is an int subclass)
            number = int(value.value) if isinstance(value, enum.Enum) else int(value)
            return number.to_bytes(4, "little", signed=True)
        raise TypeError(f"kernel parameter of type {type(value).__name__} needs a ctypes type in kernelParams types")
    if ctype is ctypes.c_void_p:
        if isinstance(value, ctypes.c_void_p):
            return (value.value or 0).to_bytes(_PTR, "little")
        if isinstance(value, int):
            return value.to_bytes(_PTR, "little")
        if callable(getattr(value, "getPtr", None)):  # cuda-python passes the object's own address here
            return int(value.getPtr()).to_bytes(_PTR, "little")
        raise TypeError(f"c_void_p kernel parameter needs an int, c_void_p or object with getPtr(), got {type(value)}")
    if ctype is ctypes.c_double and isinstance(value, ctypes.c_float):
        return bytes(ctypes.c_double(value.value))
    if not (isinstance(ctype, type) and issubclass(ctype, ctypes._SimpleCData)):
        raise TypeError(f"unsupported kernel parameter type {ctype!r}")
    if isinstance(value, ctype):
        return bytes(value)
    try:
        converted = ctype(value)
    except TypeError as exc:
        raise TypeError(f"kernel parameter value {value!r} cannot be converted to {ctype.__name__}: {exc}") from None
    if isinstance(value, int) and ctype not in (ctypes.c_bool, ctypes.c_float, ctypes.c_double) and \
            not -(1 << (8 * ctypes.sizeof(ctype) - 1)) <= value < 1 << (8 * ctypes.sizeof(ctype)):
        raise error("CUDA_ERROR_INVALID_VALUE", f"kernel parameter value {value} does not fit {ctype.__name__} "
                    f"({ctypes.sizeof(ctype)} bytes)")
    return bytes(converted)


def _from_extra(kernel: Any, address: int) -> bytes:
    pointer = size_ptr = None
    slots = (ctypes.c_void_p * 2)
    for i in range(0, 64, 2):  # a longer list lacks its CU_LAUNCH_PARAM_END
        key, value = slots.from_address(address + i * _PTR)
        key = key or CU_LAUNCH_PARAM_END
        if key == CU_LAUNCH_PARAM_END:
            break
        if key == CU_LAUNCH_PARAM_BUFFER_POINTER:
            pointer = value
        elif key == CU_LAUNCH_PARAM_BUFFER_SIZE:
            size_ptr = value
        else:
            raise error("CUDA_ERROR_INVALID_VALUE", f"unknown extra launch option {key:#x}")
    else:
        raise error("CUDA_ERROR_INVALID_VALUE", "extra has no CU_LAUNCH_PARAM_END within 32 options")
    if not pointer or not size_ptr:
        raise error("CUDA_ERROR_INVALID_VALUE",
                    "extra needs both CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE")
    size = ctypes.c_size_t.from_address(size_ptr).value
    padded = -(-kernel.param_bytes // _MAX_STRUCT_ALIGN) * _MAX_STRUCT_ALIGN
    if not kernel.param_bytes <= size <= padded:
        raise error("CUDA_ERROR_INVALID_VALUE", f"kernel {kernel.name!r} has {kernel.param_bytes} bytes of parameters "
                    f"but CU_LAUNCH_PARAM_BUFFER_SIZE is {size}")
    return ctypes.string_at(pointer, kernel.param_bytes)
