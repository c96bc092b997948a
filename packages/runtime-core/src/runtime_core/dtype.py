"""Scalar data types of the runtime and their numpy mapping."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["DType", "dtypes"]


@dataclass(frozen=True)
class DType:
    """A scalar element type.

    Attributes:
        name: canonical name, e.g. ``"float32"``.
        itemsize: size of one element in bytes.
        kind: ``"bool"``, ``"int"``, ``"uint"`` or ``"float"``.
        cname: the C spelling used by C-like renderers (half and bfloat16 are stored as 16-bit integers there).
    """

    name: str
    itemsize: int
    kind: str
    cname: str

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def np(self) -> np.dtype:
        """The numpy dtype with the same size and meaning (``ml_dtypes.bfloat16`` for bfloat16)."""
        return _numpy_dtype(self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    @property
    def min(self) -> int | float:
        """Smallest finite value."""
        return _info(self).min

    @property
    def max(self) -> int | float:
        """Largest finite value."""
        return _info(self).max


def _info(dt: DType):
    if dt.kind == "bool":
        return _BoolInfo
    return np.finfo(dt.np) if dt.is_float else np.iinfo(dt.np)


class _BoolInfo:
    min, max = 0, 1


class dtypes:  # noqa: N801 - the field's conventional lowercase namespace
    """Namespace of every supported :class:`DType`; ``dtypes.all`` lists them in a stable order."""

    bool = DType("bool", 1, "bool", "_Bool")
    int8 = DType("int8", 1, "int", "signed char")
    int16 = DType("int16", 2, "int", "short")
    int32 = DType("int32", 4, "int", "int")
    int64 = DType("int64", 8, "int", "long long")
    uint8 = DType("uint8", 1, "uint", "unsigned char")
    uint16 = DType("uint16", 2, "uint", "unsigned short")
    uint32 = DType("uint32", 4, "uint", "unsigned int")
    uint64 = DType("uint64", 8, "uint", "unsigned long long")
    float16 = DType("float16", 2, "float", "half")
    bfloat16 = DType("bfloat16", 2, "float", "bfloat16")
    float32 = DType("float32", 4, "float", "float")
    float64 = DType("float64", 8, "float", "double")

    all: tuple[DType, ...] = ()
    ints: tuple[DType, ...] = ()
    floats: tuple[DType, ...] = ()

    @staticmethod
    def from_name(name: str) -> DType:
        """The dtype named ``name`` (e.g. ``"float32"``); ``ValueError`` listing the valid names otherwise."""
        for dt in dtypes.all:
            if dt.name == name:
                return dt
        raise ValueError(f"unknown dtype {name!r}; valid dtypes: {', '.join(d.name for d in dtypes.all)}")

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DType:
        """The runtime dtype of a numpy dtype; ``ValueError`` for one without an equivalent (e.g. complex64)."""
        npdt = np.dtype(dtype)
        for dt in dtypes.all:
            if dt.name == npdt.name and dt.np == npdt:  # by name first: bfloat16's numpy type is loaded on first use
                return dt
        raise ValueError(f"numpy dtype {npdt} has no runtime dtype; supported: {', '.join(d.name for d in dtypes.all)}")


dtypes.all = (dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
              dtypes.uint32, dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
dtypes.ints = tuple(d for d in dtypes.all if d.is_int)
dtypes.floats = tuple(d for d in dtypes.all if d.is_float)

@functools.cache
def _numpy_dtype(name: str) -> np.dtype:
    """numpy's dtype of ``name``. ml_dtypes (bfloat16) is imported on first use, not with this module: it registers
    dozens of numpy types, which took 0.5 s of every process's start here (each benchmark worker, each CLOUD
    server)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
