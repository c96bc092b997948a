"""Choosing the CPUs that the workers of one comparison share: the ones that other programs left idlest since the
last choice."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CpuChooser"]

_STAT = Path("/proc/stat")


class CpuChooser:
    """``choose(count, own_cpu_seconds)`` returns the ``count`` CPUs of this process's affinity set that were most
    available since the previous call (since construction on the first call; all of them when it has fewer), or None
    where that cannot be read (not Linux), so callers leave placement to the scheduler. Raises ValueError for a count
    below 1.

    Available = idle + iowait jiffies (``/proc/stat``), plus, on the CPUs the previous call returned, the CPU time
    the caller's own workers used there (``own_cpu_seconds``: their cumulative CPU seconds, e.g.
    ``WorkerProcess.cpu_seconds``; the increase since the previous call is spread evenly over those CPUs). Without
    that, the CPU the workers were timed on looks as busy as one that a CPU hog holds, and a tie went to the lowest
    CPU number, which put a run's workers beside the hog. A tie now keeps the previous choice.
    """

    def __init__(self) -> None:
        self._allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._last = self._idle()
        self._chosen: set[int] = set()
        self._own: float | None = None

    def choose(self, count: int = 1, own_cpu_seconds: float | None = None) -> set[int] | None:
        if count < 1:
            raise ValueError(f"a benchmark runs on at least one CPU, got {count}")
        now = self._idle()
        if not now or not self._allowed:
            return None
        available = {cpu: float(now.get(cpu, 0) - self._last.get(cpu, 0)) for cpu in self._allowed}
        if own_cpu_seconds is not None and self._own is not None and self._chosen:
            share = max(0.0, own_cpu_seconds - self._own) * _ticks_per_second() / len(self._chosen)
            for cpu in self._chosen & set(available):
                available[cpu] += share
        self._last, self._own = now, own_cpu_seconds
        ranked = sorted(self._allowed, key=lambda cpu: (-available[cpu], cpu not in self._chosen, cpu))
        self._chosen = set(ranked[:count])
        return set(self._chosen)

    @staticmethod
    def _idle() -> dict[int, int]:
        """cpu -> idle + iowait jiffies since boot; {} when /proc/stat cannot be read."""
        try:
            lines = _STAT.read_text().splitlines()
        except OSError:
            return {}
        idle = {}
        for line in lines:
            fields = line.split()  # cpuN user nice system idle iowait ...
            if len(fields) >= 6 and fields[0].startswith("cpu") and fields[0][3:].isdigit():
                try:
                    idle[int(fields[0][3:])] = int(fields[4]) + int(fields[5])
                except ValueError:
                    continue  # a line not in the kernel's format counts as unreadable, like a missing CPU
        return idle


def _ticks_per_second() -> int:
    """The unit of /proc/stat's times (USER_HZ, which ``sysconf(_SC_CLK_TCK)`` gives; 100 on Linux)."""
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
