"""How the uncached bytes of a file are best read: with O_DIRECT, or buffered with the kernel's readahead.

O_DIRECT moves the bytes from the drive straight into the reader's buffers, with many reads in flight; it wins where
the drive answers many requests at once: local NVMe drives, and virtio disks (the host serves several requests in
parallel: 32 reads of 2 MiB in flight ran 1.75 GB/s against 0.97 for buffered readahead, reading 1 GiB cold in
alternation on a loaded 2-vCPU VM, and varied less from round to round). Everywhere else buffered reads win or tie:
device-mapper and RAID layers, rotating disks, and file systems without a block device of their own (tmpfs, overlay,
network and FUSE file systems, where O_DIRECT is refused or emulated). The storage is found through sysfs
(``/sys/dev/block/MAJOR:MINOR``, the kernel's device path of the file's ``st_dev``), the same place ``lsblk`` reads.
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
        return True, f"O_DIRECT: on NVMe drive {name}, which answers many reads at once"
    if "/virtio" in path:
        return True, f"O_DIRECT: on virtio disk {name}, whose host answers many reads at once"
    return False, f"buffered with readahead: on block device {name} (not an NVMe drive or virtio disk)"
