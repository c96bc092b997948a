"""The ``GET /renderer`` answer: which renderer the server's device uses, as JSON ``[module, class, args]``.

The server describes its device's renderer the way the reference system does (``type(r).__module__``,
``type(r).__name__`` and the constructor arguments from ``r.__reduce__()``, which a renderer whose constructor takes
arguments defines to return ``(type(r), args)``; none otherwise). The client builds the same renderer locally, so
kernels are rendered on the client and their source travels. It accepts only this project's own renderers: a
``runtime_core.Renderer`` subclass defined in a module under ``runtime_backends`` (never the cloud backend itself),
with JSON scalar arguments; nothing else is imported.

The reference's client (tinygrad 0.10.2) accepts only ``tinygrad.renderer.*`` classes, so the server answers the
reference's counterpart of its renderer (:data:`REFERENCE_RENDERERS`, a fixed table: C for CPU, CUDA C and PTX with
the device's ``sm_XY`` for CUDA) and its own description in the ``cloud-renderer`` header. A client that finds no
such header talks to the reference's server: it maps the answer back through the same table
(:func:`resolve_reference`).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

from runtime_core.renderer import Renderer

__all__ = ["RendererRefused", "describe_renderer", "resolve_renderer", "reference_description", "resolve_reference",
           "ReferenceRenderer", "REFERENCE_RENDERERS"]

_MODULE = re.compile(r"runtime_backends(\.[a-z_][a-z0-9_]*)+")
_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCALARS = (str, int, float, bool, type(None))
MAX_ARGS = 16


class RendererRefused(ValueError):
    """The server named a renderer that is not one of this project's, or described it malformed."""


def describe_renderer(renderer: Renderer | None) -> list[Any] | None:
    """``[module, class name, args]`` of ``renderer`` (``None`` for a device without one)."""
    if renderer is None:
        return None
    cls = type(renderer)
    args: list[Any] = []
    if cls.__reduce__ is not object.__reduce__:  # the renderer says how to rebuild it: (cls, args)
        reduced = renderer.__reduce__()
        if isinstance(reduced, tuple) and len(reduced) >= 2 and reduced[0] is cls:
            args = list(reduced[1])
    return [cls.__module__, cls.__name__, args]


def resolve_renderer(description: Any) -> Renderer | None:
    """The renderer a ``GET /renderer`` answer names (``None`` for JSON ``null``).

    Raises :class:`RendererRefused` for anything but ``[module, class, [scalar args...]]`` naming a ``Renderer``
    subclass defined in a ``runtime_backends`` module outside ``runtime_backends.cloud``, or when constructing it with
    those arguments fails.
    """
    if description is None:
        return None
    if not (isinstance(description, list) and len(description) == 3 and isinstance(description[2], list)):
        raise RendererRefused(f"renderer description must be [module, class, args], got {description!r:.200}")
    module, name, args = description
    if not (isinstance(module, str) and _MODULE.fullmatch(module)) or module.startswith("runtime_backends.cloud"):
        raise RendererRefused(f"renderer module {module!r:.100} is not one of this project's backends "
                              f"(runtime_backends.<backend>...); the server must run this project's server")
    if not (isinstance(name, str) and _CLASS.fullmatch(name)):
        raise RendererRefused(f"renderer class name {name!r:.100} is not an identifier")
    if len(args) > MAX_ARGS or not all(isinstance(a, _SCALARS) for a in args):
        raise RendererRefused(f"renderer arguments must be at most {MAX_ARGS} JSON scalars, got {args!r:.200}")
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError as e:
        raise RendererRefused(f"renderer module {module} cannot be imported here: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, Renderer) and cls.__module__ == module):
        raise RendererRefused(f"{module}.{name} is not a Renderer defined in {module}")
    try:
        return cls(*args)
    except Exception as e:
        raise RendererRefused(f"{module}.{name}(*{args!r}) failed: {type(e).__name__}: {e}") from e


@dataclass(frozen=True)
class ReferenceRenderer:
    """One row of the table between this project's renderers and the reference's: ``ours`` and ``theirs`` are
    ``(module, class)``; ``arch_args`` says whether the reference's constructor takes the device's ``sm_XY`` (and
    ``extra_args`` after it); ``launch_sizes`` whether the reference's device takes launch sizes (its CPU programs
    take none, so ``None`` is sent)."""

    ours: tuple[str, str]
    theirs: tuple[str, str]
    arch_args: bool
    extra_args: tuple[str, ...]
    launch_sizes: bool


REFERENCE_RENDERERS = (
    ReferenceRenderer(("runtime_backends.cpu.renderer", "CRenderer"), ("tinygrad.renderer.cstyle", "ClangRenderer"),
                      False, (), False),
    ReferenceRenderer(("runtime_backends.cuda.renderer_c", "CUDARenderer"), ("tinygrad.renderer.cstyle", "CUDARenderer"),
                      True, (), True),
    ReferenceRenderer(("runtime_backends.cuda.renderer_ptx", "PTXRenderer"), ("tinygrad.renderer.ptx", "PTXRenderer"),
                      True, ("CUDA",), True),
)
"""The reference versions served: tinygrad 0.10.2 (its ``ops_cloud`` client and server)."""


def reference_description(renderer: Renderer | None) -> list[Any] | None:
    """The reference's ``[module, class, args]`` for ``renderer`` (``None`` when the table has no counterpart)."""
    if renderer is None:
        return None
    key = (type(renderer).__module__, type(renderer).__name__)
    for row in REFERENCE_RENDERERS:
        if row.ours == key:
            args: list[Any] = []
            if row.arch_args:
                sm = getattr(getattr(renderer, "limits", None), "sm", 80)
                args = [f"sm_{sm}", *row.extra_args]
            return [*row.theirs, args]
    return None


def resolve_reference(description: Any) -> tuple[Renderer, ReferenceRenderer]:
    """This project's renderer for a reference server's answer, and its table row; :class:`RendererRefused` for a
    renderer the table does not map."""
    if not (isinstance(description, list) and len(description) == 3):
        raise RendererRefused(f"renderer description must be [module, class, args], got {description!r:.200}")
    for row in REFERENCE_RENDERERS:
        if tuple(description[:2]) == row.theirs:
            return resolve_renderer([*row.ours, []]), row  # type: ignore[return-value]  # a row names a Renderer
    known = ", ".join(".".join(row.theirs) for row in REFERENCE_RENDERERS)
    raise RendererRefused(f"the server's device renders with {description[0]}.{description[1]}, which this client "
                          f"cannot render for (it maps {known})")
