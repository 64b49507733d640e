"""Base benchmark: interconnect bandwidth (FlagPerf base/benchmarks/interconnect-*), one
direction, GB/s, per device; hp ``test`` picks the transfer, the config's nodes make it
intra- or inter-server:

- h2d: a pinned host tensor copied to the device; refused on a CPU host, which has no device
  (no cpu config offers it: a row that measured nothing would read as passed);
- p2p: one pair sends and receives the tensor (global ranks 0 and 1 on one node, rank 0 and
  the second node's first rank on several): bytes sent / seconds; FlagPerf's intra-server
  figure is twice this (both directions);
- allreduce: ``all_reduce`` over every process: busbw = algbw x 2(n-1)/n with
  algbw = bytes / seconds per call, n = processes (nccl-tests' PERFORMANCE.md); FlagPerf's
  intra-server figure is twice this, its inter-server one takes n = processes per node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import harness
import torch
import torch.distributed as dist
from harness.basebench import report, warm_then_time


def transfer(run: harness.Run, tensor: torch.Tensor) -> tuple[Callable[[], object] | None, str]:
    """(this rank's one transfer, or None for a rank outside the p2p pair; what it moves)."""
    env = run.env
    problem = run.case.process_problem(run.hp, env.world_size)  # case.yaml needs_two_processes
    if problem:
        raise harness.InputError(f"{run.config_path}: hp.{problem}")
    if run.hp.test == "allreduce":
        return (lambda: dist.all_reduce(tensor)), f"all_reduce over {env.world_size} processes"
    first, second = 0, 1 if env.world_size == env.local_world_size else env.local_world_size
    pair = f"ranks {first} -> {second}"
    if env.rank == first:
        return (lambda: dist.send(tensor, dst=second)), pair
    if env.rank == second:
        return (lambda: dist.recv(tensor, src=first)), pair
    return None, pair


def main(run: harness.Run) -> None:
    hp, device, env = run.hp, run.device, run.env
    shape, notes = (hp.melements, 1024, 1024), []
    size = hp.melements * 2**22  # float32 bytes
    if hp.test == "h2d" and device.type == "cpu":
        raise harness.InputError(
            f"{run.config_path}: hp.test: h2d copies host memory to a device, and a CPU host"
            " has none: nothing to measure"
        )
    if hp.test == "h2d":
        host = torch.zeros(shape, pin_memory=device.pin_memory)
        on_device = torch.empty(shape, device=device.torch_device)
        step, what = (lambda: on_device.copy_(host, non_blocking=True)), "host -> device copies"
    else:
        step, what = transfer(run, torch.zeros(shape, device=device.torch_device))
    seconds = warm_then_time(step or (lambda: None), device, hp.warmup, hp.iterations)
    value = size * hp.iterations / seconds / 1e9 if step else None
    if hp.test == "allreduce" and value is not None:
        value *= 2 * (env.world_size - 1) / env.world_size
        notes.append(
            f"busbw = algbw x 2(n-1)/n, n = {env.world_size} (one direction; FlagPerf doubles "
            "its intra-server figure)"
        )
    notes.append(f"{hp.iterations} {what} of {size / 2**20:.0f} MiB after {hp.warmup} warm-up")
    report(run, "bus_gbps", value, "GB/s", notes=notes)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
