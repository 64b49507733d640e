"""Energy over the counted window, where the hardware counts it (docs/harness.md, "Energy").

- nvidia: NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``: millijoules
  since the driver was loaded, Volta and later) of the device the rank owns. The GPU boards
  only: the host's CPUs, memory and fans are not in it.
- cpu: RAPL through Linux powercap, ``energy_uj`` of each package domain
  (``/sys/class/powercap/intel-rapl:N``, microjoules, back to 0 after
  ``max_energy_range_uj``). The packages serve every rank of the host: local rank 0 reads
  them, the others own nothing. DRAM and the rest of the host are not in it.
- anything else (iluvatar, kunlunxin, a host without powercap or whose ``energy_uj`` only
  root may read, a GPU without the counter): null, and the note says why.

``Run`` reads the counters when its tracker's counted window opens (after warm-up) and when
it closes, leaving evaluation out as the rates do, so energy per sample is the counted
samples' energy. Nothing here has run on a GPU or a RAPL host yet: the counters are read as
documented (NVML API reference; Linux Documentation/power/powercap/powercap.rst).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.device import Device
    from harness.perf import PerfTracker

POWERCAP = Path("/sys/class/powercap")
_PACKAGE_DOMAIN = re.compile(r"intel-rapl:\d+")  # top-level zones; intel-rapl:0:0 are parts


class Counter(Protocol):
    what: str  # what the counter covers, for the note

    def read(self) -> list[int]: ...

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float: ...


@dataclass(frozen=True)
class RaplCounter:
    """RAPL package domains: microjoule counters that wrap at their ``max_energy_range_uj``."""

    energy_files: tuple[Path, ...]
    max_uj: tuple[int, ...]
    what: str = "RAPL CPU package domains (DRAM and the rest of the host not counted)"

    def read(self) -> list[int]:
        return [int(path.read_text()) for path in self.energy_files]

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float:
        # A counter that went down wrapped (once: the ranges last minutes to hours at
        # full power, longer than one read interval of the window's ends and evaluation).
        uj = sum(
            a - b if a >= b else a + top - b
            for b, a, top in zip(before, after, self.max_uj, strict=True)
        )
        return uj / 1e6


@dataclass(frozen=True)
class NvmlCounter:
    """NVML's total energy of some devices, millijoules (64-bit: it does not wrap)."""

    nvml: Any  # pynvml, or anything with its nvmlDeviceGetTotalEnergyConsumption
    handles: tuple[Any, ...]
    what: str = "NVML GPU board energy (the host's CPUs, memory and fans not counted)"

    def read(self) -> list[int]:
        return [int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles]

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float:
        return sum(a - b for b, a in zip(before, after, strict=True)) / 1e3


def rapl_counter(root: Path = POWERCAP) -> tuple[RaplCounter | None, str]:
    """The host's RAPL package domains under ``root`` (a powercap tree), or None and why."""
    zones = sorted(p for p in root.glob("intel-rapl:*") if _PACKAGE_DOMAIN.fullmatch(p.name))
    packages = [z for z in zones if _text(z / "name").startswith("package")]
    if not packages:
        return None, f"no RAPL package domain under {root}"
    try:
        counter = RaplCounter(
            tuple(z / "energy_uj" for z in packages),
            tuple(int((z / "max_energy_range_uj").read_text()) for z in packages),
        )
        counter.read()
    except PermissionError:
        return None, f"RAPL under {root}: energy_uj is readable by root only (Linux >= 5.10)"
    except (OSError, ValueError) as e:
        return None, f"RAPL under {root} unreadable ({type(e).__name__}: {e})"
    return counter, ""


def nvml_counter(index: int, nvml: Any = None) -> tuple[NvmlCounter | None, str]:
    """NVML's energy counter of CUDA device ``index``, or None and why. ``nvml``: pynvml by
    default (through ``harness.nvml``, which matches torch's numbering to NVML's)."""
    if nvml is None:
        from harness import nvml as harness_nvml

        handle = harness_nvml.device_handle(index)
        if handle is None:
            return None, "NVML (nvidia-ml-py and the driver) is not available"
        import pynvml as nvml
    else:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    counter = NvmlCounter(nvml, (handle,))
    try:
        counter.read()
    except Exception as e:  # NVMLError_NotSupported before Volta, and driver errors
        return None, f"NVML has no total-energy counter for device {index} ({e})"
    return counter, ""


@dataclass(frozen=True)
class Energy:
    """A run's energy over the counted window, all devices; None with why where not known."""

    joules: float | None
    source: str  # what the counters cover, or why there is no figure


class EnergyMeter:
    """One rank's energy over its tracker's counted window, evaluation left out."""

    def __init__(self, counter: Counter | None, why_none: str = "", owns: bool = True) -> None:
        self.counter = counter
        self.why_none = why_none
        self.owns = owns  # False: another rank of the host reads the counter this one uses
        self.joules = 0.0
        self._opened = False
        self._start: list[int] | None = None

    def follow(self, tracker: PerfTracker) -> None:
        """Open the window once ``tracker``'s counted window has (call after its
        ``train_begin`` and each ``step_end``)."""
        if not self._opened and not tracker.in_warmup:
            self._opened = True
            self._read_start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Leave what runs inside out (an evaluation)."""
        counting = self._start is not None
        self.end()
        try:
            yield
        finally:
            if counting:
                self._read_start()

    def end(self) -> None:
        """Close the window (the tracker's ``train_end``)."""
        if self.counter is not None and self._start is not None:
            self.joules += self.counter.joules(self._start, self.counter.read())
        self._start = None

    def _read_start(self) -> None:
        if self.counter is not None:
            self._start = self.counter.read()

    def total(self, reduce_sum: Callable[[Sequence[float]], list[float]]) -> Energy:
        """Every rank's energy summed (``reduce_sum``: ``harness.dist.all_reduce``, a
        collective every rank calls); None where a rank that owns devices has no counter."""
        missing = 1.0 if self.owns and self.counter is None else 0.0
        joules, missing_ranks = reduce_sum([self.joules, missing])
        if not missing_ranks:
            return Energy(joules, self.counter.what if self.counter else "")
        return Energy(None, self.why_none or f"{missing_ranks:.0f} rank(s) have no counter")


def open_meter(device: Device, local_rank: int, powercap: Path | None = None) -> EnergyMeter:
    """The meter of the devices ``local_rank`` owns on ``device``'s vendor; ``powercap``:
    the powercap tree (default ``POWERCAP``, read when called)."""
    if device.type == "cpu":
        if local_rank != 0:  # the host's packages are local rank 0's to read
            return EnergyMeter(None, owns=False)
        return EnergyMeter(*rapl_counter(powercap or POWERCAP))
    if device.stack.nvml and device.index is not None:
        return EnergyMeter(*nvml_counter(device.index))
    return EnergyMeter(None, f"vendor {device.vendor}: no energy counter fleetperf reads")


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
