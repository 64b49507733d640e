"""Peak memory, "actual/total" in GiB as in the seeds' ``mem`` column.

- Accelerators (``cuda`` device type): used = the larger of torch's peak reserved memory
  (allocator) and the peak the vendor's management library reports for this process
  (context included, sampled by ``sample()``): NVML on nvidia, ``ixsmi`` on iluvatar, none
  on kunlunxin; total = the management library's device total, else torch's
  ``total_memory``.
- CPU: used = the larger of this process's peak resident set size (``getrusage``, exact)
  and the largest sample of its resident set size plus the private memory (USS) of its
  child processes (data-loader workers): pages a forked worker shares with this process are
  in this process's RSS already and counted once. Children are read from
  /proc/PID/smaps_rollup, which takes tens of milliseconds for a process with torch loaded,
  so at most every ``tool_interval_s`` seconds. total = the host's physical memory.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.device import Device

GIB = float(1 << 30)


@functools.cache
def host_total_gib() -> float | None:
    """Physical memory of the host (constant for the life of the process: cached)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GIB
    except (ValueError, OSError):
        return None


def peak_rss_bytes() -> int | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024  # Linux: KiB


def child_pids(pid: int) -> list[int]:
    """All descendants of ``pid`` (Linux /proc; [] elsewhere)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(p) for p in f.read().split()]
                out += kids
                todo += kids
    return out


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (Linux /proc/PID/statm: cheap)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def uss_bytes(pid: int) -> int | None:
    """Private (unshared) resident memory of ``pid`` (/proc/PID/smaps_rollup: slow)."""
    total, found = 0, False
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
                    found = True
    except (OSError, ValueError, IndexError):
        return None
    return total if found else None


class MemoryMonitor:
    """Peak memory of one process and its device; call ``sample()`` now and then.

    Slow readings (an smi tool, the children's private memory on CPU) are taken at most every
    ``tool_interval_s`` seconds.
    """

    def __init__(
        self,
        device: Device,
        tool_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.device = device
        self.tool_interval_s = tool_interval_s
        self.clock = clock
        self._peak = 0
        self._tool_at: float | None = None
        self._children = 0  # the children's private memory at the last slow reading

    def sample(self) -> None:
        used = self._current_bytes()
        if used is not None:
            self._peak = max(self._peak, used)

    def _current_bytes(self) -> int | None:
        dev, stack = self.device, self.device.stack
        if dev.type == "cpu":
            pid = os.getpid()
            children = child_pids(pid)
            if not children:
                self._children = 0
            elif self._slow_reading_due():
                self._children = sum(uss_bytes(child) or 0 for child in children)
            own = rss_bytes(pid)
            return None if own is None else own + self._children
        if stack.nvml:
            from harness import nvml

            return nvml.memory_bytes(self._index(), os.getpid())[0]
        if stack.smi and self._slow_reading_due():
            from harness.device import smi_process_memory_bytes

            return smi_process_memory_bytes(stack.smi)
        return None

    def _slow_reading_due(self) -> bool:
        now = self.clock()
        if self._tool_at is not None and now - self._tool_at < self.tool_interval_s:
            return False
        self._tool_at = now
        return True

    def _index(self) -> int:
        import torch

        index = self.device.index
        return index if index is not None else torch.cuda.current_device()

    def peak_gib(self) -> tuple[float | None, float | None]:
        """(peak used, total) in GiB."""
        self.sample()
        if self.device.type == "cpu":
            used = max(peak_rss_bytes() or 0, self._peak)
            return (used / GIB if used else None), host_total_gib()
        import torch

        index = self._index()
        used = max(torch.cuda.max_memory_reserved(index), self._peak)
        total = None
        if self.device.stack.nvml:
            from harness import nvml

            total = nvml.memory_bytes(index, os.getpid())[1]
        if total is None:
            total = torch.cuda.get_device_properties(index).total_memory
        return used / GIB, total / GIB
