"""Choosing the CPUs that the workers of one comparison share: the ones that were idlest since the last choice."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CpuChooser"]

_STAT = Path("/proc/stat")


class CpuChooser:
    """``choose(count)`` returns the ``count`` CPUs of this process's affinity set with the most idle time
    (``/proc/stat``: idle + iowait jiffies) since the previous call, or since construction on the first call (all of
    them when it has fewer); None where that cannot be read (not Linux), so callers leave placement to the scheduler.
    Raises ValueError for a count below 1."""

    def __init__(self) -> None:
        self._allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._last = self._idle()

    def choose(self, count: int = 1) -> set[int] | None:
        if count < 1:
            raise ValueError(f"a benchmark runs on at least one CPU, got {count}")
        now = self._idle()
        if not now or not self._allowed:
            return None
        gained = {cpu: now.get(cpu, 0) - self._last.get(cpu, 0) for cpu in self._allowed}
        self._last = now
        return set(sorted(self._allowed, key=lambda cpu: (-gained[cpu], cpu))[:count])

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
