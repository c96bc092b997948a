"""The harness fixtures: ``device`` (one backend name per parameter) and ``rng`` (a seeded numpy Generator)."""

from __future__ import annotations

import numpy as np
import pytest

from harness import markers, seeding

__all__ = ["device", "rng"]


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The canonical device name this test instance runs on (``"CPU"``, ``"PYTHON"``, ...).

    Parametrized over the session's selected backends (``--backends``); skips with a reason when the test's
    ``needs_local``/``needs_dtype`` markers rule the backend out. Open it with ``runtime_core.Device[device]``.
    """
    name = getattr(request, "param", None)
    if not isinstance(name, str):
        raise pytest.UsageError(f"{request.node.nodeid}: the device fixture is parametrized at collection; request it as "
                                "a test or fixture argument, not through request.getfixturevalue")
    if (why := markers.capability_reason(request.node, name)) is not None:
        pytest.skip(why)
    return name


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A ``numpy.random.Generator`` (PCG64) seeded per test; the seed is printed when the test fails."""
    seed = seeding.seed_for(request.config, request.node.nodeid)
    request.node.stash[seeding.SEED_STASH] = seed
    return np.random.default_rng(seed)
