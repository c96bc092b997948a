"""Shows which read path streamed DISK copies take in this process and what the DISK backend logs about it: writes a
file, makes three copies of it out of a ``DISK:`` buffer, each after dropping the file's pages from the page cache,
checks the bytes, and prints one line per copy (``copy N: read path P; io_uring error: E``) with the backend's log
lines (``log: LEVEL MESSAGE``) on stdout.

`ci/images.py` runs it in the io_uring image under the engine's default seccomp profile with ``DISK_IO_URING=1`` (without
it, buffered reads take preadv by design and io_uring is never tried): the copies that read the file
(``page_cache``: the kernel kept the pages despite the drop) must take the ``preadv`` fallback, and its reason must be
logged exactly once (runtime_backends.disk.device logs it once per process). Exit status 1 when a copy returned wrong
bytes."""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

from runtime_backends.disk.device import STREAM_MIN
from runtime_core import Buffer, dtypes

COPIES = 3
NBYTES = 4 * STREAM_MIN  # streamed: read through the reader (io_uring or preadv), not memcpy'd from the mapping


def main() -> int:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="log: %(levelname)s %(message)s")
    data = np.random.default_rng(0).integers(0, 256, NBYTES, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.bin"
        path.write_bytes(data.tobytes())
        buf = Buffer(f"DISK:{path}", NBYTES, dtypes.uint8).allocate()
        try:
            for n in range(1, COPIES + 1):
                buf.dev.drop_page_cache()
                out = np.empty(NBYTES, np.uint8)
                buf.copyout(out)
                print(f"copy {n}: read path {buf.dev.read_path}; io_uring error: {buf.dev.io_uring_error}", flush=True)
                if not np.array_equal(out, data):
                    print(f"copy {n}: the bytes differ from the file's", flush=True)
                    return 1
        finally:
            buf.deallocate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
