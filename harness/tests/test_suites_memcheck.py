"""The correctness suites run CPU kernels bounds-checked: a correctness test with a planted out-of-bounds store fails
with a clear error under ``pytest`` and ``pytest -n 2``, and the session goes on and reports it (exit status 1, not a
crash of the interpreter with 134/139)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.suites
from runtime_core.config import CPU_MEMCHECK
from runtime_core.device import Device

pytestmark = pytest.mark.skipif(not Device.probe("CPU")[0], reason="the CPU backend cannot open here")

PLANTED = '''
import numpy as np
import pytest

from harness.kernels import KernelCase
from harness.runner import check_case
from runtime_core import dtypes
from runtime_core.ir import KernelBuilder

N = 4096


def _case(shift):
    """out[i + shift] = x[i]: with shift > 0 the last threads store past the end of out."""
    kb = KernelBuilder(f"planted_copy_{shift}", (N // 256,), (256,))
    x, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    kb.store(out, kb.add(i, shift), kb.load(x, i))
    def reference(arrays):
        out = arrays[1].copy()
        out[shift:] = arrays[0][:N - shift]
        return {1: out}
    inputs = lambda rng: [rng.random(N, dtype=np.float32), np.zeros(N, np.float32)]
    return KernelCase(f"planted_{shift}", kb.build(), inputs, reference, dtypes.float32)


@pytest.mark.backends("CPU")
def test_in_bounds_copy(device, rng):
    check_case(device, _case(0), rng)


@pytest.mark.backends("CPU")
def test_planted_out_of_bounds_store(device, rng):
    check_case(device, _case(100000), rng)
'''


@pytest.fixture
def suite_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory with the suites' own conftest and the planted test, CPU_MEMCHECK unset."""
    monkeypatch.delenv(CPU_MEMCHECK.name, raising=False)
    monkeypatch.delenv("HARNESS_BACKENDS", raising=False)
    pytester.makeconftest((Path(harness.suites.__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_planted=PLANTED)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider -p no:hypothesispytest\n")
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_planted_out_of_bounds_store_fails_clearly_and_the_session_reports_it(suite_dir, workers):
    result = suite_dir.runpytest_subprocess("--backends", "CPU", *workers)
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.re_match_lines([r".*OutOfBoundsError: kernel 'planted_copy_100000': STORE out of bounds: buffer 1 "
                                  r"index 100000, but the buffer holds 4096 elements; group \(0, 0, 0\), thread "
                                  r"\(0, 0, 0\).*"])
    result.stdout.fnmatch_lines(["*FAILED*test_planted_out_of_bounds_store*"])


@pytest.mark.parametrize("env, rendered", [(None, "checked"), ("0", "unchecked"), ("1", "checked")])
def test_the_environment_decides_when_it_is_set(suite_dir, monkeypatch, env, rendered):
    suite_dir.makepyfile(test_mode=f"""
from runtime_core import Device
from test_planted import _case

def test_mode():
    assert ("RTK_FAULT" in Device["CPU"].renderer.render(_case(0).kernel)) == {rendered == "checked"}
""")
    if env is not None:
        monkeypatch.setenv(CPU_MEMCHECK.name, env)
    suite_dir.runpytest_subprocess("--backends", "CPU", "test_mode.py").assert_outcomes(passed=1)
