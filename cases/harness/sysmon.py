"""The ``sys`` event: host CPU, memory and power, and each device's power, temperature,
memory and utilisation where the hardware says (docs/workload-contract.md, docs/monitoring.md).

``SysSampler.sample()`` reads, without sleeping:
- ``cpu_percent`` (psutil, since the previous sample), ``host_mem_used_gib``,
  ``host_mem_total_gib``;
- ``cpu_power_w``: the RAPL package domains' energy since the previous sample over its
  seconds (the CPUs' packages only; left out where RAPL is not readable, as on most VMs);
- for each device d of the node (the CUDA index torch uses, 0..nproc_per_node-1), from NVML:
  ``dev{d}_power_w``, ``dev{d}_power_limit_w`` (the default limit: the board's TDP),
  ``dev{d}_temp_c``, ``dev{d}_mem_used_gib``, ``dev{d}_mem_total_gib``, ``dev{d}_util``,
  the clocks ``dev{d}_sm_clock_mhz``, ``dev{d}_mem_clock_mhz`` and the throttle reasons
  ``dev{d}_throttle_thermal``, ``dev{d}_throttle_power_cap``, ``dev{d}_throttle_hw_slowdown``
  (1 active, 0 not); on iluvatar the same clocks, temperature and reasons from ``ixsmi``;
- ``cpu_freq_mhz``: the CPUs' mean current frequency (cpufreq);
- the run's window so far (harness.procwindow): ``others_cpu_s`` (CPU seconds used by
  processes outside the run's process tree), ``window_s``, ``host_cpus`` and ``others``,
  the top three of them.
A figure nobody gives is left out (the controller's summary says why it is null).

``SysMonitor`` takes a sample every ``interval_s`` on a daemon thread for the whole run, as
FlagPerf's monitors do beside a case (a base case has no training steps to sample at), and
one more when the run stops; local rank 0 of each node runs it. Every sample averages the
CPU use and CPU power over the interval before it, so the first one is taken one interval in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from harness.energy import rapl_counter
from harness.memory import GIB, host_total_gib
from harness.procwindow import ProcWindow, cpu_freq_mhz

if TYPE_CHECKING:
    from harness.device import Device
    from harness.events import EventWriter


class SysSampler:
    def __init__(
        self,
        device: Device | None = None,
        devices_per_node: int = 1,
        clock: Callable[[], float] = time.monotonic,
        root: int | None = None,
    ) -> None:
        """``root``: the run's topmost process (harness.procwindow.run_root); None: no
        window of other processes' CPU."""
        self.clock = clock
        stack = device.stack if device else None
        self._cuda_indices = range(devices_per_node) if stack and stack.nvml else range(0)
        # ixsmi speaks nvidia-smi's query syntax; kunlunxin's xpu_smi has none documented.
        self._smi = stack.smi if stack else None
        self._smi_devices = devices_per_node
        self._window = ProcWindow(root) if root is not None else None
        self._rapl, _ = rapl_counter()
        self._rapl_last = (self._rapl.read(), clock()) if self._rapl else None
        try:
            import psutil

            psutil.cpu_percent(None)  # the first call only starts the counter
            self._psutil: ModuleType | None = psutil
        except ImportError:
            self._psutil = None

    def sample(self) -> dict[str, object]:
        record: dict[str, object] = {
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
        if self._rapl and self._rapl_last:
            now, (before, then) = (self._rapl.read(), self.clock()), self._rapl_last
            if now[1] > then:
                record["cpu_power_w"] = self._rapl.joules(before, now[0]) / (now[1] - then)
            self._rapl_last = now
        if self._cuda_indices:
            from harness import nvml

            for d in self._cuda_indices:
                for key, value in nvml.readings(d).items():
                    record[f"dev{d}_{key}"] = value
        elif self._smi:
            from harness.smi import smi_readings

            for d, got in smi_readings(self._smi, self._smi_devices).items():
                record.update({f"dev{d}_{key}": value for key, value in got.items()})
        if (freq := cpu_freq_mhz()) is not None:
            record["cpu_freq_mhz"] = freq
        if self._window is not None:
            record.update(self._window.figures())
        return record


class SysMonitor:
    """``sys`` records every ``interval_s`` from a daemon thread, and one at ``stop()``."""

    def __init__(self, sampler: SysSampler, events: EventWriter, interval_s: float) -> None:
        self.sampler = sampler
        self.events = events
        self.interval_s = interval_s
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # a sample at a time: the sampler keeps state
        self._thread = threading.Thread(target=self._loop, name="fleetperf-sys", daemon=True)
        self._thread.start()

    def _emit(self) -> None:
        with self._lock:
            self.events.emit("sys", **self.sampler.sample())

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self._emit()

    def stop(self) -> None:
        """The last sample (the interval since the one before), then the thread ends."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._thread.join()
        self._emit()
