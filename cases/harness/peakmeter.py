"""Measured peak: the dense matmul rate and memory bandwidth this host's device achieves.

A datasheet peak says what the chip could do; a measured one says what this host, driver,
library and (on a CPU) thread count do in a plain square matmul, so ``mfu_measured`` is
comparable where no datasheet figure exists (CPUs) and shows what is left on the table where
one does. Measured once per host, device and math mode, then cached (``harness.peak_cache``)
unless other work kept the host busy while it was measured.

The matmuls are ``harness.gemm``'s (the base computation case's GEMM and timer).
Calibration: the matrix side doubles from 256 until one matmul takes at least
``MIN_KERNEL_S`` (the fastest of three timings) or the side reaches its cap; then blocks of
matmuls are timed, each about a fifth of the budget, and the best block counts (the least
disturbed by other load). Memory bandwidth the same way with a tensor copy (bytes read +
bytes written). About a second and a half on a CPU, well under a second on a GPU.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from harness import peak_cache
from harness.gemm import Gemm, timed

if TYPE_CHECKING:
    from pathlib import Path

    from harness.device import Device

MIN_KERNEL_S = 0.02
# The run's own processes keep about one runnable thread per CPU busy as it ends; more than
# this means other work shares the host.
LOADED_PER_CPU = 1.5
MATMUL_BUDGET_S = {"cpu": 1.0, "cuda": 0.5}
COPY_BUDGET_S = {"cpu": 0.4, "cuda": 0.2}
MAX_SIDE = {"cpu": 2048, "cuda": 8192}
COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}
BLOCKS = 5


def device_label(device: Device) -> str:
    """The cache's device name: on a CPU the rate depends on torch's thread count too."""
    if device.type == "cpu":
        import torch

        return f"{device.name} [torch threads: {torch.get_num_threads()}]"
    return device.name


def load_per_cpu() -> float | None:
    """The host's 1-minute load average per CPU (None where the OS has none)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return None


def lookup_or_measure(
    device: Device, math: str, path: Path, load: Callable[[], float | None] = load_per_cpu
) -> dict[str, Any]:
    """The cached entry for this host, device and math; measured if absent.

    A measurement taken while the host is busy with other work (``load()`` above
    ``LOADED_PER_CPU``) is used for this run but not cached (``"cached": False``): a peak
    measured under load would understate every later run's denominator.
    """
    host, label = socket.gethostname(), device_label(device)
    try:
        entries = peak_cache.read_entries(path)
    except ValueError:
        entries = {}
    entry = entries.get(peak_cache.entry_key(host, label, math))
    if entry is not None:
        return entry
    busy = load()
    entry = _host_entry(device, measure(device, math), busy)
    if _loaded(busy):
        return {**entry, "cached": False}
    peak_cache.write_entry(path, entry)
    return entry


# The maths a measured peak is kept for (a model run's math modes); fp64, int8 and fp8 GEMMs
# are base-case figures only.
CACHED_MATHS = ("fp32", "tf32", "fp16", "bf16")


def store_base_rate(
    device: Device, math: str, flops: float, side: int, path: Path, seconds: float
) -> str:
    """Fill the cache from the base computation case: its sustained GEMM rate on ``device``
    (``side``³ at ``math``) becomes the measured peak for this host, device and math, with a
    copy rate measured now beside it. Returns what was done, for the run's notes."""
    if math not in CACHED_MATHS:
        return f"measured-peak cache: {math} is not a model math, nothing cached"
    busy = load_per_cpu()
    if _loaded(busy):
        return f"measured-peak cache not written: the host was loaded ({busy:.2f} per CPU)"
    import torch

    bandwidth = _copy_rate(torch, device, "cpu" if device.type == "cpu" else "cuda")
    fields = _fields(math, flops, side, bandwidth, seconds)
    entry = {**_host_entry(device, fields, busy), "source": "base-computation"}
    peak_cache.write_entry(path, entry)
    return f"measured-peak cache: {math} entry for {entry['device']} written to {path}"


def measure(device: Device, math: str) -> dict[str, Any]:
    """{"math", "matmul_flops", "matmul_n", "mem_bw_bytes_per_s", ...} for ``device``."""
    import torch

    t0 = time.perf_counter()
    kind = "cpu" if device.type == "cpu" else "cuda"
    with _math_mode(torch, device, math):
        flops, side = _matmul_rate(device, math, kind)
    bandwidth = _copy_rate(torch, device, kind)
    return _fields(math, flops, side, bandwidth, time.perf_counter() - t0)


def _fields(math: str, flops: float, side: int, bandwidth: float, seconds: float) -> dict[str, Any]:
    """A measurement as the cache keeps it (peak_cache's entry, less host and device)."""
    import torch

    return {
        "math": math,
        "matmul_flops": flops,
        "matmul_n": side,
        "mem_bw_bytes_per_s": bandwidth,
        "measured_at": time.time(),
        "seconds": seconds,
        "torch": torch.__version__,
    }


def _host_entry(device: Device, fields: dict[str, Any], busy: float | None) -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "device": device_label(device),
        **fields,
        "load_per_cpu": busy,
    }


def _loaded(busy: float | None) -> bool:
    """Whether other work kept the host busy: a rate measured then is not cached."""
    return busy is not None and busy > LOADED_PER_CPU


@contextmanager
def _math_mode(torch: Any, device: Device, math: str) -> Any:
    """fp32 matmuls in TF32 for "tf32", in full fp32 otherwise; restored afterwards."""
    if device.type == "cpu":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _best_rate(
    work: float, run: Callable[[], None], sync: Callable[[], None], budget: float, one_s: float
) -> float:
    """Best work/s over BLOCKS timed blocks, each repeating ``run`` for about budget/BLOCKS."""
    reps = max(1, int(budget / BLOCKS / max(one_s, 1e-6)))
    return max(work * reps / timed(run, sync, reps) for _ in range(BLOCKS))


def _matmul_rate(device: Device, precision: str, kind: str) -> tuple[float, int]:
    side = 256
    while True:
        gemm = Gemm(device, precision, side)
        gemm.run()  # first call: kernel selection, allocation
        # the fastest of three: one call preempted by other work must not stop the doubling
        one = min(timed(gemm.run, device.synchronize) for _ in range(3))
        if one >= MIN_KERNEL_S or side >= MAX_SIDE[kind]:
            break
        side *= 2
    rate = _best_rate(gemm.ops, gemm.run, device.synchronize, MATMUL_BUDGET_S[kind], one)
    return rate, side


def _copy_rate(torch: Any, device: Device, kind: str) -> float:
    n = COPY_BYTES[kind] // 4
    src = torch.empty(n, dtype=torch.float32, device=device.torch_device).fill_(1.0)
    dst = torch.empty_like(src)

    def run() -> None:
        dst.copy_(src)

    run()
    one = timed(run, device.synchronize)
    return _best_rate(2.0 * n * 4, run, device.synchronize, COPY_BUDGET_S[kind], one)
