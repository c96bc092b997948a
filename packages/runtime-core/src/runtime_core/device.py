"""Compiled devices and the device registry (``Device["CPU"]``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from runtime_core.allocator import Allocator
from runtime_core.compiler import Compiler
from runtime_core.renderer import Renderer

__all__ = ["Compiled", "Device", "DeviceError", "ENTRY_POINT_GROUP"]

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "runtime_core.backends"


class DeviceError(RuntimeError):
    """A device name that is unknown or whose backend failed to open; the message lists the available devices."""


class Compiled:
    """A backend device: allocator + renderer + compiler + runtime (Program factory) [+ graph].

    Subclasses are registered in the entry-point group ``runtime_core.backends`` under their device name and constructed
    with the canonical device name (e.g. ``"CPU"``, ``"CUDA:1"``, ``"DISK:/tmp/f"``). A class attribute
    ``DEFAULT_PRIORITY`` (lower is preferred; ``None`` = never picked as the default device) orders the default search.
    """

    DEFAULT_PRIORITY: int | None = None

    def __init__(self, device: str, allocator: Allocator, renderer: Renderer | None, compiler: Compiler | None,
                 runtime: Callable[..., Any] | None, graph: Any = None) -> None:
        self.device, self.allocator, self.renderer, self.compiler = device, allocator, renderer, compiler
        self.runtime, self.graph = runtime, graph

    def synchronize(self) -> None:
        """Wait until all work queued on the device has finished."""

    def finalize(self) -> None:
        """Release device resources; the device object must not be used afterwards."""


def _canonical(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise DeviceError(f"a device name must be a non-empty string, got {name!r}")
    backend, sep, rest = name.partition(":")
    backend = backend.upper()
    if backend in ("DISK", "CLOUD") and sep:
        return f"{backend}:{rest}"
    if sep and rest in ("0", ""):
        return backend
    return f"{backend}:{rest}" if sep else backend


class _DeviceRegistry:
    """Opens devices by name through the ``runtime_core.backends`` entry points and caches them per canonical name."""

    def __init__(self) -> None:
        self._opened: dict[str, Compiled] = {}
        self._backends: dict[str, Any] | None = None

    def backends(self) -> dict[str, Any]:
        """Backend name -> entry point, from the installed distributions."""
        if self._backends is None:
            self._backends = {ep.name.upper(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
        return self._backends

    def canonicalize(self, name: str) -> str:
        """The canonical spelling of a device name: ``"cpu"`` -> ``"CPU"``, ``"cuda:0"`` -> ``"CUDA"``."""
        return _canonical(name)

    def __getitem__(self, name: str) -> Compiled:
        cname = _canonical(name)
        if cname in self._opened:
            return self._opened[cname]
        backend = cname.partition(":")[0]
        if backend not in self.backends():
            raise DeviceError(f"unknown device {name!r}; registered backends: {', '.join(sorted(self.backends()))}")
        try:
            dev = self.backends()[backend].load()(cname)
        except Exception as e:
            reason = str(e).rstrip(".")
            raise DeviceError(f"device {cname} failed to open: {type(e).__name__}: {reason}. {self._available_hint()}") from e
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
        opened = sorted(self._opened)
        return (f"registered backends: {', '.join(sorted(self.backends())) or 'none'}; opened so far: "
                f"{', '.join(opened) or 'none'}; run `python -m runtime_core` to see every backend's status")

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - the field's name for it
        """The default device: the backend whose env var is a non-zero int (``CPU=1``, ``CUDA=1``...), else the first
        that opens. An env var that is unset, empty or ``0`` requests nothing.

        Raises ``DeviceError`` when such an env var is not an int (``CPU=yes``), when two backends are requested at once,
        or when none opens.
        """
        requested = [n for n in self.backends() if _env_flag(n)]
        if len(requested) > 1:
            raise DeviceError(f"several default devices requested by env: {', '.join(requested)}; set only one")
        if requested:
            return self[requested[0]].device
        reasons = []
        for name in self._default_candidates():
            ok, why = self.probe(name)
            if ok:
                return self[name].device
            reasons.append(f"{name}: {why}")
        raise DeviceError("no device could be opened: " + "; ".join(reasons))

    def _default_candidates(self) -> list[str]:
        prio = []
        for name, ep in self.backends().items():
            try:
                p = getattr(ep.load(), "DEFAULT_PRIORITY", None)
            except Exception as e:  # a broken backend must not hide the working ones
                log.warning("backend %s failed to import: %s", name, e)
                continue
            if p is not None:
                prio.append((p, name))
        return [n for _, n in sorted(prio)]


def _env_flag(name: str) -> bool:
    text = os.environ.get(name, "").strip()
    if text in ("", "0"):
        return False
    try:
        return int(text) != 0
    except ValueError:
        raise DeviceError(f"env {name}={text!r} is not an int: set {name}=1 to make {name} the default device, or "
                          f"unset it (or set it to 0)") from None


Device = _DeviceRegistry()
