"""The io_uring ring itself: READV submissions and completions with both index-ordering implementations."""

from __future__ import annotations

import ctypes
import platform

import pytest

from runtime_backends.disk.uring import IOVec, Ring, _Ordering

pytestmark = pytest.mark.usefixtures("needs_io_uring")


def _orderings() -> list:
    out = [pytest.param(None, id="libatomic-or-default")]
    if platform.machine().lower() in ("x86_64", "amd64"):
        out.append(pytest.param(False, id="x86-tso-plain"))
    return out


@pytest.mark.parametrize("use_libatomic", _orderings())
def test_readv_requests_complete_with_their_user_data(make_file, use_libatomic):
    path, data = make_file(64 * 1024)
    ring = Ring(8, ordering=_Ordering(use_libatomic))
    try:
        with open(path, "rb") as f:
            bufs = [ctypes.create_string_buffer(4096) for _ in range(8)]
            iovs = [IOVec(ctypes.addressof(b), 4096) for b in bufs]
            for rnd in range(20):  # wraps the 8-entry rings several times
                for i in range(8):
                    ring.queue_readv(f.fileno(), iovs[i], ((rnd + i) % 16) * 4096, 1000 * rnd + i)
                ring.submit(8)
                done = []
                while len(done) < 8:
                    done += ring.completions()
                    if len(done) < 8:
                        ring.submit(1)
                assert sorted(done) == [(1000 * rnd + i, 4096) for i in range(8)]
                for i in range(8):
                    start = ((rnd + i) % 16) * 4096
                    assert bufs[i].raw == data[start:start + 4096].tobytes()
    finally:
        ring.close()


def test_a_full_submission_queue_is_an_error(make_file):
    path, _ = make_file(4096)
    ring = Ring(2)
    try:
        buf = ctypes.create_string_buffer(16)
        iov = IOVec(ctypes.addressof(buf), 16)
        with open(path, "rb") as f:
            for i in range(ring.entries):
                ring.queue_readv(f.fileno(), iov, 0, i)
            with pytest.raises(RuntimeError, match="submission queue full"):
                ring.queue_readv(f.fileno(), iov, 0, 99)
            ring.submit(ring.entries)
            assert len(ring.completions()) == ring.entries
    finally:
        ring.close()


def test_a_failed_read_reports_minus_errno(tmp_path):
    ring = Ring(2)
    try:
        buf = ctypes.create_string_buffer(16)
        ring.queue_readv(987654, IOVec(ctypes.addressof(buf), 16), 0, 7)  # not an open descriptor
        ring.submit(1)
        assert ring.completions() == [(7, -9)]  # -EBADF
    finally:
        ring.close()
