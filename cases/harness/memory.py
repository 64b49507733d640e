"""Peak memory, "actual/total" in GiB as in the seeds' ``mem`` column.

- Accelerators (``cuda`` device type): used = the peak of the device's used memory as its
  management tool reports it for the whole device (every process, context included), the
  figure FlagPerf's monitors read (``nvidia_monitor.py``: nvidia-smi's Memory-Usage;
  ``iluvatar_monitor.py``: ixsmi; ``kunlunxin_monitor.py``: xpu_smi): NVML's
  ``nvmlDeviceGetMemoryInfo`` on nvidia (each sample), ixsmi's ``--query-gpu=memory.used``
  on iluvatar and the device rows of ``xpu_smi`` on kunlunxin (at most every
  ``tool_interval_s``). Beside it, ``allocator_gib()``: torch's peak reserved memory, which
  misses the context and other processes' memory. Where no tool answers, used falls back to
  the larger of the allocator's peak and this process's memory as NVML or the smi tool
  reports it, and ``source`` says so. total = the tool's device total, else torch's
  ``total_memory``. The iluvatar and kunlunxin readers are written from the tools'
  documented or FlagPerf-used output and have not run on that hardware.
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
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.device import Device

GIB = float(1 << 30)
MIB = 1 << 20
# xpu_smi's table: a device's row holds its PCI address; FlagPerf's kunlunxin_monitor.py
# prints that row's awk fields 22 and 24 as used and total MiB (0-based: 21 and 23).
XPU_SMI_ROW = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
XPU_SMI_USED, XPU_SMI_TOTAL = 21, 23


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


def parse_xpu_smi(text: str, index: int) -> tuple[int | None, int | None]:
    """(used, total) bytes of device ``index`` (the index-th device row) in ``xpu_smi``'s
    table, as FlagPerf's kunlunxin_monitor.py reads it; (None, None) if absent."""
    rows = [line.split() for line in text.splitlines() if XPU_SMI_ROW.search(line)]
    if index >= len(rows) or len(rows[index]) <= XPU_SMI_TOTAL:
        return None, None
    used, total = rows[index][XPU_SMI_USED], rows[index][XPU_SMI_TOTAL]
    if not (used.isdigit() and total.isdigit()):
        return None, None
    return int(used) * MIB, int(total) * MIB


def _tool_output(*argv: str) -> str:
    """A management tool's stdout ('' if it is missing or fails); argument lists only."""
    path = shutil.which(argv[0])
    if path is None:
        return ""
    try:
        done = subprocess.run(
            [path, *argv[1:]], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


def device_memory_bytes(vendor: str, index: int) -> tuple[int | None, int | None]:
    """(used by every process, total) bytes of accelerator ``index`` as its vendor's
    management tool reports it; (None, None) where it cannot tell."""
    if vendor == "nvidia":
        from harness import nvml

        return nvml.device_memory_bytes(index)
    if vendor == "iluvatar":  # ixsmi takes nvidia-smi's query syntax
        from harness.device import smi_query

        rows = smi_query("ixsmi", "--query-gpu=memory.used,memory.total", "-i", str(index))
        if rows and len(rows[0]) == 2 and all(c.isdigit() for c in rows[0]):
            return int(rows[0][0]) * MIB, int(rows[0][1]) * MIB
        return None, None
    if vendor == "kunlunxin":
        return parse_xpu_smi(_tool_output("xpu_smi"), index)
    return None, None


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
        self._peak = 0  # this process (and its children on CPU)
        self._device_peak = 0  # the whole device, as its management tool reports it
        self._device_total: int | None = None
        self._tool_at: dict[str, float] = {}
        self._children = 0  # the children's private memory at the last slow reading

    def sample(self) -> None:
        used = self._current_bytes()
        if used is not None:
            self._peak = max(self._peak, used)
        if self.device.type != "cpu" and (
            self.device.stack.nvml or self._slow_reading_due("device")
        ):
            used, total = device_memory_bytes(self.device.vendor, self._index())
            if used is not None:
                self._device_peak = max(self._device_peak, used)
                self._device_total = total or self._device_total

    def _current_bytes(self) -> int | None:
        dev, stack = self.device, self.device.stack
        if dev.type == "cpu":
            pid = os.getpid()
            children = child_pids(pid)
            if not children:
                self._children = 0
            elif self._slow_reading_due("children"):
                self._children = sum(uss_bytes(child) or 0 for child in children)
            own = rss_bytes(pid)
            return None if own is None else own + self._children
        if stack.nvml:
            from harness import nvml

            return nvml.process_memory_bytes(self._index(), os.getpid())
        if stack.smi and self._slow_reading_due("process"):
            from harness.device import smi_process_memory_bytes

            return smi_process_memory_bytes(stack.smi)
        return None

    def _slow_reading_due(self, what: str) -> bool:
        now = self.clock()
        last = self._tool_at.get(what)
        if last is not None and now - last < self.tool_interval_s:
            return False
        self._tool_at[what] = now
        return True

    def _index(self) -> int:
        import torch

        index = self.device.index
        return index if index is not None else torch.cuda.current_device()

    @property
    def source(self) -> str:
        """What ``peak_gib``'s used figure is, in one line for the result's notes."""
        if self.device.type == "cpu":
            return "mem_used_gib: this process's resident memory and its workers' private memory"
        if self._device_peak:
            return "mem_used_gib: the device's used memory as its management tool reports it"
        return (
            "mem_used_gib: no device-wide reading (management tool absent or silent): the "
            "larger of torch's allocator peak and this process's device memory"
        )

    def peak_gib(self) -> tuple[float | None, float | None]:
        """(peak used, total) in GiB."""
        self.sample()
        if self.device.type == "cpu":
            used = max(peak_rss_bytes() or 0, self._peak)
            return (used / GIB if used else None), host_total_gib()
        import torch

        index = self._index()
        used = self._device_peak or max(torch.cuda.max_memory_reserved(index), self._peak)
        total = self._device_total or torch.cuda.get_device_properties(index).total_memory
        return used / GIB, total / GIB

    def allocator_gib(self) -> float | None:
        """torch's peak reserved memory in GiB (None on CPU): the allocator's figure."""
        if self.device.type == "cpu":
            return None
        import torch

        return torch.cuda.max_memory_reserved(self._index()) / GIB
