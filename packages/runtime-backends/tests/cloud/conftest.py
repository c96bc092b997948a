"""Fixtures of the CLOUD backend's tests (helpers are in ``cloud_helpers``) and the hypothesis profile."""

from __future__ import annotations

import http.client
import os
from collections.abc import Iterator

import pytest
from cloud_helpers import SMALL
from hypothesis import HealthCheck, settings

from runtime_backends.cloud.server.app import CloudServer

FUZZ_EXAMPLES = int(os.environ.get("CLOUD_FUZZ_EXAMPLES", "150"))
"""Examples per property test: small by default (tests-cpu); ``nox -s tests-cloud`` raises it (>= 10,000 in all)."""
settings.register_profile("cloud", max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile("cloud")


@pytest.fixture
def server() -> Iterator[CloudServer]:
    """A PYTHON-device server with SMALL limits on a free loopback port (no token)."""
    srv = CloudServer("PYTHON", port=0, limits=SMALL).start()
    yield srv
    srv.close()


@pytest.fixture
def conn(server: CloudServer) -> Iterator[http.client.HTTPConnection]:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    yield c
    c.close()
