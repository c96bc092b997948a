"""Buffer.numpy(shape): the caller's shape, checked like numpy.reshape, with the buffer's values."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_core import Buffer

DATA = np.arange(48, dtype=np.float32)


@pytest.mark.parametrize("shape, expected", [(None, (48,)), (48, (48,)), ((6, 8), (6, 8)), ([2, -1, 4], (2, 6, 4)),
                                             ((-1,), (48,)), (np.int64(48), (48,))])
def test_numpy_gives_the_shape_asked_for(shape, expected):
    out = Buffer.from_numpy("PYTHON", DATA).numpy(shape)
    assert out.shape == expected and out.dtype == np.float32
    np.testing.assert_array_equal(out, DATA.reshape(expected))


@pytest.mark.parametrize("shape", [(5, 10), (-1, 5), (-1, -1), (0, -1), (-2, -24), 47])
def test_numpy_refuses_a_shape_of_another_size(shape):
    with pytest.raises(ValueError, match="does not hold the buffer's 48 elements"):
        Buffer.from_numpy("PYTHON", DATA).numpy(shape)


def test_numpy_shape_must_be_ints():
    with pytest.raises(TypeError, match="sequence of ints"):
        Buffer.from_numpy("PYTHON", DATA).numpy((6.0, 8))
