"""Peak memory, "actual/total" in GiB as in the seeds' ``mem`` column.

- CUDA: used = the larger of torch's peak reserved memory (allocator) and the peak NVML
  figure for this process (context included, sampled by ``sample()``); total = NVML's
  device total (what nvidia-smi shows), torch's ``total_memory`` without NVML.
- CPU: there is no device memory; used = this process's peak resident set size
  (``getrusage`` ru_maxrss, exact, no sampling needed), total = the host's physical memory.
- Any other device type: (None, None).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

GIB = float(1 << 30)


@functools.cache
def host_total_gib() -> float | None:
    """Physical memory of the host (constant for the life of the process: cached)."""
    try:
        import psutil

        return psutil.virtual_memory().total / GIB
    except ImportError:
        try:
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GIB
        except (ValueError, OSError):
            return None


def peak_rss_gib() -> float | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / GIB if sys.platform == "darwin" else maxrss * 1024 / GIB  # Linux: KiB


class MemoryMonitor:
    """Peak memory of one process's device; call ``sample()`` now and then on CUDA."""

    def __init__(self, device: Any) -> None:
        import torch

        self.device = torch.device(device)
        self._nvml_peak = 0

    def sample(self) -> None:
        if self.device.type != "cuda":
            return
        from harness import nvml

        used, _ = nvml.memory_bytes(self._index(), os.getpid())
        if used is not None:
            self._nvml_peak = max(self._nvml_peak, used)

    def _index(self) -> int:
        import torch

        return self.device.index if self.device.index is not None else torch.cuda.current_device()

    def peak_gib(self) -> tuple[float | None, float | None]:
        """(peak used, total) in GiB."""
        if self.device.type == "cpu":
            return peak_rss_gib(), host_total_gib()
        if self.device.type != "cuda":
            return None, None
        import torch

        from harness import nvml

        index = self._index()
        self.sample()
        used = max(torch.cuda.max_memory_reserved(index), self._nvml_peak)
        _, total = nvml.memory_bytes(index, os.getpid())
        if total is None:
            total = torch.cuda.get_device_properties(index).total_memory
        return used / GIB, total / GIB
