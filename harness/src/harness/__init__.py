"""Cross-backend correctness and benchmark harness for device runtimes.

* ``harness.plugin``: the pytest plugin (``--backends``, ``--strict-backends``, ``device`` and ``rng`` fixtures, markers);
  loaded automatically through the ``pytest11`` entry point.
* ``harness.kernels``: IR kernels with numpy references (``KernelCase``, ``all_cases()``); ``harness.runner`` runs them.
* ``harness.suites``: the cross-backend test suites (``pytest --pyargs harness.suites``).
* ``harness.report``: benchmark regression reports (``python -m harness report``).

This module re-exports the comparison helpers; importing it opens no device.
"""

from harness.assertions import TOLERANCES, Tolerance, assert_close, tolerance

__all__ = ["assert_close", "tolerance", "Tolerance", "TOLERANCES"]
