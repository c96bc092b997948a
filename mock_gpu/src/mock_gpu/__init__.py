"""mock_gpu: a CUDA driver API emulator that executes PTX on the CPU.

``mock_gpu.driver`` has the functions, types and result conventions of ``cuda.bindings.driver`` and
``mock_gpu.runtime`` those of ``cuda.bindings.runtime``; a CUDA backend that takes its driver module from here
(``MOCKGPU=1``) runs without a GPU, with every device memory access checked, and :func:`install` (or
``python -m mock_gpu run prog.py``) runs an unmodified cuda-python program on the emulator.
Configuration is read from the environment at cuInit (:mod:`mock_gpu.config`).
"""

from __future__ import annotations

from . import driver, runtime
from ._driver.results import REPORTS, NotEmulatedError, last_error_report
from ._driver.system import set_system
from ._runtime import state as runtime_state
from .config import ConfigError, MockConfig, load_config
from .install import install, installed, uninstall

__all__ = ["ConfigError", "MockConfig", "NotEmulatedError", "driver", "install", "installed", "last_error_report",
           "load_config", "reset", "runtime", "uninstall"]


def reset() -> None:
    """Drop the emulated system (all devices, contexts, memory) and the last error report, as if the process had
    never called cuInit; the next cuInit reads the environment again. For tests that need another configuration;
    the real driver has no equivalent. Handles from before the reset become invalid (CUDA_ERROR_NOT_INITIALIZED
    until cuInit, then CUDA_ERROR_INVALID_HANDLE)."""
    set_system(None)
    REPORTS.clear()
    runtime_state.reset()
