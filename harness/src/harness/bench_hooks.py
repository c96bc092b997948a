"""pytest-benchmark hook of the harness: records ``harness.machine_info.machine_facts()`` in every saved run.

The harness plugin (``harness.plugin``) registers this module, so each pytest-benchmark JSON carries
``machine_info["runtime"]`` (CPU model, cores, memory, compilers, numpy, GPU/driver/CUDA), which the reports show
and use to warn when the GPU differs between current and baseline.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.machine_info import machine_facts

__all__ = ["pytest_benchmark_update_machine_info"]


# optionalhook: the hook is pytest-benchmark's (``pytest_benchmark.hookspec``); under ``-p no:benchmark`` it has no spec.
@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add ``machine_info["runtime"] = machine_facts()`` (see ``harness.machine_info``) before the run is saved."""
    machine_info["runtime"] = machine_facts()
