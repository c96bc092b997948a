"""Seeds of the ``rng`` fixture: fixed, derived from the test's node id, or fresh random."""

from __future__ import annotations

import hashlib
import secrets

import pytest

from harness import options

__all__ = ["seed_for", "failure_section", "SEED_STASH"]

SEED_STASH = pytest.StashKey[int]()


def seed_for(config: pytest.Config, nodeid: str) -> int:
    """The seed of test ``nodeid``: ``--harness-seed``/``HARNESS_SEED`` if an int, a fresh 32-bit one if ``random``,
    else the first 4 bytes of sha256(nodeid) (stable across runs, processes and xdist workers)."""
    setting = options.seed_setting(config)
    if isinstance(setting, int):
        return setting
    if setting == options.RANDOM_SEED:
        return secrets.randbits(32)
    return int.from_bytes(hashlib.sha256(nodeid.encode()).digest()[:4], "little")


def failure_section(seed: int) -> tuple[str, str]:
    """The report section added to a failed test that used ``rng``."""
    return ("harness rng", f"rng seed {seed}; reproduce with --harness-seed={seed} (or HARNESS_SEED={seed})")
