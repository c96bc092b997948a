"""How many buffer pairs a copy benchmark rotates through (``harness.benchmarks.test_bench_copy.buffer_sets``)."""

from __future__ import annotations

import pytest

from harness.benchmarks.test_bench_copy import CACHE_HOT_BYTES, STREAM_BYTES, buffer_sets

KiB, MiB = 1 << 10, 1 << 20


@pytest.mark.parametrize(("nbytes", "sets"), [(4 * KiB, 1), (64 * KiB, 1), (1 * MiB, 32), (3 * MiB, 11),
                                              (32 * MiB, 1), (64 * MiB, 1), (256 * MiB, 1)])
def test_buffer_sets(nbytes: int, sets: int) -> None:
    assert buffer_sets(nbytes) == sets


@pytest.mark.parametrize("nbytes", [CACHE_HOT_BYTES + 1, MiB, 5 * MiB + 3, 20 * MiB])
def test_streaming_sizes_cover_the_stream_bytes_and_no_more_pairs_than_needed(nbytes: int) -> None:
    sets = buffer_sets(nbytes)
    assert 2 * nbytes * sets >= STREAM_BYTES > 2 * nbytes * (sets - 1)
