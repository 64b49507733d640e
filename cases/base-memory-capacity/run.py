"""Base benchmark: device memory capacity (FlagPerf base/benchmarks/main_memory-capacity).

Every device allocates float32 tensors of ``chunk_mib`` and keeps them; a failed allocation
halves the chunk, down to 1 MiB; the capacity is what was held at the end. Unlike FlagPerf
the total never passes ``max_gib``, which may not exceed the device's memory (on a CPU the
host's available memory); 0 lets a GPU allocate until it fails, and is refused on a CPU,
where an allocation does not fail (the kernel kills the process): the case never takes a
whole host. A CPU's pages are written as they are allocated:
until then the kernel has only promised them.
"""

from __future__ import annotations

import sys

import harness
import torch
from harness.basebench import report


def device_memory_gib(device: harness.Device) -> tuple[float, str]:
    """(GiB this device may hold, what that figure is)."""
    if device.type == "cpu":
        import psutil

        return psutil.virtual_memory().available / 2**30, "this host's available memory"
    return torch.cuda.mem_get_info(device.torch_device)[1] / 2**30, "this device's memory"


def allocate(device: harness.Device, chunk_mib: int, limit_mib: int) -> int:
    """MiB held when a 1 MiB allocation fails or ``limit_mib`` is reached."""
    held, total = [], 0
    while chunk_mib >= 1 and total < limit_mib:
        size = min(chunk_mib, limit_mib - total)
        try:
            tensor = torch.empty(size << 18, dtype=torch.float32, device=device.torch_device)
            if device.type == "cpu":
                tensor.fill_(0.0)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not isinstance(exc, torch.OutOfMemoryError) and "memory" not in str(exc):
                raise
            chunk_mib //= 2
            continue
        held.append(tensor)
        total += size
    return total


def main(run: harness.Run) -> None:
    hp = run.hp
    memory, what = device_memory_gib(run.device)
    if hp.max_gib == 0 and run.device.type == "cpu":
        raise harness.InputError(
            f"{run.config_path}: hp.max_gib: 0 (up to the whole memory) is refused on a CPU, "
            f"where an allocation does not fail; set a bound below {what} ({memory:.1f} GiB)"
        )
    if hp.max_gib > memory:
        raise harness.InputError(
            f"{run.config_path}: hp.max_gib: {hp.max_gib:g} GiB is more than {what} "
            f"({memory:.1f} GiB); lower max_gib (--set max_gib=...)"
        )
    limit = int((hp.max_gib or memory) * 1024)
    held = allocate(run.device, hp.chunk_mib, limit)
    run.device.synchronize()
    notes = [f"chunks of {hp.chunk_mib} MiB first, halved after each failed allocation"]
    if held >= limit:
        notes.append(f"capped at max_gib {hp.max_gib:g} GiB: the device may hold more")
    report(run, "mem_capacity_gib", held / 1024, "GiB", notes=notes)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
