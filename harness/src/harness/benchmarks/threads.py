"""The thread-count variables of numpy's BLAS and OpenMP that the benchmark run pins to 1 (``harness.bench``).

The CPU backend runs a kernel on one thread, so single-threaded numpy/BLAS is the fair practical limit beside it; and
a multi-threaded BLAS on a loaded machine of few cores spreads its rounds by orders of magnitude. OpenBLAS reads
OPENBLAS_NUM_THREADS (else OMP_NUM_THREADS), MKL reads MKL_NUM_THREADS, OpenMP runtimes OMP_NUM_THREADS, each once when
the library loads, so they must be set in the environment of the process before numpy is imported.
"""

from __future__ import annotations

__all__ = ["SINGLE_THREAD_ENV", "THREADS_KEY"]

SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# machine_info key of a run: {variable: its value in the benchmark process, or None when unset}
THREADS_KEY = "thread_env"
