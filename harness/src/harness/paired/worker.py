"""A long-lived benchmark worker: pytest collects the benchmark suites, then a controller decides what runs and when.

Started by ``harness.paired.process.WorkerProcess`` as ``python worker.py <pytest args>`` with the environment
variable CHANNEL_ENV = ``"<read fd>,<write fd>"``: two pipes carrying one JSON object per line. The same file runs
under the working tree's interpreter and under a git ref's environment (A/B mode), whose ``harness`` package may be
older, so this module imports only the standard library and pytest (and pytest-benchmark's fixture class when it is
installed), never ``harness``.

Protocol (controller -> worker ``op``, worker -> controller ``ev``):

* after collection the worker sends ``collected``: ``items`` (nodeid, name, whether it uses the ``benchmark`` fixture,
  its static ``group`` from ``@pytest.mark.benchmark(group=...)`` formatted with the test's parameters, e.g.
  ``"compile-cold-{device}"`` -> ``"compile-cold-CPU"``, its ``role`` from ``@pytest.mark.bench_role`` and the
  ``threads`` it runs at once from ``@pytest.mark.bench_threads``, default 1, the reason of an unconditional
  ``@pytest.mark.skip`` as ``skip`` (else null), and ``errors``: the collection errors,
  nodeid and text, of modules that did not import),
  ``machine_info`` and ``commit_info`` (pytest-benchmark's hooks, so the harness's machine facts are in them) and
  ``version`` (pytest-benchmark's);
* ``start`` {nodeid, keep}: run that test. Its module's fixtures stay set up after it when ``keep`` is true (the
  default), until a test of another module starts (see below). When its body calls ``benchmark(fn)`` or
  ``benchmark.pedantic(...)`` the worker sends ``ready`` {nodeid, group, extra_info, iterations (fixed by pedantic,
  else null), warmup_rounds (pedantic's, with fixed iterations; else null)} and waits inside the call;
  a test that ends without calling it (skip, failure) sends ``done`` at once;
* while ready: ``time`` {iterations, rounds, stretch, untimed, warmup} runs ``rounds`` rounds of ``iterations`` calls
  each and answers ``times`` {t: seconds per round}; ``stretch`` > 1 lengthens every round to ``stretch`` times its
  measured duration by spinning on the CPU inside the timed span (``--plant-slowdown``: a planted slowdown of exactly
  that factor), or with ``untimed`` spins as long right after the timed span (the unchanged side of a planted run:
  both sides then keep the CPU busy alike, and only the planted side's clock counts it); the rounds count for
  ``benchmark.stats`` (which the test reads to record its figures) unless ``warmup``;
* ``finish``: the benchmark call returns the function's result as pytest-benchmark does (pedantic: the last round's
  call when that round made one call; else, and always for ``benchmark(fn)``, one more call's) and the test goes on
  (recording ``extra_info``); ``abort`` {reason}: the call raises ``pytest.skip`` instead. Either way the worker then
  sends ``done`` {nodeid, outcome ("passed" | "skipped" | "failed"), message, name, group, params, param,
  extra_info};
* ``release``: tear down every fixture still set up (a module's, the session's); answered by ``released``;
* ``quit``: the session ends (exit status 0).

The controller chooses the order as it goes, so a test is torn down as if the next one were another test of its
module (its own and its class's fixtures go; its module's and the session's stay, so a module's server process or
input file is set up once per worker, not once per test), and a ``start`` first tears down whatever the test it names
does not share (pytest's ``SetupState.teardown_exact``). With ``keep`` false a test is torn down completely. Only one
worker is busy at a time: the controller waits for each answer before it sends the next command, so two workers
never run at once on a machine of few cores.
"""

from __future__ import annotations

import json
import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # run as a script: this directory's modules must not shadow top-level names in the tested tree

import ctypes  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

try:  # pytest-benchmark's makereport hook insists that funcargs['benchmark'] is one of its fixtures
    from pytest_benchmark.fixture import BenchmarkFixture as _FixtureBase
except ImportError:  # pragma: no cover - pytest-benchmark is a dependency of every harness
    _FixtureBase = object  # type: ignore[assignment,misc]

CHANNEL_ENV = "HARNESS_BENCH_CHANNEL"


class Channel:
    """JSON lines over a pair of pipe file descriptors."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read = os.fdopen(read_fd, "r", encoding="utf-8")
        self._write = os.fdopen(write_fd, "w", encoding="utf-8")

    def send(self, **message: Any) -> None:
        self._write.write(json.dumps(message, default=str) + "\n")
        self._write.flush()

    def receive(self) -> dict[str, Any]:
        line = self._read.readline()
        if not line:  # the controller went away: nothing left to do
            os._exit(3)
        return json.loads(line)


def _plain(value: Any) -> Any:
    """``value`` as JSON-safe data: containers recursively, numbers that are not finite and other objects as str."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _static_group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("benchmark")
    group = marker.kwargs.get("group") if marker else None
    if not isinstance(group, str):
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    try:
        return group.format_map({k: str(v) for k, v in params.items()})
    except (KeyError, ValueError, IndexError):
        return group


def _static_role(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("bench_role")
    return str(marker.args[0]) if marker and marker.args else None


def _static_skip(item: pytest.Item) -> str | None:
    """The reason of an unconditional ``pytest.mark.skip`` on ``item`` (e.g. a backend its markers rule out), which
    the controller then records without starting the test; None without one."""
    marker = item.get_closest_marker("skip")
    if marker is None:
        return None
    return str(marker.kwargs.get("reason") or (marker.args[0] if marker.args else "unconditional skip"))


def _static_threads(item: pytest.Item) -> int:
    """Threads the benchmark runs at once (``@pytest.mark.bench_threads(n, backends=None)``: n on the listed backends
    or on all, else 1; 1 without it or when misused, which the harness plugin reports as the test's failure). Read
    here, not through ``harness.markers``: the worker also runs a ref's tree, whose harness may predate it."""
    marker = item.get_closest_marker("bench_threads")
    if marker is None or len(marker.args) != 1:
        return 1
    count, backends = marker.args[0], marker.kwargs.get("backends")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return 1
    device = getattr(getattr(item, "callspec", None), "params", {}).get("device")
    return count if not isinstance(backends, (list, tuple)) or device in backends else 1


class RunClock:
    """Seconds of a round: wall time (``time.perf_counter``) minus the time spent waiting in the scheduler's run queue
    meanwhile by this thread and by every thread of the processes this worker started (a benchmark's server and its
    workers): ``/proc/<pid>/task/<tid>/schedstat``, second field, ns (Linux with schedstats); the processes are found
    through ``/proc/<pid>/task/<tid>/children`` when the round starts.

    On a machine with more runnable tasks than CPUs, a round that the scheduler preempts is stretched by however long
    other tasks ran: wall time then measures the neighbours' load, not the code. Waiting in the run queue is exactly
    that stretch, so it is taken out; the time the benchmark itself waits (sleep, I/O, a device) stays in. A round
    that waits for its own child processes (a CLOUD server) is stretched by *their* waits as well: measured here with a
    busy loop on one core, a 64 MiB CLOUD copy-in scattered by 64% (coefficient of variation) in wall time, 56% less
    this thread's wait, 6% less the waits of the whole process tree. Waits of several threads can overlap, so the
    subtraction can overshoot; the thread's own time on a CPU (schedstat's first field) is the floor (the kernel also
    accounts waits at scheduler ticks, so a short round could otherwise read 0 s). Where schedstat cannot be read the
    clock is plain wall time (``name`` says which).
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        try:
            self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            self._schedstat()
        except (OSError, ValueError, IndexError):
            self._fd = None
        self.name = "perf_counter - run-queue wait" if self._fd is not None else "perf_counter"

    def _schedstat(self) -> tuple[float, float]:
        """(seconds on a CPU, seconds waiting in a run queue) of this thread since it started; zeros without
        schedstat."""
        if self._fd is None:
            return 0.0, 0.0
        fields = os.pread(self._fd, 128, 0).split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9

    def start(self) -> tuple[float, float, float, dict[str, float]]:
        """The readings a round starts from: (own wait, wall time, own CPU time, each child thread's wait)."""
        children = _queued_of(_child_tasks()) if self._fd is not None else {}
        ran, queued = self._schedstat()
        return queued, time.perf_counter(), ran, children

    def since(self, start: tuple[float, float, float, dict[str, float]]) -> float:
        """Seconds of the round begun at ``start``, without the run-queue waits, and at least its time on a CPU."""
        now = time.perf_counter()
        ran, queued = self._schedstat()
        children = _queued_of(start[3]) if start[3] else {}
        waited = queued - start[0] + sum(children[path] - before for path, before in start[3].items() if path in children)
        return max(now - start[1] - waited, ran - start[2], 1e-9)


def _child_tasks(pid: int | None = None) -> list[str]:
    """The schedstat paths of every thread of every process descended from ``pid`` (default: this process)."""
    paths: list[str] = []
    todo = [_children_of(pid or os.getpid())]
    while todo:
        for child in todo.pop():
            try:
                tids = os.listdir(f"/proc/{child}/task")
            except OSError:  # it exited
                continue
            paths += [f"/proc/{child}/task/{tid}/schedstat" for tid in tids]
            todo.append(_children_of(child))
    return paths


def _children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (any of its threads), from ``/proc/<pid>/task/*/children``."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(child) for child in f.read().split()]
        except OSError:
            continue
    return found


def _queued_of(paths: list[str] | dict[str, float]) -> dict[str, float]:
    """Seconds each thread (by its schedstat path) has waited in a run queue; a thread that is gone is left out."""
    queued: dict[str, float] = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                queued[path] = int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return queued


_CLOCK = RunClock()
_NO_RESULT = object()  # what a round that keeps no result returns (several calls, or benchmark(fn))


class _Stats:
    """The summary pytest-benchmark's ``benchmark.stats.stats`` offers, from this worker's rounds (seconds per call)."""

    def __init__(self, per_call: list[float]) -> None:
        ordered = sorted(per_call)
        n = len(ordered)
        self.data = list(per_call)
        self.rounds = n
        self.min, self.max = ordered[0], ordered[-1]
        self.mean = sum(ordered) / n
        self.median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
        self.stddev = math.sqrt(sum((x - self.mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0
        self.total = sum(ordered)
        self.ops = 1.0 / self.mean if self.mean else 0.0


class _Metadata:
    def __init__(self, per_call: list[float]) -> None:
        self.stats = _Stats(per_call)


class PairedBenchmark(_FixtureBase):  # type: ignore[misc,valid-type]
    """The ``benchmark`` fixture of a worker: pytest-benchmark's call forms, timed when the controller says.

    ``benchmark(fn, *args, **kwargs)`` and ``benchmark.pedantic(target, args, kwargs, setup, teardown, rounds,
    warmup_rounds, iterations)`` both hand the function to the controller, which chooses rounds, iterations (fixed
    when pedantic gives ``iterations`` or a ``setup``) and warm-up (with fixed iterations, pedantic's
    ``warmup_rounds``); pedantic's ``rounds`` is left to it. Attributes as pytest-benchmark's: name, fullname, group,
    param, params, extra_info, disabled, stats.
    """

    def __init__(self, node: pytest.Item, channel: Channel) -> None:  # no super().__init__: its state is not used
        self.name, self.fullname = node.name, node.nodeid
        callspec = getattr(node, "callspec", None)
        self.param = callspec.id if callspec else None
        self.params = callspec.params if callspec else None
        self.group = _static_group(node)
        self.extra_info: dict[str, Any] = {}
        self.disabled = False
        self.skipped = False
        self.has_error = False
        self.stats: _Metadata | None = None
        self.cprofile = False
        self._channel = channel
        self._mode: str | None = None
        self._per_call: list[float] = []

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._claim("benchmark(...)")
        return self._serve(lambda: function_to_benchmark(*args, **kwargs), None, None, None, keep_result=False)

    def pedantic(self, target: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
                 setup: Callable[[], Any] | None = None, teardown: Callable[..., Any] | None = None, rounds: int = 1,
                 warmup_rounds: int = 0, iterations: int = 1) -> Any:
        self._claim("benchmark.pedantic(...)")
        for value, what in ((iterations, "iterations"), (rounds, "rounds")):  # pytest-benchmark's checks and words
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Must have positive int for `{what}`.")
        if not isinstance(warmup_rounds, int) or warmup_rounds < 0:
            raise ValueError("Must have positive int for `warmup_rounds`.")
        if iterations > 1 and setup:
            raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")
        fixed = iterations if (setup is not None or iterations > 1) else None
        return self._serve(target, (tuple(args), dict(kwargs or {})), setup, teardown, keep_result=True, fixed=fixed,
                           warmup_rounds=warmup_rounds if fixed is not None else None)

    def _claim(self, mode: str) -> None:
        if self._mode:
            self.has_error = True
            raise RuntimeError(f"Fixture can only be used once. Previously it was used in {self._mode} mode.")
        self._mode = mode

    def _serve(self, target: Callable[..., Any], arguments: tuple[tuple, dict] | None,
               setup: Callable[[], Any] | None, teardown: Callable[..., Any] | None, keep_result: bool,
               fixed: int | None = None, warmup_rounds: int | None = None) -> Any:
        """Wait for the controller's commands (see the module doc) and return the function's result as pytest-benchmark
        does: pedantic (``keep_result``) the last round's when that round made one call, else that of one more call
        (``benchmark(fn)`` always makes one; it keeps no round's result alive through the next round)."""
        def call_args() -> tuple[tuple, dict]:
            given = arguments or ((), {})
            made = setup() if setup is not None else None
            return (made[0], made[1]) if made else given

        self._channel.send(ev="ready", nodeid=self.fullname, group=self.group, extra_info=_plain(self.extra_info),
                           iterations=fixed, warmup_rounds=warmup_rounds)
        result: Any = _NO_RESULT
        while True:
            command = self._channel.receive()
            op = command["op"]
            if op == "time":
                result = self._time(target, call_args, teardown, command, keep_result)
            elif op == "finish":
                break
            elif op == "abort":
                self.skipped = True
                pytest.skip(command.get("reason") or "stopped by the controller")
            else:
                raise RuntimeError(f"benchmark worker: unexpected command {op!r} while timing {self.fullname}")
        if self._per_call:
            self.stats = _Metadata(self._per_call)
        if result is _NO_RESULT:  # the last round made several calls: one more for the result, as pytest-benchmark
            args, kwargs = call_args()
            result = target(*args, **kwargs)
            if teardown is not None:
                teardown(*args, **kwargs)
        return result

    def _time(self, target: Callable[..., Any], call_args: Callable[[], tuple[tuple, dict]],
              teardown: Callable[..., Any] | None, command: dict[str, Any], keep_result: bool) -> Any:
        """Answer one ``time`` command (see the module doc); with ``keep_result``, the last round's result
        (_NO_RESULT after a round of several calls, or without)."""
        times, result = [], _NO_RESULT
        for _ in range(command["rounds"]):
            elapsed, result = self._round(target, call_args, teardown, command["iterations"], keep_result,
                                          command.get("stretch", 1.0), bool(command.get("untimed")))
            times.append(elapsed)
        if not command.get("warmup"):
            self._per_call += [t / command["iterations"] for t in times]
        self._channel.send(ev="times", t=times)
        return result

    @staticmethod
    def _round(target: Callable[..., Any], call_args: Callable[[], tuple[tuple, dict]],
               teardown: Callable[..., Any] | None, iterations: int, keep: bool, stretch: float,
               untimed: bool = False) -> tuple[float, Any]:
        """Seconds of one round of ``iterations`` calls, and with ``keep`` the call's result when it made one (else
        _NO_RESULT)."""
        args, kwargs = call_args()
        clock = _CLOCK
        start = clock.start()
        if keep and iterations == 1:
            result = target(*args, **kwargs)
        else:
            for _ in range(iterations):
                target(*args, **kwargs)
            result = _NO_RESULT
        elapsed = clock.since(start)
        if stretch > 1.0:  # the planted slowdown: spin until the round is ``stretch`` times as long
            goal = elapsed * stretch
            while clock.since(start) < goal:
                pass
            if not untimed:
                elapsed = clock.since(start)
        if teardown is not None:
            teardown(*args, **kwargs)
        return elapsed, result

    def _cleanup(self) -> None:  # pytest-benchmark's fixture API; nothing to undo here
        return None


class _FixtureOverride:
    """Registered after every entry-point plugin, so its ``benchmark`` fixture wins over pytest-benchmark's."""

    def __init__(self, worker: WorkerPlugin) -> None:
        self.worker = worker

    @pytest.fixture
    def benchmark(self, request: pytest.FixtureRequest) -> PairedBenchmark:
        fixture = PairedBenchmark(request.node, self.worker.channel)
        self.worker.fixture = fixture
        return fixture


class WorkerPlugin:
    """Collects, tells the controller what it found, then runs the tests the controller names (see the module doc)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.fixture: PairedBenchmark | None = None
        self.reports: list[pytest.TestReport] = []
        self.collect_errors: list[dict[str, str]] = []

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.pluginmanager.register(_FixtureOverride(self), "harness-paired-fixture")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a module that does not import: the controller refuses to run without it
            self.collect_errors.append({"nodeid": report.nodeid, "message": report.longreprtext})

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = [{"nodeid": item.nodeid, "name": item.name, "benchmark": "benchmark" in getattr(item, "fixturenames", ()),
                  "group": _static_group(item), "role": _static_role(item), "threads": _static_threads(item),
                  "skip": _static_skip(item)}
                 for item in session.items]
        machine, commit, version = _run_info(session.config)
        self.channel.send(ev="collected", items=items, machine_info=_plain(machine), commit_info=_plain(commit),
                          version=version, clock=_CLOCK.name, errors=self.collect_errors)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        items = {item.nodeid: item for item in session.items}
        while True:
            command = self.channel.receive()
            if command["op"] == "quit":
                return True
            if command["op"] == "release":
                _teardown(session, None)
                _trim_heap()
                self.channel.send(ev="released")
                continue
            if command["op"] != "start" or command.get("nodeid") not in items:
                self.channel.send(ev="error", message=f"unexpected command {command!r}")
                continue
            item = items[command["nodeid"]]
            self._run(item, _sibling(item, session.items) if command.get("keep", True) else None)

    def _run(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Run ``item``'s protocol, first tearing down what the previous test left set up that ``item`` does not
        share, and then tearing it down as far as ``nextitem`` allows (None: completely)."""
        self.fixture, self.reports = None, []
        _teardown(item.session, item)
        item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        _trim_heap()
        outcome, message = "passed", ""
        for report in self.reports:
            if report.failed:
                outcome, message = "failed", f"{report.when}: {report.longreprtext}"
                break
            if report.skipped:
                outcome = "skipped"
                longrepr = report.longrepr
                message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        fixture = self.fixture
        self.channel.send(
            ev="done", nodeid=item.nodeid, outcome=outcome, message=message, name=item.name,
            group=fixture.group if fixture else _static_group(item),
            params=_plain(fixture.params) if fixture else None, param=fixture.param if fixture else None,
            extra_info=_plain(fixture.extra_info) if fixture else {},
        )


def _teardown(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down what the last test left set up that ``nextitem`` does not share (None: everything)."""
    try:
        session._setupstate.teardown_exact(nextitem)
    except Exception as exc:  # a finalizer of the previous test's module: its test already passed or failed
        print(f"harness worker: tearing down before {nextitem.nodeid if nextitem else 'release'} raised {exc!r}",
              file=sys.stderr, flush=True)


def _trim_heap() -> None:
    """Give the heap's free memory back to the system (glibc's ``malloc_trim(3)``) after every benchmark: malloc never
    trims the heap by itself here (ISOLATION_ENV), so a worker would hold its largest benchmark's peak (measured with
    a 64 MiB threshold already: 340 MB each, 36 workers of a whole-suite A/B, 17 GB in all), and the next benchmark
    would start from a heap that depends on what ran before it."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _sibling(item: pytest.Item, items: list[pytest.Item]) -> pytest.Item | None:
    """Another test of ``item``'s module (the one its teardown keeps the module's fixtures for), else None."""
    module = item.getparent(pytest.Module)
    if module is None:
        return None
    return next((other for other in items if other is not item and other.getparent(pytest.Module) is module), None)


def _run_info(config: pytest.Config) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(machine_info, commit_info, pytest-benchmark version) as pytest-benchmark would save them with its hooks."""
    hook = config.hook
    if not hasattr(hook, "pytest_benchmark_generate_machine_info"):
        return {}, {}, ""
    import pytest_benchmark  # noqa: PLC0415 - present whenever its hooks are

    machine = hook.pytest_benchmark_generate_machine_info(config=config)
    hook.pytest_benchmark_update_machine_info(config=config, machine_info=machine)
    commit = hook.pytest_benchmark_generate_commit_info(config=config)
    hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit)
    return machine, commit, pytest_benchmark.__version__


def main(argv: list[str]) -> int:
    """Run pytest with ``argv`` and the worker plugin on the channel named by CHANNEL_ENV; return pytest's status."""
    read_fd, write_fd = (int(fd) for fd in os.environ[CHANNEL_ENV].split(","))
    return int(pytest.main(argv, plugins=[WorkerPlugin(Channel(read_fd, write_fd))]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
