"""What the base cases (``cases/base-*``, docs/cases/base.md) share: FlagPerf's warm-up then
timed loop, and the report of one figure per device beside the chip's datasheet value.

Every base case's hp carry ``datasheet`` (the chip's published figure in the case's unit, 0
where none is published: the ratio is then null) and ``datasheet_source`` (where the figure
is from, or why there is none); a vendor config sets both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from harness.dist import all_reduce, barrier
from harness.gemm import timed
from harness.result import ModelFlops

if TYPE_CHECKING:
    from harness.device import Device
    from harness.runner import Run


def warm_then_time(run: Callable[[], Any], device: Device, warmup: int, iterations: int) -> float:
    """Seconds of ``iterations`` calls of ``run`` after ``warmup`` untimed ones; every rank
    starts its timed loop together (FlagPerf's ``multi_device_sync`` before the clock)."""
    timed(run, device.synchronize, warmup)
    barrier()
    return timed(run, device.synchronize, iterations)


def gather(value: float | None, rank: int, world_size: int) -> list[float | None]:
    """Every rank's ``value`` (None where a rank measured nothing), on every rank."""
    mine = [0.0] * world_size
    mine[rank] = math.nan if value is None else value
    return [v if math.isfinite(v) else None for v in all_reduce(mine)]


def report(
    run: Run,
    name: str,
    value: float | None,
    unit: str,
    notes: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Every rank: its own ``value`` of metric ``name``; global rank 0 emits the result with
    the mean over the devices that measured one (``name``), the slowest (``name_min``), the
    datasheet value (``name_datasheet``) and mean / datasheet (``name_ratio``), and each
    device's figure in ``per_device`` (rank, node, value, ratio); ``extra``: the case's own
    fields of the result."""
    env, hp = run.env, run.hp
    values = gather(value, env.rank, env.world_size)
    datasheet = float(hp.datasheet) or None
    measured = [v for v in values if v is not None]
    mean = sum(measured) / len(measured) if measured else None

    def ratio(v: float | None) -> float | None:
        return v / datasheet if v is not None and datasheet else None

    per_device = [
        {"rank": r, "node": r // env.local_world_size, "value": v, "ratio": ratio(v)}
        for r, v in enumerate(values)
    ]
    source = (
        f"datasheet {datasheet:g} {unit}: {hp.datasheet_source}"
        if datasheet
        else (f"datasheet value unknown, ratio null: {hp.datasheet_source}")
    )
    shown = ", ".join(f"{v:.4g}" for v in measured) or "none measured"
    run.say(f"{name} per device ({unit}): {shown}")
    run.finish(
        ModelFlops(0.0, formula="none: a base case runs no model"),
        metrics={
            name: mean,
            f"{name}_min": min(measured) if measured else None,
            f"{name}_datasheet": datasheet,
            f"{name}_ratio": ratio(mean),
        },
        notes=[source, *notes],
        converged=True,
        extra={"per_device": per_device, **(extra or {})},
    )
