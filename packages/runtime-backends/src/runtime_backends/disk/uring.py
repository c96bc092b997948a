"""An io_uring instance driven through raw system calls (ctypes): setup, READV submissions, completions.

Why raw syscalls and not a binding: the DISK backend needs three calls (``io_uring_setup``, ``io_uring_enter``,
``mmap``) and one opcode, the ABI is stable since Linux 5.1, and ctypes needs no compiler, wheel or liburing on the
machine, so the ring and its fallback behave the same wherever Python runs. The layouts below are those of
``include/uapi/linux/io_uring.h``; the procedure is io_uring_setup(2), io_uring_enter(2) and io_uring(7).

Memory ordering (io_uring(7), "the application must ..."): the kernel reads the SQ tail with a load-acquire and writes
the CQ tail with a store-release. So an SQE and its ``array`` slot are written *before* the SQ tail is stored with
release semantics, the CQ tail is loaded with acquire semantics *before* the CQEs are read, and the CQ head is stored
with release semantics only after they have been read (else the kernel may overwrite an entry being read). The
acquire/release operations come from libatomic (``__atomic_load_4``/``__atomic_store_4``), on any architecture; where
libatomic is missing, x86 (whose TSO model gives plain aligned loads acquire and plain stores release semantics) uses
plain accesses, and other architectures refuse to set up a ring (the caller then falls back to ``preadv``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from collections.abc import Callable
from typing import Any

__all__ = ["Ring", "IOVec", "setup_error_reason"]

NR_IO_URING_SETUP, NR_IO_URING_ENTER = 425, 426  # one number on every architecture since 5.1 (alpha aside)
IORING_OFF_SQ_RING, IORING_OFF_CQ_RING, IORING_OFF_SQES = 0, 0x8000000, 0x10000000
IORING_ENTER_GETEVENTS = 1
IORING_OP_READV = 1
_PROT_RW, _MAP_SHARED, _MAP_POPULATE = 0x3, 0x01, 0x8000
_MAP_FAILED = ctypes.c_void_p(-1).value
_U32 = 0xFFFFFFFF
_ATOMIC_ACQUIRE, _ATOMIC_RELEASE = 2, 3  # __ATOMIC_ACQUIRE, __ATOMIC_RELEASE
_X86 = ("x86_64", "amd64", "i386", "i686")

u8, u16, u32, u64, s32 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32


class _SQRingOffsets(ctypes.Structure):
    _fields_ = [("head", u32), ("tail", u32), ("ring_mask", u32), ("ring_entries", u32), ("flags", u32),
                ("dropped", u32), ("array", u32), ("resv1", u32), ("user_addr", u64)]


class _CQRingOffsets(ctypes.Structure):
    _fields_ = [("head", u32), ("tail", u32), ("ring_mask", u32), ("ring_entries", u32), ("overflow", u32),
                ("cqes", u32), ("flags", u32), ("resv1", u32), ("user_addr", u64)]


class _Params(ctypes.Structure):
    _fields_ = [("sq_entries", u32), ("cq_entries", u32), ("flags", u32), ("sq_thread_cpu", u32),
                ("sq_thread_idle", u32), ("features", u32), ("wq_fd", u32), ("resv", u32 * 3),
                ("sq_off", _SQRingOffsets), ("cq_off", _CQRingOffsets)]


class _SQE(ctypes.Structure):
    _fields_ = [("opcode", u8), ("flags", u8), ("ioprio", u16), ("fd", s32), ("off", u64), ("addr", u64),
                ("len", u32), ("rw_flags", u32), ("user_data", u64), ("buf_index", u16), ("personality", u16),
                ("splice_fd_in", s32), ("addr3", u64), ("pad", u64)]


class _CQE(ctypes.Structure):
    _fields_ = [("user_data", u64), ("res", s32), ("flags", u32)]


class IOVec(ctypes.Structure):
    """``struct iovec``: ``base`` address and ``len`` bytes of one destination range."""

    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Libc:
    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.syscall = lib.syscall
        self.syscall.restype = ctypes.c_long
        self.mmap = lib.mmap
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self.mmap.restype = ctypes.c_void_p
        self.munmap = lib.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.munmap.restype = ctypes.c_int


class _Ordering:
    """Acquire loads and release stores of 32-bit ring indices (see the module docstring)."""

    def __init__(self, use_libatomic: bool | None = None) -> None:
        path = ctypes.util.find_library("atomic") if use_libatomic is not False else None
        if path is not None:
            lib = ctypes.CDLL(path)
            load, store = getattr(lib, "__atomic_load_4"), getattr(lib, "__atomic_store_4")  # no name mangling
            load.argtypes, load.restype = [ctypes.c_void_p, ctypes.c_int], u32
            store.argtypes, store.restype = [ctypes.c_void_p, u32, ctypes.c_int], None
            self.load_acquire: Callable[[int], int] = lambda addr: load(addr, _ATOMIC_ACQUIRE)
            self.store_release: Callable[[int, int], None] = lambda addr, v: store(addr, v, _ATOMIC_RELEASE)
            self.kind = "libatomic"
        elif platform.machine().lower() in _X86:
            self.load_acquire = lambda addr: u32.from_address(addr).value
            self.store_release = _plain_store
            self.kind = "x86-tso"
        else:
            raise OSError(errno.ENOTSUP, f"no acquire/release atomics for {platform.machine()}: install libatomic "
                                         f"(the gcc runtime) to use io_uring")


def _plain_store(addr: int, value: int) -> None:
    u32.from_address(addr).value = value


class Ring:
    """One io_uring instance with ``entries`` submission slots (io_uring_setup(2)) that reads with ``IORING_OP_READV``.

    Not thread-safe: its owner serializes use (the DISK device holds its lock). ``queue_readv`` fills SQEs,
    ``submit(wait_nr)`` hands them to the kernel and waits for ``wait_nr`` completions, ``completions()`` takes the
    finished ``(user_data, res)`` pairs, in the kernel's order (not submission order). ``close`` unmaps and closes it.

    Raises ``OSError`` from setup with the errno of the failure (``EPERM`` from a seccomp filter or the
    ``kernel.io_uring_disabled`` sysctl, ``ENOSYS`` on kernels without io_uring, ``ENOMEM`` when the locked-memory
    limit is too low on kernels before 5.12); :func:`setup_error_reason` words it.
    """

    def __init__(self, entries: int = 64, *, setup: Callable[[int, Any], int] | None = None,
                 ordering: _Ordering | None = None) -> None:
        self._libc = _Libc()
        self._order = ordering or _Ordering()
        p = _Params()
        fd = (setup or self._setup)(entries, p)
        self.fd, self._maps = fd, list[tuple[int, int]]()
        try:
            sq = self._map(p.sq_off.array + p.sq_entries * 4, IORING_OFF_SQ_RING)
            cq = self._map(p.cq_off.cqes + p.cq_entries * ctypes.sizeof(_CQE), IORING_OFF_CQ_RING)
            sqes = self._map(p.sq_entries * ctypes.sizeof(_SQE), IORING_OFF_SQES)
        except OSError:
            self.close()
            raise
        self.entries = p.sq_entries
        self._sq_head, self._sq_tail = sq + p.sq_off.head, sq + p.sq_off.tail
        self._sq_mask = u32.from_address(sq + p.sq_off.ring_mask).value
        self._sq_array = (u32 * p.sq_entries).from_address(sq + p.sq_off.array)
        self._sqes = (_SQE * p.sq_entries).from_address(sqes)
        self._cq_head, self._cq_tail = cq + p.cq_off.head, cq + p.cq_off.tail
        self._cq_mask = u32.from_address(cq + p.cq_off.ring_mask).value
        self._cqes = (_CQE * p.cq_entries).from_address(cq + p.cq_off.cqes)
        self._tail = self._order.load_acquire(self._sq_tail)  # only this process writes the SQ tail and CQ head
        self._head = self._order.load_acquire(self._cq_head)
        self._unsubmitted = 0

    def _setup(self, entries: int, params: _Params) -> int:
        fd = self._libc.syscall(ctypes.c_long(NR_IO_URING_SETUP), ctypes.c_long(entries), ctypes.byref(params))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"io_uring_setup failed: {setup_error_reason(err)}")
        return int(fd)

    def _map(self, length: int, offset: int) -> int:
        addr = self._libc.mmap(None, length, _PROT_RW, _MAP_SHARED | _MAP_POPULATE, self.fd, offset)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of the io_uring ring failed: {os.strerror(err)}")
        self._maps.append((addr, length))
        return int(addr)

    def queue_readv(self, fd: int, iov: IOVec, offset: int, user_data: int) -> None:
        """Fill one SQE: read into the single range ``iov`` from file offset ``offset`` (bytes) of ``fd``. The iovec
        must stay alive until the completion of ``user_data`` has been taken. ``RuntimeError`` when the SQ is full."""
        if (self._tail - self._order.load_acquire(self._sq_head)) & _U32 >= self.entries:
            raise RuntimeError(f"io_uring submission queue full ({self.entries} entries)")
        index = self._tail & self._sq_mask
        sqe = self._sqes[index]
        ctypes.memset(ctypes.addressof(sqe), 0, ctypes.sizeof(_SQE))
        sqe.opcode, sqe.fd, sqe.off = IORING_OP_READV, fd, offset
        sqe.addr, sqe.len, sqe.user_data = ctypes.addressof(iov), 1, user_data
        self._sq_array[index] = index
        self._tail = (self._tail + 1) & _U32
        self._order.store_release(self._sq_tail, self._tail)
        self._unsubmitted += 1

    def submit(self, wait_nr: int) -> None:
        """io_uring_enter(2): submit the queued SQEs and wait until ``wait_nr`` completions are available.

        Returns early, without raising, when the kernel answers ``EAGAIN``/``EBUSY`` (completions must be taken
        first); retries on ``EINTR``. Raises ``OSError`` for any other failure.
        """
        while True:
            ret = self._libc.syscall(ctypes.c_long(NR_IO_URING_ENTER), ctypes.c_long(self.fd),
                                     ctypes.c_long(self._unsubmitted), ctypes.c_long(wait_nr),
                                     ctypes.c_long(IORING_ENTER_GETEVENTS), None, ctypes.c_long(0))
            if ret >= 0:
                self._unsubmitted -= min(int(ret), self._unsubmitted)
                return
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            if err in (errno.EAGAIN, errno.EBUSY):
                return
            raise OSError(err, f"io_uring_enter failed: {os.strerror(err)}")

    def completions(self) -> list[tuple[int, int]]:
        """The finished requests as ``(user_data, res)``: ``res`` is bytes read, or ``-errno``."""
        tail = self._order.load_acquire(self._cq_tail)
        out = []
        while self._head != tail:
            cqe = self._cqes[self._head & self._cq_mask]
            out.append((int(cqe.user_data), int(cqe.res)))
            self._head = (self._head + 1) & _U32
        if out:
            self._order.store_release(self._cq_head, self._head)
        return out

    def close(self) -> None:
        """Unmap the rings and close the ring's file descriptor (the kernel cancels what is still in flight)."""
        for addr, length in self._maps:
            self._libc.munmap(addr, length)
        self._maps = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def setup_error_reason(err: int) -> str:
    """Why io_uring_setup(2) failed with errno ``err``, in words, with what to do."""
    if err == errno.EPERM:
        sysctl = _read_sysctl()
        if sysctl == "2":
            return "EPERM: io_uring is disabled by the sysctl kernel.io_uring_disabled=2"
        if sysctl == "1":
            return "EPERM: kernel.io_uring_disabled=1 restricts io_uring to members of kernel.io_uring_group"
        return ("EPERM: blocked by a seccomp profile (Docker Engine 25+ blocks io_uring by default; run with "
                "--security-opt seccomp=docker/io_uring/seccomp.json)")
    if err == errno.ENOSYS:
        return "ENOSYS: this kernel has no io_uring (Linux 5.1+ needed) or a seccomp filter hides it"
    if err == errno.ENOMEM:
        return "ENOMEM: the locked-memory limit is too low for the ring (raise `ulimit -l`, e.g. --ulimit memlock=-1)"
    return f"{errno.errorcode.get(err, err)}: {os.strerror(err)}"


def _read_sysctl() -> str | None:
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as f:
            return f.read().strip()
    except OSError:
        return None
