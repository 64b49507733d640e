"""Peak memory, "actual/total" in GiB as in the seeds' ``mem`` column.

- Accelerators (``cuda`` device type): used = the larger of torch's peak reserved memory
  (allocator) and the peak the vendor's management library reports for this process
  (context included, sampled by ``sample()``): NVML on nvidia, ``ixsmi`` on iluvatar, none
  on kunlunxin; total = the management library's device total, else torch's
  ``total_memory``.
- CPU: used = the larger of this process's peak resident set size (``getrusage``, exact)
  and the largest sampled sum of the proportional set size (PSS) of this process and its
  children (data-loader workers); PSS splits pages shared after fork among the processes
  sharing them, so the sum does not count them twice. total = the host's physical memory.
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


def pss_bytes(pid: int) -> int | None:
    """Proportional set size of ``pid`` (Linux /proc/PID/smaps_rollup), None if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_tree_pss_bytes(pid: int = 0) -> int | None:
    """PSS of ``pid`` (this process by default) plus all its descendants."""
    pid = pid or os.getpid()
    own = pss_bytes(pid)
    if own is None:
        return None
    return own + sum(pss_bytes(child) or 0 for child in child_pids(pid))


class MemoryMonitor:
    """Peak memory of one process and its device; call ``sample()`` now and then.

    Management-tool readings that start a process (smi) are taken at most every
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

    def sample(self) -> None:
        used = self._current_bytes()
        if used is not None:
            self._peak = max(self._peak, used)

    def _current_bytes(self) -> int | None:
        dev, stack = self.device, self.device.stack
        if dev.type == "cpu":
            return process_tree_pss_bytes()
        if stack.nvml:
            from harness import nvml

            return nvml.memory_bytes(self._index(), os.getpid())[0]
        if stack.smi:
            now = self.clock()
            if self._tool_at is not None and now - self._tool_at < self.tool_interval_s:
                return None
            self._tool_at = now
            from harness.device import smi_process_memory_bytes

            return smi_process_memory_bytes(stack.smi)
        return None

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
