"""How many buffer pairs a copy benchmark rotates through, and the page offsets a cache-hot one sweeps
(``harness.benchmarks.test_bench_copy``)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.benchmarks.test_bench_copy import (
    ALIGNMENT_STEP,
    CACHE_HOT_BYTES,
    PAGE,
    STREAM_BYTES,
    buffer_sets,
    page_offset_views,
)

KiB, MiB = 1 << 10, 1 << 20


@pytest.mark.parametrize(("nbytes", "sets"), [(4 * KiB, 1), (64 * KiB, 1), (1 * MiB, 32), (3 * MiB, 11),
                                              (32 * MiB, 1), (64 * MiB, 1), (256 * MiB, 1)])
def test_buffer_sets(nbytes: int, sets: int) -> None:
    assert buffer_sets(nbytes) == sets


@pytest.mark.parametrize("nbytes", [CACHE_HOT_BYTES + 1, MiB, 5 * MiB + 3, 20 * MiB])
def test_streaming_sizes_cover_the_stream_bytes_and_no_more_pairs_than_needed(nbytes: int) -> None:
    sets = buffer_sets(nbytes)
    assert 2 * nbytes * sets >= STREAM_BYTES > 2 * nbytes * (sets - 1)


@pytest.mark.parametrize("nbytes", [1, 4 * KiB, 64 * KiB])
def test_page_offset_views_start_at_every_cache_line_of_a_page_once(nbytes: int) -> None:
    base = np.arange(nbytes + 2 * PAGE + 100, dtype=np.int64).astype(np.uint8)[37:]  # deliberately not page-aligned
    views = page_offset_views(base, nbytes)
    offsets = sorted(v.ctypes.data % PAGE for v in views)
    assert offsets == list(range(0, PAGE, ALIGNMENT_STEP))
    assert all(v.size == nbytes and np.shares_memory(v, base) for v in views)


def test_page_offset_views_refuses_a_base_too_short_for_the_last_offset() -> None:
    with pytest.raises(ValueError, match="at least"):
        page_offset_views(np.zeros(4 * KiB + PAGE, dtype=np.uint8), 4 * KiB)


@pytest.mark.parametrize(("base", "nbytes"), [
    (np.zeros(8 * KiB + 2 * PAGE, dtype=np.uint8)[::2], 4 * KiB),  # strided: the views would span twice nbytes
    (np.zeros(2 * PAGE + 10, dtype=np.uint8), 0),
    (np.zeros(2 * PAGE + 10, dtype=np.uint8), -5),
    (np.zeros(4 * KiB + 2 * PAGE, dtype=np.int8), 4 * KiB),
    ([0] * (4 * KiB + 2 * PAGE), 4 * KiB),
])
def test_page_offset_views_refuses_what_would_not_sweep_the_page(base, nbytes: int) -> None:
    with pytest.raises(ValueError):
        page_offset_views(base, nbytes)
