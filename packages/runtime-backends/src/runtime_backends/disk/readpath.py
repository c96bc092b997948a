"""How the uncached bytes of a file are best read: with O_DIRECT, or buffered with the kernel's readahead.

O_DIRECT moves the bytes from the drive straight into the reader's buffers; it wins where the drive outruns the
kernel's copy out of the page cache, i.e. local NVMe drives with several reads in flight. Everywhere else buffered
reads win or tie: virtual disks whose host already caches the image (virtio, Xen), device-mapper and RAID layers,
rotating disks, and file systems without a block device of their own (tmpfs, overlay, network and FUSE file systems,
where O_DIRECT is refused or emulated). The storage is found through sysfs (``/sys/dev/block/MAJOR:MINOR``, the
kernel's device path of the file's ``st_dev``), the same place ``lsblk`` reads.
"""

from __future__ import annotations

import os

__all__ = ["storage_prefers_direct"]


def storage_prefers_direct(fd: int) -> tuple[bool, str]:
    """Whether uncached reads of open file ``fd`` should use O_DIRECT, and why, in words (see the module docstring).
    Never raises for a file that exists: unknown storage reads buffered."""
    dev = os.fstat(fd).st_dev
    sysfs = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    try:
        path = os.path.realpath(sysfs, strict=True)
    except OSError:
        return False, "buffered with readahead: the file system has no block device of its own (tmpfs, overlay, network)"
    name = os.path.basename(path)
    if "/nvme" in path:
        return True, f"O_DIRECT: on NVMe drive {name}, which outruns a copy out of the page cache"
    return False, f"buffered with readahead: on block device {name} (not a local NVMe drive)"
