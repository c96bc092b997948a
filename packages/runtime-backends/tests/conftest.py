"""Fixtures of the backend tests: DISK files and buffers that are cleaned up after each test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.config import REQUIRE_IO_URING
from runtime_backends.disk.uring import Ring
from runtime_core import Buffer, Device, dtypes
from runtime_core.dtype import DType

MakeFile = Callable[..., tuple[str, np.ndarray]]
DiskBuf = Callable[..., Buffer]


@pytest.fixture
def make_file(tmp_path: Path, rng: np.random.Generator) -> MakeFile:
    """``make_file(nbytes, name="data.bin")`` writes ``nbytes`` random bytes; returns the path and the bytes."""

    def make(nbytes: int, name: str = "data.bin") -> tuple[str, np.ndarray]:
        data = np.frombuffer(rng.bytes(nbytes), dtype=np.uint8)
        path = tmp_path / name
        path.write_bytes(data.tobytes())
        return str(path), data
    return make


@pytest.fixture
def disk_buffer() -> Iterator[DiskBuf]:
    """``disk_buffer(device_or_path, nbytes, dtype=uint8)``: an allocated DISK buffer (``DISK:`` is prepended to a
    path). At teardown the buffers are freed and the devices opened meanwhile finalized (their rings closed)."""
    made: list[Buffer] = []
    with Device.restoring():
        def make(where: str | os.PathLike[str], nbytes: int, dtype: DType = dtypes.uint8) -> Buffer:
            name = os.fspath(where)
            device = name if name.upper().startswith("DISK:") else f"DISK:{name}"
            buf = Buffer(device, nbytes // dtype.itemsize, dtype).allocate()
            made.append(buf)
            return buf
        yield make
        for buf in made:
            if buf.is_allocated:
                buf.deallocate()


@pytest.fixture
def needs_io_uring() -> None:
    """Skips the test, with the reason, where io_uring cannot be set up (a seccomp profile such as a container
    engine's default, ``kernel.io_uring_disabled``, a kernel before 5.1); with ``REQUIRE_IO_URING=1`` (the io_uring
    image) that fails instead. The fallback's own tests need no ring and run everywhere."""
    try:
        Ring(2).close()
    except OSError as e:
        if REQUIRE_IO_URING.get():
            pytest.fail(f"REQUIRE_IO_URING=1 but io_uring cannot be set up: {e}")
        pytest.skip(f"io_uring cannot be set up here: {e}")
