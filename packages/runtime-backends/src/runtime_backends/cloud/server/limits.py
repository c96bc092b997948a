"""The bounds a CLOUD server enforces on every connection, request body, request list and session."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["Limits"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """Server bounds; every one is checked before the work it bounds is done (so a hostile request costs at most the
    bound). Sizes are bytes, times seconds.

    Attributes:
        max_body_bytes: largest ``POST /batch`` body (``413`` beyond it, before any of it is read).
        max_inflight_bytes: bytes of bodies received and not yet run, all connections together (``503`` beyond
            it). Counted as they arrive, never as declared: a client that declares a huge body and sends nothing
            holds nothing.
        max_header_bytes: request line plus headers (``431`` beyond it; h11's ``max_incomplete_event_size``).
        max_blobs: blobs in one body, the request list included.
        max_requests: requests in one request list.
        max_literal_bytes: length of the request list's text.
        max_depth: nesting of the request list (list > call > call > ...: a normal list nests 6 deep).
        max_session_bytes: bytes of buffers one session may hold at once (``507`` beyond it).
        max_sessions: sessions held at once (``503`` for a new one beyond it).
        idle_timeout_s: a keep-alive connection with no request in progress is closed after this long.
        header_timeout_s: time from a request's first byte to the end of its headers (slow-header clients are cut).
        body_timeout_s: time to receive a whole body once its headers have arrived, and to send an answer (a client
            that does not read its answer is dropped after it).
        session_timeout_s: a session without a request for this long is ended and its buffers and programs freed.
        memory_budget_bytes: buffers of all sessions and bodies being received, together (``507`` beyond it).
        max_kernel_seconds: device time of one batch (its compiles, kernels and copies); beyond it the session's
            worker is stopped and the session answered ``504`` (its buffers and programs are gone).
        evict_idle_s: when the session table is full, a session idle for this long may be ended to make room for a
            new one (the longest idle first), so idle sessions cannot lock new clients out.
    """

    max_body_bytes: int = 4 * GiB
    max_inflight_bytes: int = 8 * GiB
    max_header_bytes: int = 16 * KiB
    max_blobs: int = 1 << 16
    max_requests: int = 1 << 16
    max_literal_bytes: int = 16 * MiB
    max_depth: int = 16
    max_session_bytes: int = 16 * GiB
    max_sessions: int = 256
    idle_timeout_s: float = 60.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 300.0
    session_timeout_s: float = 3600.0
    memory_budget_bytes: int = 32 * GiB
    max_kernel_seconds: float = 300.0
    evict_idle_s: float = 10.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"Limits.{f.name} must be a positive finite number, got {value!r}")
            if not f.name.endswith(("_s", "_seconds")) and not isinstance(value, int):
                raise ValueError(f"Limits.{f.name} must be an int, got {value!r}")
