"""Every kernel-library case on every selected backend against its numpy reference, and launch validation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernels import all_cases, large_index_case, var_cases
from harness.runner import check_case, check_large_index, load_program, unsupported_reason
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import dtypes

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_case(device: str, case, rng: np.random.Generator) -> None:
    if (why := unsupported_reason(device, case)) is not None:
        pytest.skip(why)
    check_case(device, case, rng)


@pytest.mark.parametrize("wrong", ["buffers", "vals"])
def test_launch_with_wrong_counts_raises_and_leaves_buffers(device: str, wrong: str) -> None:
    kernel = next(c.kernel for c in var_cases() if c.kernel.name == "var_axpb_float32")  # 2 buffers, 1 var
    prg = load_program(device, kernel)
    a = Buffer.from_numpy(device, np.arange(128, dtype=np.float32))
    out = Buffer.from_numpy(device, np.full(128, 7, dtype=np.float32))
    try:
        args, vals, match = ((a.opaque,), (100,), "2 buffers, got 1") if wrong == "buffers" else \
            ((a.opaque, out.opaque), (), "1 int vals, got 0")
        with pytest.raises(ValueError, match=match):
            prg(*args, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=vals)
        np.testing.assert_array_equal(out.numpy(), np.full(128, 7, dtype=np.float32))
    finally:
        a.deallocate()
        out.deallocate()


@pytest.mark.slow
@pytest.mark.bigmem
def test_large_index_above_2gib(device: str, rng: np.random.Generator) -> None:
    if not Device[device].allocator.capabilities.views:
        pytest.skip(f"{device} has no buffer views at an offset, which the windowed check needs")
    if dtypes.uint8 not in (Device[device].renderer.dtypes if Device[device].renderer else ()):
        pytest.skip(f"{device} cannot run uint8 kernels")
    check_large_index(device, large_index_case(), rng)
