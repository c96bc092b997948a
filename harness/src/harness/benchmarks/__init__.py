"""Cross-backend benchmark suites (pytest-benchmark), run on every selected backend through the ``device`` fixture.

Run them with ``nox -s bench`` (``python -m harness bench``: the paired runner, see its doc) or, as plain
pytest-benchmark tests, ``python -m pytest --pyargs harness.benchmarks -p no:xdist --benchmark-json=out.json``.

Writing a benchmark (a new file ``test_bench_<area>.py`` here, e.g. for CUDA, DISK, CLOUD):

* **Time one call** with pytest-benchmark's fixture: ``benchmark(fn)`` for a quick call, or
  ``harness.benchmarks.measure.run(benchmark, fn, probe_s)``, which switches to explicit rounds for slow calls. Check
  the result once, untimed, before timing (a broken kernel must not report a fast number). The paired runner decides
  rounds and calls per round itself; ``benchmark.pedantic(..., iterations=N)`` or a ``setup`` fixes the calls (and
  then its ``warmup_rounds`` say how many untimed rounds go first, as in pytest-benchmark: none by default).
* **Record the figure** with ``measure.record_time(benchmark, device, "us/call")`` or ``measure.record_rate(benchmark,
  device, {"GB/s": nbytes / 1e9})`` (``device`` is ``measure.HOST`` for work without a device); the keys are those of
  ``harness.bench_schema``.
* **Group** entries that do the same work with ``@pytest.mark.benchmark(group="copy-1MiB")``; the group may name the
  test's parameters (``group="compile-cold-{device}"``), so it is known before the test runs. One problem size per
  group: "x limit" divides times within a group.
* **Roles** (``@pytest.mark.bench_role``): an *entry* (our code, the default, no marker) is the only role that can
  fail a run. A *limit*, ``@pytest.mark.bench_role("limit", reference="numpy.copyto of the same bytes")``, measures
  what the machine allows for the same work without our runtime; it must share the entries' group, and its group must
  be static (a marker): the runner times every entry of the group round for round beside it. A *peer*,
  ``@pytest.mark.bench_role("peer", peer="numba CUDA simulator")``, is another project's figure for scale (CuPy,
  numba, a vendor library): shown, judged, never failing.
* **Threads**: the runner keeps both workers of a comparison on one CPU (the idlest), so rounds of two versions see the
  same core; a benchmark that runs several threads at once says how many with ``@pytest.mark.bench_threads(n)`` and
  gets that many CPUs (the all-core BLAS limit; ``bench_threads(n, backends=["CPU"])``: the kernel entries, on every
  core on CPU only, since PYTHON runs one thread). A process a benchmark starts (a server) is pinned with its
  worker.
* **Inputs shared by both sides**: a file whose place on disk affects the timing (a read benchmark's input) goes in
  the ``bench_shared_dir`` fixture's directory, written once when absent (under a lock, by a rename), so every worker
  of an A/B run reads the same blocks; per-process resources that differ from one process to the next (a server, a
  temporary file) make the two sides differ by themselves, which no pairing can cancel.
* **Thresholds**: stored-baseline mode flags an entry whose median moved beyond 10%; a benchmark whose noise needs
  more says so with ``@pytest.mark.bench_threshold(0.2)`` and a comment with the measured spread. A/B mode needs no
  threshold: it flags changes beyond its minimum effect (3%) that the paired rounds resolve, and reports per benchmark
  the smallest change it could detect.

Each group pairs the device entries with a practical limit measured beside them (numpy, a ctypes call, sqlite3), so a
result reads as "times what this machine can do". ``harness.benchmarks.measure`` documents the helpers;
``harness.benchmarks.kernels`` builds the timed kernels.
"""
