"""CloudDevice: a device of another process or machine, driven over HTTP (entry point
``runtime_backends.cloud.device:CloudDevice``).

Names: ``CLOUD`` is the device served at ``$HOST``, or, without ``HOST``, an in-process server's device: ``$CLOUDDEV``,
else the first device of ``runtime_core.device.default_order()`` that opens. ``CLOUD:<DEV>`` (``CLOUD:CPU``,
``CLOUD:PYTHON``) names the remote device: the in-process server serves ``<DEV>``; with ``HOST`` the server's renderer
must target it. Environment:

* ``HOST=host:port`` -- the server (``python -m runtime_backends.cloud serve``); unset: start one in this process, on a
  free loopback port with a random token, for this device only;
* ``CLOUD_TOKEN`` -- the server's shared token, sent as ``Authorization: Bearer``;
* ``CLOUD_TIMEOUT`` (seconds, default 120) -- how long to wait for an answer; ``CLOUD_CONNECT_TIMEOUT`` (default 30) --
  how long to keep retrying to reach the server.

Kernels are rendered here with the server's renderer (``GET /renderer``, which must be one of this project's), and
their source is compiled on the server through its device's compile cache.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import weakref
from collections.abc import Sequence
from typing import Any

from runtime_backends.cloud.client import Link
from runtime_backends.cloud.protocol import ProgramExec
from runtime_backends.cloud.remote import RemoteSession
from runtime_backends.cloud.renderers import resolve_renderer
from runtime_backends.cloud.server import CloudServer
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.compiler import Compiler
from runtime_core.config import CLOUD_CONNECT_TIMEOUT, CLOUD_TIMEOUT, CLOUD_TOKEN, CLOUDDEV, HOST
from runtime_core.device import Compiled, Device, DeviceError, default_order
from runtime_core.program import check_launch
from runtime_core.sink import CopySink, HostSink

__all__ = ["CloudDevice", "CloudAllocator", "CloudProgram", "SourceCompiler"]

log = logging.getLogger(__name__)


class SourceCompiler(Compiler):
    """CLOUD's compiler: the "binary" is the UTF-8 source; the server compiles it. Not cached here."""

    def __init__(self) -> None:
        super().__init__(cachekey=None)

    def compile(self, src: str) -> bytes:
        """``src`` as UTF-8 bytes; ``TypeError`` for a non-str."""
        if not isinstance(src, str):
            raise TypeError(f"source must be a str, got {type(src).__name__}")
        return src.encode()


class CloudAllocator(LRUAllocator):
    """Buffers on the server, named by numbers (the opaque handle is the buffer number, an ``int``). Freed buffers are
    kept for reuse like any ``LRUAllocator`` (they stay allocated on the server meanwhile). No views, no zero-copy,
    no device-to-device transfer: the protocol has none. A streamed copy into a CLOUD buffer is staged in host memory.
    A copy-out goes in the same batch as the requests queued before it, which the server runs in order
    (``copyout_orders``): one round trip."""

    copyout_orders = True

    def _alloc(self, size: int, spec: BufferSpec) -> int:
        if spec.external_ptr is not None:
            raise ValueError("a CLOUD buffer cannot wrap external_ptr: that memory is in this process, the buffer is on "
                             "the server")
        return self.dev.remote.alloc(size, spec)  # type: ignore[no-any-return]

    def _free(self, opaque: int, size: int, spec: BufferSpec) -> None:
        self.dev.remote.free(opaque)

    def _copyin(self, dest: int, src: memoryview) -> None:
        self.dev.remote.copyin(dest, src)

    def _copyout(self, dest: memoryview, src: int) -> None:
        self.dev.remote.copyout(dest, src)

    def _sink(self, dest: int, size: int) -> CopySink:
        return _StagedSink(self.dev.remote, dest, size)


class _StagedSink(HostSink):
    """A streamed copy (``Buffer.copy_from`` a DISK buffer) into CLOUD buffer ``num``: the source reads straight into
    host memory, which goes to the server as one CopyIn at the end (the protocol has no partial copy-in)."""

    def __init__(self, remote: RemoteSession, num: int, size: int) -> None:
        super().__init__(memoryview(bytearray(size)))
        self.remote, self.num = remote, num

    def finish(self) -> None:
        self.remote.copyin(self.num, self.view)


class CloudProgram:
    """Kernel ``name`` of source ``lib`` loaded on the server (``dev.runtime(name, lib)``).

    Loading sends the source at once, so a compile error raises ``CompileError`` here with the server's message.
    A launch follows the ``runtime_core.program.Program`` protocol; it is queued (sent with the next batch) unless
    ``wait``. When the server told the kernel's argument counts, a launch is checked here with ``check_launch``
    (``ValueError``) before it is queued; buffers must be live buffers of this device (``ValueError``).
    """

    def __init__(self, dev: CloudDevice, name: str, lib: bytes) -> None:
        self.dev, self.name = dev, name
        self.key, self.signature = dev.remote.load_program(name, lib)
        self._release = weakref.finalize(self, dev.remote.release_program, self.key)

    def __call__(self, *bufs: int, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None:
        if self.signature is not None:
            check_launch(self.name, bufs, vals, *self.signature, global_size, local_size)
        return self.dev.remote.execute(ProgramExec(self.name, self.key[1], tuple(bufs), tuple(vals),
                                                   tuple(global_size), tuple(local_size), bool(wait)))


class CloudDevice(Compiled):
    """A device behind a CLOUD server (see the module docstring for names and environment).

    Raises (construction): ``ValueError`` for a bad ``HOST`` or ``CLOUD:CLOUD``, or when ``HOST`` serves another
    device than the one named; ``CloudConnectionError`` when the server cannot be reached in time; ``CloudError``
    when it refuses; ``RendererRefused`` when it names a renderer that is not this project's; the remote device's
    error when an in-process server cannot open it.
    """

    DEFAULT_PRIORITY = None  # only the default device when asked for: CLOUD=1

    def __init__(self, device: str = "CLOUD") -> None:
        remote_name = device.partition(":")[2] or None
        if remote_name is not None and remote_name.partition(":")[0] == "CLOUD":
            raise ValueError(f"{device}: a CLOUD device cannot stand for another CLOUD device")
        host, token = HOST.get(), CLOUD_TOKEN.get()
        server = None
        if not host:
            server = CloudServer(remote_name or _local_device(), port=0, token=token or secrets.token_hex(16)).start()
            host, token = server.address, server.token
        try:
            link = Link(host, session_id=secrets.token_hex(16), token=token, timeout_s=CLOUD_TIMEOUT.get(),
                        connect_timeout_s=CLOUD_CONNECT_TIMEOUT.get())
            renderer = resolve_renderer(_json(link.get("/renderer").body, host))
            if remote_name and server is None and renderer is not None and renderer.device \
                    and renderer.device != remote_name.partition(":")[0]:
                raise ValueError(f"{device}: the server at HOST={host} serves a {renderer.device} device, not "
                                 f"{remote_name}; open CLOUD:{renderer.device} (or plain CLOUD)")
        except BaseException:
            if server is not None:
                server.close()
            raise
        self.host, self.remote, self.server = host, RemoteSession(link), server
        runs = renderer is not None
        super().__init__(device, CloudAllocator(self), renderer, SourceCompiler() if runs else None,
                         functools.partial(CloudProgram, self) if runs else None)
        self._finalizer = weakref.finalize(self, _shutdown, self.remote, server)

    @classmethod
    def canonicalize(cls, name: str) -> str:
        """``CLOUD``, ``CLOUD:`` and ``CLOUD:0`` -> ``CLOUD``; ``CLOUD:cpu`` -> ``CLOUD:CPU`` (the remote part
        canonicalized as a device name of its own)."""
        backend, _, rest = name.partition(":")
        return backend if rest in ("", "0") else f"{backend}:{Device.canonicalize(rest)}"

    def synchronize(self) -> None:
        """Send every queued request and wait until the server has run them."""
        self.remote.synchronize()

    def finalize(self) -> None:
        """End the session (free everything held on the server) and stop the in-process server, if any; the registry
        then opens a fresh session for the next ``Device["CLOUD..."]``."""
        self._finalizer()
        self.closed = True


def _shutdown(remote: RemoteSession, server: CloudServer | None) -> None:
    remote.close(send=server is None)  # an in-process server frees the session's memory itself as it stops
    if server is not None:
        server.close()


def _local_device() -> str:
    if name := CLOUDDEV.get():
        return name
    reasons = []
    for name in default_order().names:
        ok, why = Device.probe(name)
        if ok:
            return name
        reasons.append(f"{name}: {why}")
    raise DeviceError("no local device for an in-process CLOUD server: " + "; ".join(reasons) + ". Set CLOUDDEV or HOST")


def _json(body: bytes, host: str) -> Any:
    try:
        return json.loads(body)
    except ValueError as e:
        raise ValueError(f"the CLOUD server at {host} answered GET /renderer with {body[:100]!r}, not JSON: {e}") from None
