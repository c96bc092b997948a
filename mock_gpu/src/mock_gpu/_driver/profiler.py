"""Profiler control (CUDA driver API 6.38 "Profiler Control"): accepted, with nothing to profile."""

from __future__ import annotations

from .system import api, current_ctx


@api(0)
def cuProfilerStart() -> tuple:
    """cuProfilerStart(): no effect (there is no profiler attached to the emulator)."""
    current_ctx()
    return ()


@api(0)
def cuProfilerStop() -> tuple:
    """cuProfilerStop(): no effect."""
    current_ctx()
    return ()
