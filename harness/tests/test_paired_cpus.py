"""Where the paired runner places its workers: the idlest CPUs (``CpuChooser``), and every thread and child process of
a worker pinned there (``_tasks_of_tree``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.paired import cpus as cpus_module
from harness.paired.cpus import CpuChooser
from harness.paired.process import _cpu_seconds, _processes_of_tree, _tasks_of_tree

linux_only = pytest.mark.skipif(not Path("/proc/self/task").is_dir() or not hasattr(os, "sched_getaffinity"),
                                reason="needs Linux /proc and CPU affinity")


def _stat(idle: dict[int, int], busy: dict[int, int] | None = None) -> str:
    """A /proc/stat with the given idle and busy (user) ticks per CPU since boot (iowait 0)."""
    busy = busy or {}
    lines = ["cpu  1 2 3 4 5 6 7 8 9 10"]
    lines += [f"cpu{cpu} {100 + busy.get(cpu, 0)} 0 100 {ticks} 0 0 0 0 0 0" for cpu, ticks in idle.items()]
    return "\n".join(lines) + "\nintr 0\n"


@pytest.fixture
def fake_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    stat = tmp_path / "stat"
    stat.write_text(_stat({0: 0, 1: 0, 2: 0}))
    monkeypatch.setattr(cpus_module, "_STAT", stat)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    return stat


def test_the_idlest_cpus_since_the_last_choice_are_chosen(fake_stat: Path) -> None:
    chooser = CpuChooser()
    fake_stat.write_text(_stat({0: 10, 1: 50, 2: 30}))
    assert chooser.choose() == {1}
    fake_stat.write_text(_stat({0: 100, 1: 60, 2: 70}))  # since the last choice: cpu0 +90, cpu1 +10, cpu2 +40
    assert chooser.choose(2) == {0, 2}
    assert chooser.choose(5) == {0, 1, 2}  # more than there are: all of them


def test_a_count_below_one_is_refused(fake_stat: Path) -> None:
    with pytest.raises(ValueError, match="at least one CPU, got 0"):
        CpuChooser().choose(0)


def test_lines_of_proc_stat_in_another_format_are_skipped(fake_stat: Path) -> None:
    chooser = CpuChooser()
    fake_stat.write_text("cpu0 100 0 100 50 0 0\n\ncpu1 1 2 3 x 5 6\ncpu2 100 0 100 90 0 0\n")
    assert chooser.choose() == {2}  # cpu0 +50, cpu1 unreadable (as if 0), cpu2 +90


def test_without_proc_stat_placement_is_left_to_the_scheduler(fake_stat: Path) -> None:
    chooser = CpuChooser()
    fake_stat.unlink()
    assert chooser.choose() is None


def _python_child(code: str) -> subprocess.Popen:
    """``python -c code`` with its stdout readable as text."""
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@linux_only
def test_the_tree_holds_every_thread_and_descendant_process() -> None:
    code = ("import subprocess, sys, threading, time; threading.Thread(target=time.sleep, args=(30,), daemon=True)"
            ".start(); child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print(child.pid, flush=True); time.sleep(30)")
    parent = _python_child(code)
    child = None
    try:
        child = int(parent.stdout.readline())  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        while len(list(Path(f"/proc/{parent.pid}/task").iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        tasks = _tasks_of_tree(parent.pid)
        assert parent.pid in tasks and child in tasks
        assert len([t for t in tasks if Path(f"/proc/{parent.pid}/task/{t}").exists()]) >= 2  # the parent's thread too
    finally:
        for pid in (child, parent.pid):
            if pid is not None:
                os.kill(pid, 9)
        parent.wait()


def test_a_process_that_is_gone_has_no_tasks() -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert _tasks_of_tree(int(done.stdout)) == []


def test_the_cpu_busy_only_with_our_own_workers_is_kept_and_one_a_hog_holds_is_avoided(
        fake_stat: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chooser = CpuChooser()
    # the first choice, at once: no interval to judge, so the chooser watches the next 0.1 s, in which a hog keeps
    # cpu0 busy and cpu1 is idle
    monkeypatch.setattr(cpus_module.time, "sleep", lambda s: fake_stat.write_text(_stat({0: 0, 1: 10, 2: 0},
                                                                                        {0: 10, 2: 10})))
    assert chooser.choose(1) == {1}
    chooser.pinned(own_cpu_seconds=0.5)
    # next interval: every CPU busy throughout (no idle ticks), cpu1 with our pinned workers' 2 s (200 ticks), the
    # others with somebody else's work: cpu1 stays
    fake_stat.write_text(_stat({0: 0, 1: 10, 2: 0}, {0: 210, 1: 200, 2: 210}))
    assert chooser.choose(1, own_cpu_seconds=2.5) == {1}
    chooser.pinned(own_cpu_seconds=9.5)  # 7 s of setups before pinning (on every CPU) are not credited to cpu1
    fake_stat.write_text(_stat({0: 0, 1: 10, 2: 50}, {0: 310, 1: 300, 2: 260}))
    assert chooser.choose(1, own_cpu_seconds=9.9) == {2}  # cpu1: 40 ticks of ours, cpu2: 50 idle


def test_workers_pinned_group_after_group_are_credited_from_the_first_pin(fake_stat: Path) -> None:
    """A look pins its process pairs two at a time: the rounds of every group are ours, not the last group's only."""
    chooser = CpuChooser()
    fake_stat.write_text(_stat({0: 10, 1: 20, 2: 0}))
    assert chooser.choose(1) == {1}
    chooser.pinned(own_cpu_seconds=0.5)
    chooser.pinned(own_cpu_seconds=1.5)  # the second group, after the first used 1 s of cpu1
    # cpu1 busy throughout with our 2 s (200 ticks) of both groups; cpu0 and cpu2 idle 1.5 s of the 2 s (150 ticks)
    fake_stat.write_text(_stat({0: 160, 1: 20, 2: 150}, {0: 50, 1: 200, 2: 50}))
    # credited from the first pin, cpu1 had 200 ticks for us and stays; from the last pin it would read 100 (< 150)
    assert chooser.choose(1, own_cpu_seconds=2.5) == {1}


def test_other_programs_time_on_the_chosen_cpus_is_what_our_workers_did_not_use(fake_stat: Path) -> None:
    chooser = CpuChooser()
    fake_stat.write_text(_stat({0: 10, 1: 10, 2: 0}))
    assert chooser.choose(2) == {0, 1}
    assert chooser.others_cpus(0.0) is None  # not pinned yet
    chooser.pinned(own_cpu_seconds=1.0)
    # 2 s on each CPU: cpu0 all busy, cpu1 busy 1 s; our workers used 1.5 s of it, so others took 1.5 s of 2 s
    fake_stat.write_text(_stat({0: 10, 1: 110, 2: 200}, {0: 200, 1: 100}))
    assert chooser.others_cpus(2.5) == pytest.approx(1.5 / 2.0)
    assert chooser.others_cpus(9.0) == 0.0  # never below nothing
    chooser.choose(1)
    assert chooser.others_cpus(9.0) is None  # a new choice, not yet pinned


def test_a_tie_keeps_the_previous_choice(fake_stat: Path) -> None:
    chooser = CpuChooser()
    fake_stat.write_text(_stat({0: 10, 1: 50, 2: 30}))
    assert chooser.choose() == {1}
    fake_stat.write_text(_stat({0: 60, 1: 100, 2: 80}))  # +50 each
    assert chooser.choose() == {1}


@linux_only
def test_a_workers_cpu_seconds_count_its_children() -> None:
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "'import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass\\ntime.sleep(30)'])"
            "; time.sleep(30)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while _tree_seconds(parent.pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _tree_seconds(parent.pid) >= 0.3  # the child's busy 0.3 s counts for the parent's tree
    finally:
        for pid in _processes_of_tree(parent.pid):
            os.kill(pid, 9)
        parent.wait()


@linux_only
def test_a_child_that_exited_still_counts_for_its_parent() -> None:
    # a compiler run per call: the child is gone when the controller looks, its CPU time is the parent's cutime
    code = ("import os, subprocess, sys, time; subprocess.run([sys.executable, '-c', "
            "'import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass']); "
            "print('done', flush=True); time.sleep(30)")
    parent = _python_child(code)
    try:
        assert parent.stdout.readline() == "done\n"  # type: ignore[union-attr]
        assert _processes_of_tree(parent.pid) == [parent.pid]
        assert _cpu_seconds(parent.pid) >= 0.3
    finally:
        parent.kill()
        parent.wait()


def _tree_seconds(pid: int) -> float:
    return sum(_cpu_seconds(p) for p in _processes_of_tree(pid))
