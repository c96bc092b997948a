"""Coredump attributes (CUDA driver API 6.37 "Coredump Attributes Control API"): recorded and returned; the emulator
writes no GPU core dumps (its fault reports are on the ``mock_gpu`` logger)."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUcoredumpSettings

from .results import error
from .system import api, system

_S = CUcoredumpSettings
_TEXT = {int(_S.CU_COREDUMP_FILE), int(_S.CU_COREDUMP_PIPE)}
_FLAG = {int(_S.CU_COREDUMP_ENABLE_ON_EXCEPTION), int(_S.CU_COREDUMP_TRIGGER_HOST), int(_S.CU_COREDUMP_LIGHTWEIGHT),
         int(_S.CU_COREDUMP_ENABLE_USER_TRIGGER)}


def _key(attrib: Any) -> int:
    key = int(_S(int(attrib)))
    if key not in _TEXT | _FLAG | {int(_S.CU_COREDUMP_GENERATION_FLAGS)}:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{_S(key).name} is not a coredump setting")
    return key


def _size(key: int, value: Any) -> int:
    """The bytes of the setting's C value: a bool, a NUL-terminated path or a 32-bit flag word."""
    return len(value) + 1 if key in _TEXT else 1 if key in _FLAG else 4


@api(1)
def cuCoredumpSetAttributeGlobal(attrib: Any, value: Any) -> tuple:
    """cuCoredumpSetAttributeGlobal(attrib, value) -> (CUresult, size): record a setting (bool flags, bytes paths,
    int generation flags); ``size`` is its C size, as cuda-python 13 returns it."""
    key = _key(attrib)
    stored = bytes(value) if key in _TEXT else bool(value) if key in _FLAG else int(value)
    system().coredump[key] = stored
    return (_size(key, stored),)


@api(2)
def cuCoredumpGetAttributeGlobal(attrib: Any) -> tuple:
    """cuCoredumpGetAttributeGlobal(attrib) -> (CUresult, value, size): what was set (False, b"" or 0 by default)."""
    key = _key(attrib)
    default: Any = b"" if key in _TEXT else False if key in _FLAG else 0
    value = system().coredump.get(key, default)
    return (value, _size(key, value))
