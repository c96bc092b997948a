"""The PTX ALU: one module per instruction family (``integer``, ``bits``, ``floating``, ``compare``, ``convert``,
``video``) behind one entry point, :func:`supports` / :func:`execute` of an :class:`AluSpec` (see ``dispatch``)."""

from __future__ import annotations

from .dispatch import execute, supports
from .spec import AluSpec, UnsupportedInstruction

__all__ = ["AluSpec", "UnsupportedInstruction", "execute", "supports"]
