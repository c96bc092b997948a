"""Cross-backend benchmark suites (pytest-benchmark), run on every selected backend through the ``device`` fixture.

Each group pairs the device entries with a practical limit measured beside them in the same run (numpy, a ctypes call,
sqlite3), so a result reads as "fraction of what this machine can do". ``harness.benchmarks.measure`` documents the
``extra_info`` keys every entry records; ``harness.benchmarks.kernels`` builds the timed kernels.
Run: ``python -m pytest harness/src/harness/benchmarks -p no:xdist --benchmark-json=out.json --backends CPU,PYTHON``.
"""
