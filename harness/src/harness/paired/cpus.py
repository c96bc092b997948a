"""Choosing the CPUs that the workers of one comparison share: the ones that other programs left idlest since the
last choice."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["CpuChooser"]

_STAT = Path("/proc/stat")
_SHORTEST_S = 0.1  # a shorter interval (the first choice) is sampled afresh over this long: 10 ticks at USER_HZ 100


class CpuChooser:
    """``choose(count, own_cpu_seconds)`` returns the ``count`` CPUs of this process's affinity set that were most
    available since the previous call (all of them when it has fewer), or None where that cannot be read (not
    Linux), so callers leave placement to the scheduler. Raises ValueError for a count below 1.

    Available = idle + iowait time (``/proc/stat``, in ticks), plus, on the CPUs the previous call returned, the CPU
    time the caller's own workers used there: ``own_cpu_seconds`` (their cumulative CPU seconds, e.g.
    ``WorkerProcess.cpu_seconds``) minus what ``pinned`` was first told after that call, spread evenly
    over them, at most the interval itself (what they used before, e.g. setting up on every CPU, ran elsewhere too).
    Without that credit, the CPU the workers were timed on looks as busy as one a CPU hog holds. A tie keeps the
    previous choice. An interval shorter than 0.1 s (the first call, right after construction) holds
    no information, so the call first waits 0.1 s and judges that: a tie there went to CPU 0, beside a hog on it.
    """

    def __init__(self) -> None:
        self._allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._last = _sample()
        self._chosen: set[int] = set()
        self._own: float | None = None  # at the last pin: others_cpus counts from there
        self._credit_from: float | None = None  # at the first pin since the last choice: choose credits from there
        self._at_pin: dict[int, tuple[int, int]] = {}

    def choose(self, count: int = 1, own_cpu_seconds: float | None = None) -> set[int] | None:
        if count < 1:
            raise ValueError(f"a benchmark runs on at least one CPU, got {count}")
        now = _sample()
        if not now or not self._allowed:
            return None
        if max((now[c][1] - self._last.get(c, now[c])[1] for c in now), default=0) < _SHORTEST_S * _ticks_per_second():
            self._last, self._credit_from = now, None  # too short to say anything: look at the next 0.1 s instead
            time.sleep(_SHORTEST_S)
            now = _sample() or now
        idle = {c: float(now.get(c, (0, 0))[0] - self._last.get(c, (0, 0))[0]) for c in self._allowed}
        total = {c: float(now.get(c, (0, 0))[1] - self._last.get(c, (0, 0))[1]) for c in self._allowed}
        if own_cpu_seconds is not None and self._credit_from is not None and self._chosen:
            share = max(0.0, own_cpu_seconds - self._credit_from) * _ticks_per_second() / len(self._chosen)
            for cpu in self._chosen & set(idle):
                idle[cpu] = min(max(total[cpu], idle[cpu]), idle[cpu] + share)
        self._last, self._own, self._credit_from, self._at_pin = now, None, None, {}
        ranked = sorted(self._allowed, key=lambda cpu: (-idle[cpu], cpu not in self._chosen, cpu))
        self._chosen = set(ranked[:count])
        return set(self._chosen)

    def pinned(self, own_cpu_seconds: float) -> None:
        """Say that the workers are now pinned to the last choice, having used ``own_cpu_seconds`` so far (called
        again when a benchmark's workers are pinned group after group: ``choose`` credits them from the first pin,
        ``others_cpus`` counts from the last)."""
        self._own = own_cpu_seconds
        if self._credit_from is None:
            self._credit_from = own_cpu_seconds
        self._at_pin = _sample()

    def others_cpus(self, own_cpu_seconds: float) -> float | None:
        """How many CPUs' worth of time other programs took on the last choice since ``pinned``: its busy ticks
        (``/proc/stat``) less the ``own_cpu_seconds`` the workers used meanwhile, over the interval's length; e.g.
        1.0 when a CPU hog held one of the chosen CPUs throughout. None before ``pinned``, without a choice, or where
        /proc/stat cannot be read."""
        now = _sample()
        if self._own is None or not self._chosen or not now or not self._at_pin:
            return None
        busy = total = 0.0
        for cpu in self._chosen:
            before, after = self._at_pin.get(cpu), now.get(cpu)
            if before is None or after is None:
                return None
            total += after[1] - before[1]
            busy += (after[1] - after[0]) - (before[1] - before[0])
        if total <= 0:
            return None
        ours = max(0.0, own_cpu_seconds - self._own) * _ticks_per_second()
        return max(0.0, busy - ours) / (total / len(self._chosen))


def _sample() -> dict[int, tuple[int, int]]:
    """cpu -> (idle + iowait ticks, all ticks: user nice system idle iowait irq softirq steal) since boot; {} when
    /proc/stat cannot be read."""
    try:
        lines = _STAT.read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        fields = line.split()  # cpuN user nice system idle iowait irq softirq steal guest guest_nice
        if len(fields) >= 6 and fields[0].startswith("cpu") and fields[0][3:].isdigit():
            try:
                ticks = [int(x) for x in fields[1:9]]
            except ValueError:
                continue  # a line not in the kernel's format counts as unreadable, like a missing CPU
            found[int(fields[0][3:])] = (ticks[3] + ticks[4], sum(ticks))
    return found


def _ticks_per_second() -> int:
    """The unit of /proc/stat's times (USER_HZ, which ``sysconf(_SC_CLK_TCK)`` gives; 100 on Linux)."""
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
