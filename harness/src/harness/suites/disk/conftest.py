"""Fixtures of the DISK suite, and the report-header line saying which read path DISK copies take here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.config import REQUIRE_IO_URING
from runtime_backends.disk.uring import Ring
from runtime_core import Buffer, Device, dtypes
from runtime_core.config import DISK_IO_URING

REQUIRE_ENV = REQUIRE_IO_URING.name
READ_PATHS = {"io_uring": "1", "preadv": "0"}  # read_path -> DISK_IO_URING


def io_uring_status() -> tuple[bool, str]:
    """Whether DISK copies can use io_uring in this process, and the reason when not (a ring is set up and closed)."""
    if DISK_IO_URING.get() is False:
        return False, f"disabled by {DISK_IO_URING.name}=0"
    try:
        Ring(2).close()
    except OSError as e:
        return False, str(e)
    return True, ""


def pytest_report_header(config: pytest.Config) -> str:
    ok, why = io_uring_status()
    required = f" ({REQUIRE_ENV}=1: the suite fails without it)" if REQUIRE_IO_URING.get() else ""
    return f"DISK read path: {'io_uring' if ok else 'preadv fallback: ' + why}{required}"


@pytest.fixture(params=list(READ_PATHS))
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``"io_uring"`` or ``"preadv"``: the path DISK copies of this test take (``DISK_IO_URING`` set accordingly).
    Where io_uring cannot be set up, its case is skipped with the reason (unless ``REQUIRE_IO_URING=1``)."""
    if request.param == "io_uring" and not REQUIRE_IO_URING.get():
        try:
            Ring(2).close()
        except OSError as e:
            pytest.skip(f"io_uring cannot be set up here: {e}")
    monkeypatch.setenv(DISK_IO_URING.name, READ_PATHS[request.param])
    return str(request.param)


@pytest.fixture
def disk_files(tmp_path: Path, rng: np.random.Generator) -> Iterator[Callable[[int], tuple[Buffer, np.ndarray]]]:
    """``make(nbytes)``: a whole-file DISK buffer over ``nbytes`` random bytes written by Python, and the bytes. Buffers
    are freed and the DISK devices finalized at teardown."""
    made: list[Buffer] = []
    with Device.restoring():
        def make(nbytes: int) -> tuple[Buffer, np.ndarray]:
            data = np.frombuffer(rng.bytes(nbytes), dtype=np.uint8)
            path = tmp_path / f"file{len(made)}.bin"
            path.write_bytes(data.tobytes())
            buf = Buffer(f"DISK:{path}", nbytes, dtypes.uint8).allocate()
            made.append(buf)
            return buf, data
        yield make
        for buf in made:
            buf.deallocate()
