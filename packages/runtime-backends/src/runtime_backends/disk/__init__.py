"""The DISK backend: files and POSIX shared memory as devices, read fast through io_uring.

``Device["DISK:/path/to/file"]`` and ``Device["DISK:shm:name"]`` (:class:`DiskDevice`); buffers are byte ranges of the
file (:mod:`.allocator`), opened, grown and mapped as :mod:`.files` documents, read by :mod:`.readers` through an
io_uring ring (:mod:`.uring`) or ``preadv``. :mod:`.formats` finds the tensors of ``.npy`` and safetensors files as
views of a DISK buffer.
"""

from runtime_backends.disk.device import DiskDevice

__all__ = ["DiskDevice"]
