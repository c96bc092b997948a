"""Compiled devices and the device registry (``Device["CPU"]``)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any, NamedTuple

from runtime_core.allocator import Allocator
from runtime_core.compiler import Compiler
from runtime_core.config import ConfigError, device_flag
from runtime_core.renderer import Renderer

__all__ = ["Compiled", "Device", "DeviceError", "DefaultOrder", "ENTRY_POINT_GROUP", "default_order"]

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "runtime_core.backends"
_BACKEND_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


class DeviceError(RuntimeError):
    """A device name that is unknown or whose backend failed to open; the message lists the available devices."""


class Compiled:
    """A backend device: allocator + renderer + compiler + runtime (Program factory) [+ graph].

    A backend subclasses this, registers the subclass in the entry-point group ``runtime_core.backends`` under its
    backend name (or with :meth:`_DeviceRegistry.register` in tests), and is constructed with the canonical device name
    (``"CPU"``, ``"CUDA:1"``, ``"DISK:/tmp/f"``; see :meth:`canonicalize`). The subclass hands itself to the pieces that
    need their device: ``super().__init__(name, MyAllocator(self), renderer, compiler, functools.partial(MyProgram,
    self))``, so ``dev.runtime(name, lib)`` builds a program bound to this device.

    ``DEFAULT_PRIORITY`` (lower is preferred; ``None`` = never picked as the default device) orders
    :func:`default_order`.
    """

    DEFAULT_PRIORITY: int | None = None
    closed: bool = False
    """True once :meth:`finalize` made the device unusable; ``Device[name]`` then opens a fresh one (a backend whose
    finalize leaves it usable keeps this False)."""

    def __init__(self, device: str, allocator: Allocator, renderer: Renderer | None, compiler: Compiler | None,
                 runtime: Callable[..., Any] | None, graph: Any = None) -> None:
        self.device, self.allocator, self.renderer, self.compiler = device, allocator, renderer, compiler
        self.runtime, self.graph = runtime, graph

    @classmethod
    def canonicalize(cls, name: str) -> str:
        """The canonical spelling of ``name`` (its backend prefix already upper-case): ``"X:0"``, ``"X:00"`` and ``"X:"``
        -> ``"X"``, ``"X:07"`` -> ``"X:7"`` (one name per ordinal, so one device object per device), any other suffix
        stays. Backends whose suffix is not an ordinal (a path, a session) override this."""
        backend, sep, rest = name.partition(":")
        if rest.isascii() and rest.isdigit():
            rest = str(int(rest))
        return backend if not sep or rest in ("", "0") else f"{backend}:{rest}"

    def synchronize(self) -> None:
        """Wait until all work queued on the device has finished."""

    def finalize(self) -> None:
        """Release device resources; the device object must not be used afterwards. Overrides set :attr:`closed`
        (as this one does), so that the registry opens a new device for the next lookup."""
        self.closed = True


class _Registered:
    """A backend added with :meth:`_DeviceRegistry.register`: quacks like an entry point."""

    def __init__(self, cls: type[Compiled]) -> None:
        self.cls = cls

    def load(self) -> type[Compiled]:
        return self.cls


class DefaultOrder(NamedTuple):
    """Backends that may become the default device, most preferred first, and those whose import failed."""

    names: list[str]
    broken: list[tuple[str, str]]
    """``(backend, reason)`` for each backend that failed to import."""


class _DeviceRegistry:
    """Opens devices by name through the ``runtime_core.backends`` entry points and caches them per canonical name."""

    def __init__(self) -> None:
        self._opened: dict[str, Compiled] = {}
        self._backends: dict[str, Any] | None = None
        self._opening = threading.RLock()  # threads opening one device at once get one object (re-entrant: a backend
        # may open another device while it opens)

    def backends(self) -> dict[str, Any]:
        """Backend name -> loader (an entry point, or a registered class's stand-in); ``.load()`` gives the class."""
        if self._backends is None:
            self._backends = {ep.name.upper(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
        return self._backends

    def backend_class(self, backend: str) -> type[Compiled]:
        """The ``Compiled`` subclass registered as ``backend`` (upper-case name, no suffix).

        Raises ``DeviceError`` when no backend has that name or its module fails to import."""
        if backend not in self.backends():
            raise DeviceError(f"unknown device {backend!r}; registered backends: {', '.join(sorted(self.backends()))}")
        try:
            return self.backends()[backend].load()  # type: ignore[no-any-return]
        except Exception as e:
            raise DeviceError(f"backend {backend} failed to import: {type(e).__name__}: {e}") from e

    def register(self, name: str, cls: type[Compiled]) -> None:
        """Add backend ``cls`` under ``name`` (e.g. ``"TOY"``; devices ``TOY``, ``TOY:1`` then open through it).

        Raises ``ValueError`` for a name that is not an upper-case identifier or is already registered, ``TypeError``
        when ``cls`` is not a ``Compiled`` subclass or its constructor cannot take the device name as its one argument.
        Use :meth:`restoring` to undo registrations (tests).
        """
        if not isinstance(name, str) or not _BACKEND_NAME.fullmatch(name):
            raise ValueError(f"backend name must be an upper-case identifier like 'TOY', got {name!r}")
        if name in self.backends():
            raise ValueError(f"backend {name!r} is already registered; pick another name, or register inside "
                             f"Device.restoring() after removing it with Device.unregister({name!r})")
        if not (isinstance(cls, type) and issubclass(cls, Compiled)):
            raise TypeError(f"backend {name!r} must be a subclass of runtime_core.Compiled, got {cls!r}")
        try:
            inspect.signature(cls).bind(name)
        except TypeError as e:
            raise TypeError(f"backend {name!r}: {cls.__qualname__}(device_name) must accept the canonical device name "
                            f"as its only required argument ({e})") from None
        self.backends()[name] = _Registered(cls)

    def unregister(self, name: str) -> None:
        """Remove backend ``name`` and forget its opened devices (without finalizing them: inside :meth:`restoring`
        they come back on exit). ``KeyError`` if not registered."""
        if name not in self.backends():
            raise KeyError(f"backend {name!r} is not registered")
        self._opened = {c: d for c, d in self._opened.items() if c.partition(":")[0] != name}
        del self.backends()[name]

    @contextlib.contextmanager
    def restoring(self) -> Iterator[_DeviceRegistry]:
        """Context manager: on exit, the registered backends and opened devices are what they were on entry; devices
        opened inside are finalized. For tests that register toy backends."""
        saved_backends, saved_opened = dict(self.backends()), dict(self._opened)
        try:
            yield self
        finally:
            for cname, dev in list(self._opened.items()):
                if saved_opened.get(cname) is not dev:
                    _finalize_quietly(dev)
            self._backends, self._opened = saved_backends, saved_opened

    def opened(self) -> list[str]:
        """Canonical names of the devices opened so far in this process, sorted."""
        return sorted(self._opened)

    def canonicalize(self, name: str) -> str:
        """The canonical spelling of a device name (``"cpu"`` -> ``"CPU"``, ``"cuda:0"`` -> ``"CUDA"``), decided by the
        backend's :meth:`Compiled.canonicalize`; the generic rule for unknown backends. ``DeviceError`` for a name that
        is not a non-empty string."""
        if not isinstance(name, str) or not name:
            raise DeviceError(f"a device name must be a non-empty string, got {name!r}")
        backend, sep, rest = name.partition(":")
        upper = f"{backend.upper()}{sep}{rest}"
        try:
            cls = self.backend_class(backend.upper())
        except DeviceError:
            return Compiled.canonicalize(upper)
        return cls.canonicalize(upper)

    def __getitem__(self, name: str) -> Compiled:
        """The device ``name`` (opened at the first use, then cached by canonical name; thread-safe: concurrent first
        uses construct it once; a finalized one, :attr:`Compiled.closed`, is opened afresh). ``DeviceError`` naming
        the reason and the available devices when it cannot open."""
        cname = self.canonicalize(name)
        if (dev := self._opened.get(cname)) is not None and not dev.closed:
            return dev
        with self._opening:
            if (dev := self._opened.get(cname)) is not None and not dev.closed:
                return dev
            cls = self.backend_class(cname.partition(":")[0])
            try:
                dev = cls(cname)  # type: ignore[call-arg]  # subclasses take the device name only (checked by register)
            except Exception as e:
                reason = str(e).rstrip(".")
                raise DeviceError(f"device {cname} failed to open: {type(e).__name__}: {reason}. "
                                  f"{self._available_hint()}") from e
            self._opened[cname] = dev
            return dev

    def probe(self, name: str) -> tuple[bool, str]:
        """``(True, "")`` if the device opens, else ``(False, reason)``; never raises."""
        try:
            self[name]
            return True, ""
        except DeviceError as e:
            return False, str(e.__cause__ or e)

    def _available_hint(self) -> str:
        return (f"registered backends: {', '.join(sorted(self.backends())) or 'none'}; opened so far: "
                f"{', '.join(self.opened()) or 'none'}; run `python -m runtime_core` to see every backend's status")

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - the field's name for it
        """The default device: the backend whose env var is true (``CPU=1``, ``CUDA=true``...; :mod:`runtime_core.config`),
        else the first of :func:`default_order` that opens. An env var that is unset, empty or false requests nothing.

        Raises ``DeviceError`` when such an env var is not a boolean (``CPU=maybe``), when two backends are requested at once,
        or when none opens.
        """
        try:
            requested = [n for n in self.backends() if device_flag(n)]
        except ConfigError as e:
            raise DeviceError(f"{e}; set it to 1 to make that backend the default device, or unset it") from None
        if len(requested) > 1:
            raise DeviceError(f"several default devices requested by env: {', '.join(requested)}; set only one")
        if requested:
            return self[requested[0]].device
        order = default_order()
        reasons = [f"{name}: {why}" for name, why in order.broken]
        for name in order.names:
            ok, why = self.probe(name)
            if ok:
                return self[name].device
            reasons.append(f"{name}: {why}")
        raise DeviceError("no device could be opened: " + "; ".join(reasons))


def default_order() -> DefaultOrder:
    """Registered backends with a ``DEFAULT_PRIORITY``, sorted by (priority, name): the order in which
    ``Device.DEFAULT`` and the harness try them. A backend that fails to import is listed in ``broken`` with the reason
    (and logged), never hiding the others."""
    ranked, broken = [], []
    for name in sorted(Device.backends()):
        try:
            prio = Device.backend_class(name).DEFAULT_PRIORITY
            if prio is not None and (isinstance(prio, bool) or not isinstance(prio, int)):
                raise DeviceError(f"backend {name}: DEFAULT_PRIORITY must be an int or None, got {prio!r}")
        except DeviceError as e:
            log.warning("%s", e)
            broken.append((name, str(e)))
            continue
        if prio is not None:
            ranked.append((prio, name))
    return DefaultOrder([n for _, n in sorted(ranked)], broken)


def _finalize_quietly(dev: Compiled) -> None:
    try:
        dev.finalize()
    except Exception as e:  # a failing finalize must not hide the test's own outcome
        log.warning("finalizing %s failed: %s", dev.device, e)


Device = _DeviceRegistry()
