"""pytest plugin of the harness (entry point ``pytest11: harness``): wires options, markers and fixtures into pytest.

Importing this module opens no device: backends are probed once, when the session starts (header) or when the first
test that uses ``device`` is collected, and an xdist controller hands its result to the workers.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from harness import markers, options, seeding
from harness.bench_schema import THRESHOLD_KEY
from harness.config import HARNESS_HEARTBEAT_S
from harness.fixtures import device, rng
from harness.heartbeat import Heartbeat
from harness.selection import WORKERINPUT_KEY, get_selection
from harness.summary import BACKEND_PROPERTY, BackendCounts, backend_of
from runtime_core.config import ConfigError

_COUNTS_KEY = pytest.StashKey[BackendCounts]()

__all__ = ["device", "rng"]


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    markers.register(config)
    # A bad --backends/--harness-seed (or env twin) stops the session here, as one usage line, even when no test of
    # the run uses the device or rng fixture; parsing them opens no device.
    options.requested_backends(config)
    options.seed_setting(config)
    if config.pluginmanager.hasplugin("benchmark"):  # machine facts in saved benchmark JSON; idempotent with -p
        config.pluginmanager.import_plugin("harness.bench_hooks")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "harness-xdist")
    if not hasattr(config, "workerinput"):  # the controller (or a plain run) sees every report
        config.stash[_COUNTS_KEY] = BackendCounts()
        config.pluginmanager.register(config.stash[_COUNTS_KEY], "harness-backend-counts")
        _start_heartbeat(config)


def _start_heartbeat(config: pytest.Config) -> None:
    try:
        quiet_s = HARNESS_HEARTBEAT_S.get()
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if quiet_s and reporter is not None:
        beat = Heartbeat(reporter.write_line, quiet_s)
        config.pluginmanager.register(beat, "harness-heartbeat")
        beat.start()
        config.add_cleanup(beat.stop)


class _XdistHooks:
    """Sends the controller's backend selection to every worker, so all of them parametrize identically."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = get_selection(self.config).to_dict()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [get_selection(config).header()]


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if options.strict_backends(config) and not hasattr(config, "workerinput"):
        sel = get_selection(config)
        if sel.unavailable:
            lines = "\n".join(f"  {n}: {why}" for n, why in sel.unavailable)
            raise pytest.UsageError(f"--strict-backends: requested backend(s) unavailable:\n{lines}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" not in metafunc.fixturenames:
        return
    sel = get_selection(metafunc.config)
    params = []
    for name in sel.params:
        why = sel.reason(name)
        why = f"{name} unavailable: {why}" if why is not None else markers.restriction_reason(metafunc.definition, name)
        params.append(pytest.param(name, id=name, marks=[pytest.mark.skip(reason=why)] if why else []))
    if not params:
        reason = "no backend available; " + sel.header()
        params = [pytest.param(None, id="no-backend", marks=[pytest.mark.skip(reason=reason)])]
    metafunc.parametrize("device", params, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if options.run_bigmem(config):
        return
    skip = pytest.mark.skip(reason=f"needs > 2 GiB of memory; enable with --run-bigmem or {options.BIGMEM_ENV}=1")
    for item in items:
        if item.get_closest_marker("bigmem") is not None:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Before the test body runs: fill the test's parameters into a group template (``markers.bench_group``) and copy
    the ``bench_threshold`` and ``bench_role`` markers into the benchmark's ``extra_info`` (``harness.bench_schema``),
    so the body and the reports see them."""
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if bench is None:
        return
    bench.group = markers.bench_group(item, bench.group)
    threshold = markers.bench_threshold(item)
    if threshold is not None:
        bench.extra_info[THRESHOLD_KEY] = threshold
    bench.extra_info.update(markers.bench_role(item) or {})
    markers.bench_threads(item)  # a misused marker fails the test here, in plain pytest runs as in the paired runner


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if (backend := backend_of(item)) is not None:
        report.user_properties.append((BACKEND_PROPERTY, backend))
    seed = item.stash.get(seeding.SEED_STASH, None)
    if seed is not None and report.failed:
        report.sections.append(seeding.failure_section(seed))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    counts = config.stash.get(_COUNTS_KEY, None)
    if counts is None or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return
    problems = []
    if options.strict_backends(config) and (missing := counts.unexecuted(list(get_selection(config).params))):
        problems.append(f"--strict-backends: no test executed on {', '.join(missing)} (all skipped or deselected): "
                        f"this run tested nothing there, so it fails")
    if options.require_tests(config) and counts.executed_total == 0:
        problems.append(f"--require-tests ({options.REQUIRE_TESTS_ENV}=1): no test executed (all skipped or none "
                        f"collected), so the run fails")
    if problems:
        config.stash[_PROBLEMS_KEY] = problems
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_PROBLEMS_KEY = pytest.StashKey[list[str]]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    counts = config.stash.get(_COUNTS_KEY, None)
    problems = config.stash.get(_PROBLEMS_KEY, [])
    if counts is None or not counts.counts and not problems:
        return
    terminalreporter.section("harness: tests per backend")
    for line in counts.lines() or ["no test ran on any backend"]:
        terminalreporter.write_line(line)
    for line in problems:
        terminalreporter.write_line(line, red=True)
