"""The paired runner's timing loop with sides whose round times are known, and the worker's round clock."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from harness.gate import log_ratios
from harness.paired.ab import look_budget, pair_groups
from harness.paired.engine import (
    STOP_BUDGET,
    STOP_MAX,
    STOP_PRECISION,
    Budget,
    Calls,
    calibrate,
    half_width,
    iterations_for,
    measure,
    round_order,
)
from harness.paired.session import time_alone_or_beside
from harness.paired.worker import RunClock


class FakeSide:
    """A side whose call takes ``per_call`` seconds times lognormal noise of ``sigma``; it records every request."""

    def __init__(self, per_call: float, sigma: float = 0.0, seed: int = 0, delay: float = 0.0) -> None:
        self.per_call, self.sigma, self.delay = per_call, sigma, delay
        self.rng = np.random.default_rng(seed)
        self.requests: list[tuple[int, bool]] = []

    def time(self, iterations: int, warmup: bool = False) -> float:
        self.requests.append((iterations, warmup))
        time.sleep(self.delay)
        return iterations * self.per_call * float(self.rng.lognormal(0.0, self.sigma))


def spread(times):
    return half_width(log_ratios(times[0], times[1]), 0.95)


def test_calibration_sizes_rounds_to_the_target_and_its_rounds_are_warmup():
    side = FakeSide(1e-5)
    [per_call] = calibrate([side], round_s=0.002)
    assert per_call == pytest.approx(1e-5)
    assert side.requests == [(1, True), (200, True)]
    assert iterations_for(per_call, 0.002) == 200
    assert iterations_for(0.5, 0.002) == 1  # a call longer than a round: one call per round


def test_fixed_calls_are_not_calibrated_and_warm_up_as_the_benchmark_says():
    """Calls a benchmark fixed itself (pedantic) get its ``warmup_rounds`` rounds of them, none when it says 0."""
    for warmup, requests in ((0, []), (2, [(3, True), (3, True)])):
        side = FakeSide(1e-3)
        [per_call] = calibrate([side], round_s=0.002, calls=Calls(3, warmup))
        assert side.requests == requests
        assert per_call == (math.inf if not warmup else pytest.approx(1e-3))


def test_rounds_alternate_a_b_b_a_and_stop_when_precise():
    a, b = FakeSide(1e-3, 0.01, seed=1), FakeSide(1.1e-3, 0.01, seed=2)
    order: list[str] = []
    a_time, b_time = a.time, b.time
    a.time = lambda n, warmup=False: order.append("A") or a_time(n, warmup)  # type: ignore[method-assign]
    b.time = lambda n, warmup=False: order.append("B") or b_time(n, warmup)  # type: ignore[method-assign]
    rounds = measure([a, b], [1, 1], Budget(min_rounds=8, precision=0.01, seconds=60), spread)
    assert order[:8] == list("ABBAABBA")
    assert rounds.stop == STOP_PRECISION and len(rounds.times[0]) == len(rounds.times[1]) >= 8
    assert np.median(np.asarray(rounds.times[1]) / rounds.times[0]) == pytest.approx(1.1, rel=0.01)


def test_with_two_pairs_or_more_no_side_ever_follows_itself_and_each_pair_takes_turns_going_first():
    assert round_order(2) == [0, 1, 1, 0]
    assert round_order(1) == [0, 0]
    for count in (3, 4, 6, 8):
        order = round_order(count) * 3
        assert all(first != second for first, second in zip(order, order[1:]))
        assert sorted(round_order(count)) == sorted(list(range(count)) * 2)
    order = round_order(6)
    for pair in range(3):
        a, b = 2 * pair, 2 * pair + 1
        first, second = order[:6], order[6:]
        assert first.index(a) + 1 == first.index(b) and second.index(b) + 1 == second.index(a)


def test_a_look_times_its_process_pairs_two_at_a_time_so_no_worker_follows_itself():
    assert pair_groups(6) == [[0, 1], [2, 3], [4, 5]]
    assert pair_groups(3) == [[0, 1, 2]] and pair_groups(5) == [[0, 1], [2, 3, 4]]
    assert pair_groups(1) == [[0]] and pair_groups(2) == [[0, 1]]
    for pairs in range(2, 17):
        groups = pair_groups(pairs)
        assert [p for g in groups for p in g] == list(range(pairs)) and all(len(g) >= 2 for g in groups)


def test_a_noisy_benchmark_stops_when_its_budget_is_spent_and_says_so():
    a, b = FakeSide(1e-3, 0.5, seed=3, delay=0.001), FakeSide(1e-3, 0.5, seed=4, delay=0.001)
    started = time.perf_counter()
    rounds = measure([a, b], [1, 1], Budget(min_rounds=8, precision=0.001, seconds=0.2), spread)
    assert rounds.stop == STOP_BUDGET and 0.2 <= rounds.seconds < time.perf_counter() - started + 1e-3
    assert rounds.seconds < 1.0


def test_a_look_times_every_worker_of_a_slow_benchmark_four_times_whatever_its_budget():
    """A call far longer than the look's budget (a cold DISK read): each worker still gets two rounds in each order,
    so one disturbed round cannot decide its pair's median; the budget then stops the look."""
    sides = [FakeSide(0.01, delay=0.002) for _ in range(4)]
    rounds = measure(sides, [1] * 4, look_budget(0.001), lambda _: float("inf"))
    assert rounds.stop == STOP_BUDGET and [len(t) for t in rounds.times] == [4, 4, 4, 4]
    assert [s.requests for s in sides] == [[(1, False)] * 4] * 4


def test_the_round_cap_ends_a_benchmark_that_never_gets_precise():
    a, b = FakeSide(1e-3, 0.5, seed=5), FakeSide(1e-3, 0.5, seed=6)
    rounds = measure([a, b], [1, 1], Budget(min_rounds=8, max_rounds=40, precision=1e-6, seconds=60), spread)
    assert rounds.stop == STOP_MAX and len(rounds.times[0]) == 40


def test_bad_budgets_are_refused():
    with pytest.raises(ValueError, match="need 2 <= min_rounds <= max_rounds"):
        Budget(min_rounds=10, max_rounds=5)
    with pytest.raises(ValueError, match="invalid measurement budget"):
        Budget(confidence=1.0)


def test_the_round_clock_keeps_sleep_and_work_and_drops_nothing_else():
    clock = RunClock()
    start = clock.start()
    time.sleep(0.05)
    slept = clock.since(start)
    assert 0.05 <= slept < 0.5  # sleeping is the benchmark's own time: it stays in
    start = clock.start()
    deadline = time.perf_counter() + 0.02
    while time.perf_counter() < deadline:
        pass
    busy = clock.since(start)
    assert busy <= time.perf_counter() - deadline + 0.02 + 1e-3  # never more than the wall time
    assert clock.name in ("perf_counter - run-queue wait", "perf_counter")


@pytest.mark.parametrize(("wall", "ran", "queued", "expected"), [
    (0.010, 0.006, 0.004, 0.006),  # preempted for 4 ms: the neighbours' time is taken out
    (0.010, 0.0001, 0.0, 0.010),  # slept 10 ms: the benchmark's own waiting stays in
    (0.010, 0.005, 0.007, 0.005),  # wait accounted at a tick overshoots: the time on a CPU is the floor
    (0.002, 0.0, 0.003, 1e-9),  # nothing measurable: never zero or negative
])
def test_the_round_clock_is_wall_time_less_the_run_queue_wait_floored_at_cpu_time(monkeypatch, wall, ran, queued,
                                                                                  expected):
    """The clock's arithmetic on given schedstat readings (first field: ns on a CPU, second: ns in a run queue), so
    it is checked exactly, whatever else this machine runs."""
    from harness.paired import worker

    clock = RunClock()
    readings = iter([(1.0, 2.0), (1.0 + ran, 2.0 + queued)])
    walls = iter([100.0, 100.0 + wall])
    monkeypatch.setattr(clock, "_schedstat", lambda: next(readings))
    monkeypatch.setattr(worker.time, "perf_counter", lambda: next(walls))
    start = clock.start()
    assert clock.since(start) == pytest.approx(expected, abs=1e-12)


def test_the_round_clock_also_takes_out_the_waits_of_the_processes_the_worker_started(monkeypatch):
    """A round that waits for its own server is stretched by the server's run-queue waits too: they are taken out,
    a thread that exited during the round counts for nothing, and the floor stays this thread's CPU time."""
    from harness.paired import worker

    clock = RunClock()
    child = {"/proc/7/task/7/schedstat": 5.0, "/proc/7/task/8/schedstat": 1.0, "/proc/9/task/9/schedstat": 3.0}
    after = {"/proc/7/task/7/schedstat": 5.003, "/proc/7/task/8/schedstat": 1.002}  # thread 9 exited meanwhile
    readings = iter([(1.0, 2.0), (1.006, 2.001)])
    walls = iter([100.0, 100.010])
    monkeypatch.setattr(clock, "_schedstat", lambda: next(readings))
    monkeypatch.setattr(worker.time, "perf_counter", lambda: next(walls))
    monkeypatch.setattr(worker, "_child_tasks", lambda: list(child))
    monkeypatch.setattr(worker, "_queued_of", lambda paths: dict(child) if isinstance(paths, list) else dict(after))
    start = clock.start()
    assert clock.since(start) == pytest.approx(0.006, abs=1e-12)  # 10 ms - 1 - 3 - 2 ms of waits = 4 ms < 6 ms on CPU


def test_the_threads_of_a_started_process_are_found():
    import subprocess
    import sys

    from harness.paired import worker

    proc = subprocess.Popen([sys.executable, "-c", "import threading, time; threading.Thread(target=time.sleep, "
                             "args=(30,)).start(); print('up', flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        tasks = [p for p in worker._child_tasks() if p.startswith(f"/proc/{proc.pid}/")]
        assert len(tasks) == 2  # its main thread and the one it started
        assert set(worker._queued_of(tasks)) == set(tasks)
    finally:
        proc.kill()
        proc.wait()


def test_sides_of_one_benchmark_make_the_same_calls_per_round_and_different_benchmarks_their_own():
    """Calls per round set a round's shape (how many calls find the caches cold), so the sides of one A/B comparison
    share them, sized for the quickest side; an entry and its limit (stored mode) keep their own."""
    def sides():
        return [FakeSide(1e-5), FakeSide(1.3e-5), FakeSide(0.8e-5), FakeSide(1e-5)]
    budget = Budget(min_rounds=2, max_rounds=2)
    quickest = iterations_for(0.8e-5, budget.round_s)  # 250 calls of 8 us make 2 ms
    shared = time_alone_or_beside(sides(), [Calls()] * 4, budget, spread, same_calls=True)
    assert shared.iterations == (quickest,) * 4
    own = time_alone_or_beside(sides(), [Calls()] * 4, budget, spread)
    assert own.iterations == tuple(iterations_for(t, budget.round_s) for t in (1e-5, 1.3e-5, 0.8e-5, 1e-5))
    assert len(set(own.iterations)) == 3
    fixed = time_alone_or_beside(sides(), [Calls(7), Calls(), Calls(), Calls(3)], budget, spread, same_calls=True)
    assert fixed.iterations == (7, quickest, quickest, 3)  # calls the benchmark set itself (pedantic) stay its own
