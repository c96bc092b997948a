"""Fixtures of the mock_gpu tests: a fresh emulated system per test configured through the environment, and a
seeded random generator per test (data independent of test order and of how xdist splits the tests)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from _driver_util import check

import mock_gpu
from mock_gpu import driver as cu
from mock_gpu.config import SETTINGS


@pytest.fixture
def make_system(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Start a fresh system with the given MOCKGPU_* variables; returns the current (primary) context of device 0."""

    def start(**env: str) -> Any:
        for var in SETTINGS:
            monkeypatch.delenv(var.name, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(f"MOCKGPU_{key.upper()}", value)
        mock_gpu.reset()
        check(cu.cuInit(0))
        ctx = check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0))))
        check(cu.cuCtxSetCurrent(ctx))
        return ctx

    yield start
    mock_gpu.reset()


@pytest.fixture
def ctx(make_system: Callable[..., Any]) -> Any:
    """A default system (1 device, sm_90, 16 GiB) with device 0's primary context current."""
    return make_system()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A numpy generator seeded from the test's own id: the same data on every run, whatever runs before it."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
