"""Cross-backend test suites; run with ``pytest --pyargs harness.suites`` (or by path) and ``--backends``."""
