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
  Then each rank's own time per iteration (``own_times``), for ``fleetperf qualify``'s
  stragglers: the result's ``rank_times``.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable

import harness
import torch
import torch.distributed as dist
from harness.basebench import report, warm_then_time
from harness.dist import barrier

# A rank's own time (docs/cases/base.md, "Stragglers"): after the bandwidth loop, this many
# iterations (at most hp.iterations) of: every rank's device idle, a barrier, the rank
# refills the reduction's input from a fixed source (the same bytes on every rank) and
# synchronises its device, timed alone, then the all_reduce. The refill is the iteration's
# local share, so its time has no waiting for other ranks in it; a rank's arrival at the
# collective would need clocks that agree across hosts to a microsecond, which hosts lack.
OWN_ITERATIONS = 50
# rank_times rides in the result line, which the controller drops past 64 KiB: fewer
# samples a rank (down to 1) until it fits in this many characters, else none.
RANK_TIMES_CHARS = 32 * 1024


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


def own_times(tensor: torch.Tensor, device: harness.Device, iterations: int) -> list[float]:
    """This rank's seconds per iteration of refilling ``tensor``, the all_reduce's input."""
    source, seconds = torch.ones_like(tensor), []
    for _ in range(iterations):
        device.synchronize()  # the last all_reduce done: the refill must not wait for it
        barrier()
        t0 = time.perf_counter()
        tensor.copy_(source)
        device.synchronize()
        seconds.append(time.perf_counter() - t0)
        dist.all_reduce(tensor)
    device.synchronize()
    return seconds


def rank_times(env: harness.DistEnv, seconds: list[float]) -> list[dict] | None:
    """Every rank's own times (rank, node, host name as the workload sees it, seconds
    rounded to 4 digits), gathered on rank 0, within RANK_TIMES_CHARS; None elsewhere."""
    mine = {
        "rank": env.rank,
        "node": env.rank // env.local_world_size,
        "host": socket.gethostname(),
        "s": [float(f"{s:.4g}") for s in seconds],
    }
    everyone: list[dict] | None = [{}] * env.world_size if env.is_global_zero else None
    dist.gather_object(mine, everyone, dst=0)
    return None if everyone is None else within(everyone, RANK_TIMES_CHARS)


def within(times: list[dict], chars: int) -> list[dict]:
    """``times`` with fewer seconds a rank (halved, down to 1) until its JSON takes at most
    ``chars`` characters; none where even one a rank does not fit."""
    keep = max((len(t["s"]) for t in times), default=0)
    while keep >= 1:
        kept = [{**t, "s": t["s"][:keep]} for t in times]
        if len(json.dumps(kept)) <= chars:
            return kept
        keep //= 2
    return []


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
        tensor = torch.zeros(shape, device=device.torch_device)
        step, what = transfer(run, tensor)
    seconds = warm_then_time(step or (lambda: None), device, hp.warmup, hp.iterations)
    extra = {}
    if hp.test == "allreduce":
        own = own_times(tensor, device, min(hp.iterations, OWN_ITERATIONS))
        times = rank_times(env, own)
        if times is not None:
            extra["rank_times"] = times
            kept = len(times[0]["s"]) if times else 0
            notes.append(
                f"rank_times: each rank's own time refilling the all_reduce's input, timed"
                f" alone after a barrier; {kept} of {len(own)} iterations kept per rank"
            )
    value = size * hp.iterations / seconds / 1e9 if step else None
    if hp.test == "allreduce" and value is not None:
        value *= 2 * (env.world_size - 1) / env.world_size
        notes.append(
            f"busbw = algbw x 2(n-1)/n, n = {env.world_size} (one direction; FlagPerf doubles "
            "its intra-server figure)"
        )
    notes.append(f"{hp.iterations} {what} of {size / 2**20:.0f} MiB after {hp.warmup} warm-up")
    report(run, "bus_gbps", value, "GB/s", notes=notes, extra=extra)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
