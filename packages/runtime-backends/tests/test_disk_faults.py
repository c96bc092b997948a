"""Files that change under a DISK device: truncated by another process while being copied out, sparse on a full file
system while being copied into. Each is an exception naming the file, never a SIGBUS; the scenarios that would kill
the process run in a child Python, so a regression fails one test instead of taking the test session down."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from runtime_backends.disk.device import SPLIT_MIN
from runtime_core import Buffer, dtypes

HOST = "PYTHON"
SIGBUS_EXIT = -7  # subprocess returncode of a child killed by signal 7 (SIGBUS on x86-64 and AArch64 Linux)


def _run_child(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh Python with ``args`` as ``sys.argv[1:]``; return the JSON object it prints last.
    Fails the test, with the child's stderr, when it died (by a signal: ``SIGBUS_EXIT``) or printed nothing."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode != SIGBUS_EXIT, f"the child was killed by SIGBUS:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and proc.stdout.strip(), f"child exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


ROUNDS = 20
TRUNCATOR = """
import os, sys
path, start, done = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
fd = os.open(path, os.O_WRONLY)
while os.read(start, 1):  # a copy is starting: cut the file under it, then write it again (warm in the page cache)
    os.truncate(path, 0)
    os.pwrite(fd, data, 0)
    os.write(done, b"x")
os.truncate(path, 0)
"""

COPY_OUT_WHILE_TRUNCATED = """
    import json, os, subprocess, sys
    import numpy as np
    from runtime_core import Allocator, Buffer, Compiled, Device, dtypes
    path, truncator, rounds, into = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    class CopyOnly(Allocator):  # a backend with the four required hooks only: no sink, views or host view
        def _alloc(self, size, spec): return bytearray(size)
        def _free(self, opaque, size, spec): pass
        def _copyin(self, dest, src): dest[:src.nbytes] = src
        def _copyout(self, dest, src): dest[:] = src[:dest.nbytes]

    class CopyOnlyDevice(Compiled):
        def __init__(self, device): super().__init__(device, CopyOnly(self), None, None, None)

    Device.register("COPYONLY", CopyOnlyDevice)
    expected = np.fromfile(path, np.uint8)
    buf = Buffer(f"DISK:{path}", expected.size, dtypes.uint8).allocate()
    out = np.empty(expected.size, np.uint8)
    dest = None if into == "host" else Buffer(into, expected.size, dtypes.uint8).allocate()
    buf.copyout(out)  # the page cache is warm now
    start_r, start_w = os.pipe()
    done_r, done_w = os.pipe()
    other = subprocess.Popen([sys.executable, "-c", truncator, path, str(start_r), str(done_w)],
                             pass_fds=(start_r, done_w))
    os.close(start_r)
    os.close(done_w)
    outcomes = []
    def copy():
        try:
            if dest is None:
                buf.copyout(out)
            else:
                dest.copy_from(buf).copyout(out)
            outcomes.append(["ok", bool((out == expected).all())])
        except (OSError, ValueError) as e:
            outcomes.append([type(e).__name__, str(e)])
    for _ in range(rounds):
        os.write(start_w, b"x")
        copy()
        os.read(done_r, 1)
    os.close(start_w)
    other.wait()
    copy()  # after the last truncation: must be an error
    print(json.dumps({"outcomes": outcomes, "truncator_rc": other.returncode}))
"""


@pytest.mark.parametrize("io_uring, into", [("1", "host"), ("0", "host"), ("1", "CPU"), ("1", "COPYONLY")],
                         ids=["io_uring", "preadv", "to_CPU", "to_a_copy_only_backend"])
def test_copying_out_while_another_process_truncates_the_file_is_an_error_naming_it(make_file, monkeypatch,
                                                                                     io_uring, into):
    """As each of ``ROUNDS`` copies out of the warm file starts, another process cuts the file to 0 bytes (then writes
    it again for the next round): every copy either succeeds with the file's bytes or raises naming the file. The file
    is ``SPLIT_MIN`` bytes (128 MiB), so warm copies read it on two threads. Copies into host memory, into a CPU
    buffer (a streamed copy) and into a backend that has neither a sink nor views (staged: never through the
    mapping)."""
    nbytes = SPLIT_MIN
    path, _ = make_file(nbytes)
    monkeypatch.setenv("DISK_IO_URING", io_uring)
    result = _run_child(COPY_OUT_WHILE_TRUNCATED, path, TRUNCATOR, str(ROUNDS), into)
    assert result["truncator_rc"] == 0
    *during, last = result["outcomes"]
    assert last[0] == "ValueError" and path in last[1] and "holds 0 bytes" in last[1]
    for kind, detail in during:
        if kind == "ok":
            assert detail is True, "a copy that raised nothing returned other bytes than the file's"
        else:
            assert kind in ("OSError", "ValueError") and path in detail, (kind, detail)
    assert os.path.getsize(path) == 0


COPY_IN_ON_A_FULL_TMPFS = """
    import errno, json, os, sys
    import numpy as np
    from runtime_core import Buffer, dtypes
    path, nbytes = sys.argv[1], int(sys.argv[2])
    buf = Buffer(f"DISK:{path}", nbytes, dtypes.uint8).allocate()
    result = {}
    try:
        buf.copyin(np.full(nbytes, 7, np.uint8))
        result["error"] = None
    except OSError as e:
        result["error"], result["errno"] = str(e), e.errno
    small = 256 << 10
    buf.view(small, dtypes.uint8, 4096).copyin(np.full(small, 9, np.uint8))  # what fits is still written
    result["small"] = bool((buf.view(small, dtypes.uint8, 4096).numpy() == 9).all())
    print(json.dumps(result))
"""


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A 1 MiB tmpfs mounted on a fresh directory (unmounted after the test); skips where mounting is refused."""
    where = tmp_path / "tmpfs"
    where.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(where)], check=True,
                       capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or e
        pytest.skip(f"cannot mount a 1 MiB tmpfs here (needs root or CAP_SYS_ADMIN): {detail}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False, capture_output=True, timeout=60)


def test_copying_into_a_sparse_file_on_a_full_tmpfs_is_enospc_and_writes_nothing(small_tmpfs):
    path = small_tmpfs / "sparse.bin"
    nbytes = 4 << 20
    with open(path, "wb") as f:
        f.truncate(nbytes)  # sparse: 4 MiB of holes on a 1 MiB file system
    result = _run_child(COPY_IN_ON_A_FULL_TMPFS, str(path), str(nbytes))
    assert result["errno"] == errno.ENOSPC and str(path) in result["error"] and "nothing was written" in result["error"]
    assert result["small"]
    raw = np.fromfile(path, np.uint8)
    assert raw.size == nbytes and not raw[:4096].any() and (raw[4096:4096 + (256 << 10)] == 9).all()
    assert not raw[4096 + (256 << 10):].any()  # the failed copy left no 7 anywhere


def test_a_failed_reservation_inside_the_file_writes_nothing(make_file, disk_buffer, monkeypatch):
    path, data = make_file(1 << 20)
    buf = disk_buffer(path, 1 << 20)

    def disk_full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", disk_full)
    with pytest.raises(OSError, match=r"cannot reserve bytes \[4096, 1048576\) .*nothing was written") as raised:
        buf.view((1 << 20) - 4096, dtypes.uint8, 4096).copyin(np.zeros((1 << 20) - 4096, np.uint8))
    assert raised.value.errno == errno.ENOSPC and path in str(raised.value)
    np.testing.assert_array_equal(np.fromfile(path, np.uint8), data)


def test_a_disk_to_disk_copy_from_a_truncated_source_is_an_error_and_the_target_keeps_its_size(make_file,
                                                                                               disk_buffer):
    src_path, data = make_file(3 << 20, "src.bin")
    dst_path, _ = make_file(3 << 20, "dst.bin")
    src, dst = disk_buffer(src_path, 3 << 20), disk_buffer(dst_path, 3 << 20)
    dst.copy_from(src)
    np.testing.assert_array_equal(np.fromfile(dst_path, np.uint8), data)
    os.truncate(src_path, 1 << 20)
    with pytest.raises(ValueError, match=f"{src_path}.* holds 1048576 bytes"):
        dst.copy_from(src)
    assert os.path.getsize(dst_path) == 3 << 20


def test_a_copy_out_of_a_file_shrunk_since_allocation_names_the_file_and_the_bytes_it_holds(make_file, disk_buffer):
    path, data = make_file(2 << 20)
    buf = disk_buffer(path, 2 << 20)
    os.truncate(path, 5000)
    dest = Buffer(HOST, 2 << 20, dtypes.uint8).allocate()
    with pytest.raises(ValueError, match=f"{path}.* holds 5000 bytes: cannot read bytes \\[0, 2097152\\)"):
        dest.copy_from(buf)
    np.testing.assert_array_equal(buf.view(5000, dtypes.uint8, 0).numpy(), data[:5000])
