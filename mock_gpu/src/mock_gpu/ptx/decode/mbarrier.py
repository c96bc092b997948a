"""Decoding of mbarrier objects (PTX ISA 9.7.13.15 "Parallel Synchronization and Communication Instructions:
mbarrier") and of the bulk copy that completes transactions on one (9.7.9.25.4 cp.async.bulk ... mbarrier::
complete_tx::bytes).

An mbarrier is an 8-byte object in shared memory. The emulator keeps its whole state in those 8 bytes: bits 0-19
the arrivals still pending in the current phase, 20-39 the expected arrivals, 40-62 the pending transaction bytes
(two's complement: a copy that completes before its bytes were expected makes it negative for a while), bit 63 the
phase parity. A phase completes when no arrival and no transaction byte is pending; the pending count is then
reloaded from the expected count and the parity flips. ``arrive`` returns the state before the arrival as its
token; ``test_wait``/``try_wait`` with that token is true once the phase changed (with ``.parity``, once the phase
of the given parity completed). Bulk copies happen at once, as cp.async does in this interpreter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..exec import memops
from ..parse.syntax import Addr, Imm, Sink
from .data import address, state_space
from .operands import DecodeError, operand_count, reader, writer

__all__ = ["bulk_copy", "cp_async_arrive", "mbarrier"]

_COUNT_MASK = (1 << 20) - 1
_TX_BITS = 23
_PHASE = np.uint64(1 << 63)


def _fields(state: int) -> tuple[int, int, int, int]:
    tx = (state >> 40) & ((1 << _TX_BITS) - 1)
    if tx >= 1 << (_TX_BITS - 1):
        tx -= 1 << _TX_BITS
    return state & _COUNT_MASK, (state >> 20) & _COUNT_MASK, tx, state >> 63


def _pack(pending: int, expected: int, tx: int, phase: int) -> int:
    return pending | expected << 20 | (tx & ((1 << _TX_BITS) - 1)) << 40 | phase << 63


def _settle(pending: int, expected: int, tx: int, phase: int) -> int:
    """The state after an update: a phase with nothing pending completes."""
    if pending <= 0 and tx == 0:
        return _pack(expected, expected, 0, phase ^ 1)
    return _pack(max(pending, 0), expected, tx, phase)


def _update(c, space: str, addrs: np.ndarray, idx, step: Callable[[int, int], int]) -> np.ndarray:
    """Apply ``step(state, threads arriving at it)`` once per distinct mbarrier (an address of one block's shared
    memory); returns the states before, one per thread."""
    old = np.empty(addrs.size, np.uint64)
    for buf, offs, pos in memops.resolve_space(c, space, addrs, 8, idx):
        view = buf.view(np.uint64)
        elements = offs // 8
        old[slice(None) if pos is None else pos] = view[elements]
        unique, counts = np.unique(elements, return_counts=True)
        for element, k in zip(unique, counts):
            view[element] = step(int(view[element]), int(k))
    return old


def mbarrier(op: tuple[str, ...], mods: set[str], ops: list, rt) -> Callable:
    """mbarrier.init / inval / arrive{.expect_tx} / arrive_drop / expect_tx / complete_tx / test_wait / try_wait
    {.parity} / pending_count (the .sem, .scope and .shared{::cta} qualifiers are accepted)."""
    kind = next((m for m in ("init", "inval", "arrive_drop", "arrive", "expect_tx", "complete_tx", "test_wait",
                             "try_wait", "pending_count") if m in mods), None)
    if kind is None:
        raise DecodeError("expected mbarrier.init, arrive, arrive_drop, expect_tx, complete_tx, test_wait, try_wait, "
                          "pending_count or inval")
    if kind == "pending_count":
        operand_count(ops, 2, "mbarrier.pending_count d, state")
        d, s = writer(ops[0], "b32", rt), reader(ops[1], "b64", rt)
        return lambda c, i: d(c, i, (s(c, i, c.n if i is None else i.size) & np.uint64(_COUNT_MASK)).astype(np.uint32))
    space = state_space(op) or "shared"
    if space != "shared":
        raise DecodeError("mbarrier objects live in shared memory")
    if kind in ("test_wait", "try_wait"):
        return _wait(mods, ops, rt)
    if kind == "inval":
        operand_count(ops, 1, "mbarrier.inval [addr]")
        return lambda c, i: None
    if kind in ("init", "expect_tx", "complete_tx"):
        operand_count(ops, 2, f"mbarrier.{kind} [addr], count")
        eff, addr = address(ops[0], space, rt)
        value = reader(ops[1], "u32", rt)

        def run(c, i):
            n = c.n if i is None else i.size
            a, v = addr(c, i, n), value(c, i, n).astype(np.int64)
            amount = int(v[0])
            if kind == "init":
                init = np.uint64(_pack(amount, amount, 0, 0))
                memops.store(c, eff, a, np.full(n, init, np.uint64), i)
            elif kind == "expect_tx":
                _update(c, eff, a, i, lambda s, k: _settle(*_add_tx(s, amount * k)))
            else:
                _update(c, eff, a, i, lambda s, k: _settle(*_add_tx(s, -amount * k)))
        return run
    return _arrive(kind, mods, ops, rt, space)


def _add_tx(state: int, delta: int) -> tuple[int, int, int, int]:
    pending, expected, tx, phase = _fields(state)
    return pending, expected, tx + delta, phase


def _arrive(kind: str, mods: set[str], ops: list, rt, space: str) -> Callable:
    """mbarrier.arrive{.expect_tx}{.noComplete} state|_, [addr]{, count | txCount}; arrive_drop likewise."""
    sink = isinstance(ops[0], Sink) if ops else False
    has_state = bool(ops) and not sink and not isinstance(ops[0], Addr)
    first = 1 if (has_state or sink) else 0
    if len(ops) - first not in (1, 2):
        raise DecodeError("expected mbarrier.arrive{.expect_tx} {state,} [addr]{, count}")
    d = writer(ops[0], "b64", rt) if has_state else None
    eff, addr = address(ops[first], space, rt)
    extra = reader(ops[first + 1], "u32", rt) if len(ops) - first == 2 else None
    expect_tx = "expect_tx" in mods

    def run(c, i):
        n = c.n if i is None else i.size
        amount = int(extra(c, i, n)[0]) if extra is not None else (0 if expect_tx else 1)

        def step(state: int, k: int) -> int:
            pending, expected, tx, phase = _fields(state)
            arrivals = k if expect_tx or extra is None else amount * k
            if expect_tx:
                tx += amount * k
            if kind == "arrive_drop":
                expected -= arrivals
            return _settle(pending - arrivals, expected, tx, phase)
        old = _update(c, eff, addr(c, i, n), i, step)
        if d is not None:
            d(c, i, old)
    return run


def _wait(mods: set[str], ops: list, rt) -> Callable:
    """mbarrier.test_wait / try_wait{.parity} p, [addr], state | phaseParity{, suspendTimeHint}."""
    if len(ops) not in (3, 4):
        raise DecodeError("expected mbarrier.try_wait p, [addr], state{, suspend hint}")
    p = writer(ops[0], "pred", rt)
    eff, addr = address(ops[1], "shared", rt)
    parity = "parity" in mods
    token = reader(ops[2], "b32" if parity else "b64", rt)

    def run(c, i):
        n = c.n if i is None else i.size
        now = memops.load(c, eff, addr(c, i, n), np.dtype(np.uint64), 1, i) >> np.uint64(63)
        if parity:
            p(c, i, now != (token(c, i, n).astype(np.uint64) & np.uint64(1)))
        else:
            p(c, i, now != (token(c, i, n).astype(np.uint64) >> np.uint64(63)))
    return run


def cp_async_arrive(op: tuple[str, ...], ops: list, rt) -> Callable:
    """cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [addr] (PTX ISA 9.7.9.25.3.4): an arrive-on the mbarrier
    once the thread's earlier cp.async copies completed, which here they already have. Without .noinc the pending
    count is first raised by one, so the arrival changes nothing; with .noinc it is an arrival of each thread."""
    if state_space(op) != "shared":
        raise DecodeError("expected cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [addr]")
    operand_count(ops, 1, "[addr]")
    _, addr = address(ops[0], "shared", rt)
    if "noinc" not in op:
        return lambda c, i: None

    def run(c, i):
        def step(state: int, k: int) -> int:
            pending, expected, tx, phase = _fields(state)
            return _settle(pending - k, expected, tx, phase)
        _update(c, "shared", addr(c, i, c.n if i is None else i.size), i, step)
    return run


def bulk_copy(op: tuple[str, ...], ops: list, rt) -> Callable:
    """cp.async.bulk.shared{::cta,::cluster}.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]: copy
    ``size`` bytes now and complete that many transaction bytes on the mbarrier (a CTA's own shared memory)."""
    if "mbarrier::complete_tx::bytes" not in op or "global" not in op:
        raise DecodeError("only cp.async.bulk.shared.global.mbarrier::complete_tx::bytes is emulated")
    if len(ops) != 4:
        raise DecodeError("expected [dst], [src], size, [mbar]")
    _, dst = address(ops[0], "shared", rt)
    _, src = address(ops[1], "global", rt)
    size = reader(ops[2], "u32", rt)
    _, bar = address(ops[3], "shared", rt)
    if isinstance(ops[2], Imm) and ops[2].value % 16:
        raise DecodeError("the bulk copy size must be a multiple of 16")

    def run(c, i):
        n = c.n if i is None else i.size
        sizes, s, d, b = size(c, i, n).astype(np.int64), src(c, i, n), dst(c, i, n), bar(c, i, n)
        for k in range(n):
            count = int(sizes[k])
            one = None if i is None else i[k:k + 1]
            data = memops.load(c, "global", s[k:k + 1], np.dtype(np.uint8), count, one)
            memops.store(c, "shared", d[k:k + 1], data, one)
            _update(c, "shared", b[k:k + 1], one, lambda st, _k, count=count: _settle(*_add_tx(st, -count)))
    return run
