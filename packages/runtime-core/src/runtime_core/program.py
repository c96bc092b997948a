"""The Program protocol every backend runtime implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["Program", "check_launch"]


class Program(Protocol):
    """A loaded kernel: ``Compiled.runtime(name, lib)`` returns one.

    ``prg(*bufs, global_size=(x, y, z), local_size=(x, y, z), vals=(ints...), wait=False)`` launches
    ``prod(global_size)`` groups of ``prod(local_size)`` threads on the buffers' opaque handles (in slot order) with int32
    ``vals``. Returns the device time of the launch in seconds when ``wait`` is true, else ``None``.

    ``arg_counts`` is ``(buffers, vals)``, the numbers of buffer handles and int32 vals a launch takes, or ``None``
    when the program cannot tell (a foreign kernel without a signature): then its launches are not validated.
    """

    @property
    def arg_counts(self) -> tuple[int, int] | None: ...

    def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None: ...


def check_launch(name: str, bufs: Sequence[Any], vals: Sequence[int], nbufs: int, nvals: int,
                 global_size: Sequence[int], local_size: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Validate a launch before anything runs; return the sizes padded to 3 dims.

    Raises ``ValueError`` for a wrong number of buffers or vals, sizes that are not 1-3 positive ints, or vals that do not
    fit in int32.
    """
    if len(bufs) != nbufs:
        raise ValueError(f"kernel {name!r} takes {nbufs} buffers, got {len(bufs)}")
    if len(vals) != nvals:
        raise ValueError(f"kernel {name!r} takes {nvals} int vals, got {len(vals)}")
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int) or not -(2**31) <= v < 2**31:
            raise ValueError(f"kernel {name!r}: vals must be int32, got {v!r}")
    sizes = []
    for what, size in (("global_size", global_size), ("local_size", local_size)):
        size = tuple(size)
        if not 1 <= len(size) <= 3 or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size):
            raise ValueError(f"kernel {name!r}: {what} must be 1-3 positive ints, got {size}")
        sizes.append(size + (1,) * (3 - len(size)))
    return sizes[0], sizes[1]
