"""The ``sys`` event: host CPU and memory, device utilisation and power where NVML has them.

Cheap by design: psutil's cpu_percent(None) reads counters since the previous call (no
sleeping), NVML queries take microseconds, and ``due()`` spaces samples at least
``min_interval_s`` apart, so a training loop may ask at every logging step.
Without psutil, cpu_percent and host_mem_used_gib are None.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from harness.memory import GIB, host_total_gib

if TYPE_CHECKING:
    from harness.device import Device


class SysSampler:
    def __init__(
        self,
        device: Device | None = None,
        min_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._last: float | None = None
        self._cuda_index: int | None = None
        if device is not None and device.stack.nvml:  # other vendors: no library we read
            self._cuda_index = device.index if device.index is not None else 0
        try:
            import psutil

            psutil.cpu_percent(None)  # the first call only starts the counter
            self._psutil: ModuleType | None = psutil
        except ImportError:
            self._psutil = None

    def due(self) -> bool:
        return self._last is None or self.clock() - self._last >= self.min_interval_s

    def sample(self) -> dict[str, float | None]:
        self._last = self.clock()
        record: dict[str, float | None] = {
            "cpu_percent": None,
            "host_mem_used_gib": None,
            "host_mem_total_gib": None,
        }
        if self._psutil is not None:
            vm = self._psutil.virtual_memory()
            record["cpu_percent"] = self._psutil.cpu_percent(None)
            record["host_mem_used_gib"] = (vm.total - vm.available) / GIB
            record["host_mem_total_gib"] = vm.total / GIB
        else:
            record["host_mem_total_gib"] = host_total_gib()
        if self._cuda_index is not None:
            from harness import nvml

            util, power = nvml.utilization_and_power(self._cuda_index)
            if util is not None:
                record["device_util"] = util
            if power is not None:
                record["power_w"] = power
        return record
