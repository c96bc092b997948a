"""Shared fixtures of the harness's own tests: ``pytester`` and a conftest that installs fake backends."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# Installed as the conftest of a pytester run: replaces the backend registry with fakes for that run only, so plugin
# tests do not depend on which real backends exist. FAKEOK and FAKELOCAL open, FAKEBAD fails to open, FAKEARGS opens but
# has no default priority (like DISK and CLOUD).
FAKE_BACKENDS_CONFTEST = '''
from runtime_core import Compiled, MallocAllocator, Renderer, dtypes
from runtime_core.device import Device


class _Plain(Renderer):
    dtypes = (dtypes.float32, dtypes.int32)


class _Local(Renderer):
    has_local = has_shared = True


def _device(prio, renderer=None, error=None):
    class Fake(Compiled):
        DEFAULT_PRIORITY = prio

        def __init__(self, name):
            if error:
                raise RuntimeError(error)
            super().__init__(name, MallocAllocator(self), renderer, None, None)
    return Fake


FAKES = {"FAKEOK": _device(0, _Plain()), "FAKELOCAL": _device(1, _Local()),
         "FAKEBAD": _device(2, error="no fake hardware in this machine"), "FAKEARGS": _device(None, _Plain())}
_restoring = Device.restoring()


def pytest_configure(config):
    _restoring.__enter__()
    for name in list(Device.backends()):
        Device.unregister(name)
    for name, cls in FAKES.items():
        Device.register(name, cls)


def pytest_unconfigure(config):
    _restoring.__exit__(None, None, None)
'''


@pytest.fixture
def fake_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose runs see only the fake backends FAKEOK, FAKELOCAL, FAKEBAD, FAKEARGS and no HARNESS_* env."""
    pytester.makeconftest(FAKE_BACKENDS_CONFTEST)
    # unrelated plugins installed here (hypothesis) cost ~1.5 s per in-process run
    pytester.makeini("[pytest]\naddopts = -p no:hypothesispytest -p no:cacheprovider\n")
    for name in ("HARNESS_BACKENDS", "HARNESS_SEED", "HARNESS_RUN_BIGMEM", "HARNESS_REQUIRE_TESTS"):
        monkeypatch.delenv(name, raising=False)
    return pytester
