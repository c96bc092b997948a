import ml_dtypes
import numpy as np
import pytest

from runtime_core import dtypes


def test_every_dtype_maps_to_numpy_with_its_itemsize():
    for dt in dtypes.all:
        assert dt.np.itemsize == dt.itemsize, dt
        assert dtypes.from_numpy(dt.np) is dt
        assert dtypes.from_name(dt.name) is dt
    assert dtypes.bfloat16.np == np.dtype(ml_dtypes.bfloat16)


def test_ranges():
    assert (dtypes.int8.min, dtypes.int8.max) == (-128, 127)
    assert dtypes.uint64.max == 2**64 - 1
    assert dtypes.float16.max == 65504.0


def test_unknown_names_list_valid_ones():
    with pytest.raises(ValueError, match="float32"):
        dtypes.from_name("float128")
    with pytest.raises(ValueError, match="no runtime dtype"):
        dtypes.from_numpy(np.complex64)
