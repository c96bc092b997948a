"""Bad input to ``harness.runner.run_kernel``: a TypeError/ValueError naming the kernel, before any buffer exists."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernels.elementwise import elementwise_cases
from harness.runner import run_kernel


def test_run_kernel_refuses_lists_and_unknown_read_slots():
    # a list gave AttributeError ('list' object has no attribute 'dtype'), read=[99] an IndexError
    case = next(iter(elementwise_cases()))
    arrays = case.inputs(np.random.default_rng(0))
    with pytest.raises(TypeError, match=f"kernel {case.kernel.name!r}: arrays must be numpy arrays .*got list"):
        run_kernel("PYTHON", case.kernel, [a.tolist() for a in arrays])
    with pytest.raises(ValueError, match=r"read names \[99\]"):
        run_kernel("PYTHON", case.kernel, arrays, read=[99])
