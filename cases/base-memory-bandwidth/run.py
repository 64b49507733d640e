"""Base benchmark: device memory bandwidth (FlagPerf base/benchmarks/main_memory-bandwidth).

Every device copies a float32 tensor of ``melements`` Mi elements into a second one
``warmup`` times, then ``iterations`` times between device synchronisations: each copy reads
and writes the tensor's bytes, so GB/s = 2 x bytes x iterations / seconds / 1e9 (FlagPerf
counts the same two passes of its ``tensor.clone()``; a copy into a tensor allocated once
leaves the allocator out of the loop).
"""

from __future__ import annotations

import sys

import harness
import torch
from harness.basebench import report, warm_then_time


def main(run: harness.Run) -> None:
    hp = run.hp
    src = torch.rand(hp.melements, 1024, 1024, device=run.device.torch_device)
    dst = torch.empty_like(src)
    seconds = warm_then_time(lambda: dst.copy_(src), run.device, hp.warmup, hp.iterations)
    size = src.numel() * src.element_size()
    report(
        run,
        "mem_bw_gbps",
        2 * size * hp.iterations / seconds / 1e9,
        "GB/s",
        notes=[f"{hp.iterations} copies of {size / 2**20:.0f} MiB after {hp.warmup} warm-up ones"],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
