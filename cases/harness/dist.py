"""Process layout from torchrun's environment, and the few collectives the harness needs.

Absent variables mean a single process. The backend is the device layer's
(``Device.backend``: nccl on nvidia, iluvatar and kunlunxin, gloo on cpu).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from harness.perf import PerfTotals

if TYPE_CHECKING:
    from harness.device import Device

_reduce_device: Any = None


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> DistEnv:
        def get(name: str, default: int) -> int:
            return int(environ.get(name, default))

        world = get("WORLD_SIZE", 1)
        return cls(
            rank=get("RANK", 0),
            local_rank=get("LOCAL_RANK", 0),
            world_size=world,
            local_world_size=get("LOCAL_WORLD_SIZE", world),
        )

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_global_zero(self) -> bool:
        return self.rank == 0


def init_distributed(env: DistEnv, device: Device, timeout_s: float = 600.0) -> None:
    """Join the process group with the device's backend (a no-op for a single process)."""
    global _reduce_device
    import torch
    import torch.distributed as dist

    if not env.distributed or dist.is_initialized():
        return
    dist.init_process_group(device.backend, timeout=timedelta(seconds=timeout_s))
    _reduce_device = device.torch_device if device.backend != "gloo" else torch.device("cpu")


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    """Wait until every rank gets here (a no-op for a single process)."""
    if _initialized():
        import torch.distributed as dist

        dist.barrier()


def shutdown_distributed() -> None:
    if _initialized():
        import torch.distributed as dist

        dist.destroy_process_group()


def all_reduce(values: Sequence[float], op: str = "sum") -> list[float]:
    """Element-wise sum or max of ``values`` over all ranks (identity for one process)."""
    if not _initialized():
        return [float(v) for v in values]
    import torch
    import torch.distributed as dist

    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_reduce_device)
    dist.all_reduce(t, op=ops[op])
    return t.tolist()


def reduce_memory(used: float | None, total: float | None) -> tuple[float | None, float | None]:
    """The highest (peak used, total) GiB over all ranks, from each rank's
    ``MemoryMonitor.peak_gib()``; None where no rank knows."""
    used, total = all_reduce([used or 0.0, total or 0.0], "max")
    return used or None, total or None


def sum_counted(values: Sequence[float], counts: bool = True) -> list[float]:
    """Element-wise sum over the ranks that count (``Layout.counts``: one rank per
    tensor/pipeline group); the others add nothing. Every rank must call it."""
    return all_reduce([float(v) if counts else 0.0 for v in values], "sum")


def reduce_totals(tot: PerfTotals, counts: bool = True) -> PerfTotals:
    """The run's totals over all ranks, as ``merge_totals`` computes them for a list: counts
    summed over the ranks that count (``counts``, see ``harness.layout``: a tensor- or
    pipeline-parallel group counts its batch once), times of the slowest rank."""
    sums = sum_counted([getattr(tot, f) for f in PerfTotals.SUM_FIELDS], counts)
    maxes = all_reduce([getattr(tot, f) for f in PerfTotals.MAX_FIELDS], "max")
    return replace(
        tot,
        **dict(zip(PerfTotals.SUM_FIELDS, sums, strict=True)),
        **dict(zip(PerfTotals.MAX_FIELDS, maxes, strict=True)),
    )
