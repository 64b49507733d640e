"""Timers behind the seeds' throughput columns (DESIGN.md, "Metrics (normative)").

One ``PerfTracker`` per process sees the training timeline::

    train_begin()
      [fetch batch, copy to device]          <- in p_whole and p_train, not in p_core
      step_begin()  forward, backward, optimizer step  step_end(samples, tokens)   <- p_core
      ...
      eval_begin()  evaluation  eval_end()   <- in p_whole only
    train_end()

- p_whole = samples / training wall time (evaluation included)
- p_train = samples / (training wall time - evaluation time)
- p_core  = samples of the counted steps / their compute time; the device is synchronised at
  both bounds of every step, and the first ``warmup_steps`` steps are recorded (``warmup_*``)
  but left out of p_core
- tokens_per_s_per_device = real (non-pad) tokens / (training wall time - evaluation time)
  / number of devices
- e2e_time = wall seconds since the workload process started (interpreter start, imports and
  init included), read from /proc on Linux.

All throughputs count real samples. In a distributed run each rank keeps its own totals;
``PerfTotals.SUM_FIELDS`` are summed over ranks and ``MAX_FIELDS`` (times) take the slowest
rank before ``throughput_metrics`` is applied (see ``harness.dist.reduce_totals``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

_IMPORT_WALL = time.time()


def process_age_s() -> float | None:
    """Seconds since this process was created (Linux: /proc/self/stat and /proc/uptime)."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        start_ticks = int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22, starttime
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def process_start_time() -> float:
    """Unix time at which this process started; the harness's import time where unknown."""
    age = process_age_s()
    if age is None:
        return _IMPORT_WALL
    return time.time() - age


def device_synchronizer(device: Any) -> Callable[[], None]:
    """A function that waits for all queued work on ``device`` (a no-op on CPU)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return lambda: None
    sync = getattr(getattr(torch, dev.type, None), "synchronize", None)
    if sync is None:
        raise ValueError(f"no synchronize() for device type {dev.type!r}")
    return lambda: sync(dev)


@dataclass
class PerfTotals:
    """What one rank (or, after a reduction, the whole run) did and how long it took."""

    samples: float = 0.0  # training samples
    tokens: float = 0.0  # real (non-pad) tokens of those samples
    padded_tokens: float = 0.0  # tokens the device computed on (padded length)
    steps: float = 0.0
    core_samples: float = 0.0  # samples of the steps counted in p_core
    warmup_steps: float = 0.0
    warmup_samples: float = 0.0
    train_time: float = 0.0  # training wall time, evaluation included
    eval_time: float = 0.0
    compute_time: float = 0.0  # forward + backward + optimizer of the counted steps
    warmup_time: float = 0.0  # the same for the warm-up steps

    SUM_FIELDS = (
        "samples",
        "tokens",
        "padded_tokens",
        "core_samples",
        "warmup_samples",
    )
    MAX_FIELDS = ("steps", "warmup_steps", "train_time", "eval_time", "compute_time", "warmup_time")

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class PerfTracker:
    """Accumulates the intervals of one process's training run (see the module docstring)."""

    def __init__(
        self,
        warmup_steps: int = 0,
        sync: Callable[[], None] | None = None,
        *,
        start_time: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.warmup_steps = warmup_steps
        self.sync = sync or (lambda: None)
        self.clock = clock
        self.start_time = process_start_time() if start_time is None else start_time
        self.totals_ = PerfTotals()
        self._train_t0: float | None = None
        self._train_t1: float | None = None
        self._eval_t0: float | None = None
        self._step_t0: float | None = None

    # -- training window -------------------------------------------------------------------
    def train_begin(self) -> None:
        self.sync()
        self._train_t0 = self.clock()
        self._train_t1 = None

    def train_end(self) -> None:
        self.sync()
        self._train_t1 = self.clock()

    # -- evaluation --------------------------------------------------------------------------
    def eval_begin(self) -> None:
        self.sync()
        self._eval_t0 = self.clock()

    def eval_end(self) -> float:
        if self._eval_t0 is None:
            raise RuntimeError("eval_end() without eval_begin()")
        self.sync()
        seconds = self.clock() - self._eval_t0
        self._eval_t0 = None
        self.totals_.eval_time += seconds
        return seconds

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        self.eval_begin()
        try:
            yield
        finally:
            self.eval_end()

    # -- compute steps -----------------------------------------------------------------------
    def step_begin(self) -> None:
        self.sync()
        self._step_t0 = self.clock()

    def step_end(self, samples: int, tokens: int = 0, padded_tokens: int = 0) -> float:
        """Close the step opened by step_begin(); returns its compute seconds."""
        if self._step_t0 is None:
            raise RuntimeError("step_end() without step_begin()")
        self.sync()
        seconds = self.clock() - self._step_t0
        self._step_t0 = None
        tot = self.totals_
        tot.steps += 1
        tot.samples += samples
        tot.tokens += tokens
        tot.padded_tokens += padded_tokens
        if tot.steps <= self.warmup_steps:
            tot.warmup_steps += 1
            tot.warmup_samples += samples
            tot.warmup_time += seconds
        else:
            tot.core_samples += samples
            tot.compute_time += seconds
        return seconds

    @property
    def in_warmup(self) -> bool:
        return self.totals_.steps < self.warmup_steps

    # -- results -----------------------------------------------------------------------------
    def totals(self) -> PerfTotals:
        """A copy of the totals; the training window runs to now if train_end() is not called."""
        if self._train_t0 is None:
            train_time = 0.0
        else:
            end = self._train_t1 if self._train_t1 is not None else self.clock()
            train_time = end - self._train_t0
        return replace(self.totals_, train_time=train_time)

    def e2e_time(self) -> float:
        return time.time() - self.start_time


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 and num > 0 else None


def throughput_metrics(tot: PerfTotals, world_size: int = 1) -> dict[str, float | None]:
    """p_whole, p_train, p_core (samples/s) and tokens_per_s_per_device from run totals."""
    train_only = tot.train_time - tot.eval_time
    return {
        "p_whole": _ratio(tot.samples, tot.train_time),
        "p_train": _ratio(tot.samples, train_only),
        "p_core": _ratio(tot.core_samples, tot.compute_time),
        "tokens_per_s_per_device": _ratio(tot.tokens, train_only * max(1, world_size)),
    }


def ordering_notes(metrics: dict[str, Any], tot: PerfTotals | None = None) -> list[str]:
    """Why p_core >= p_train >= p_whole does not hold (or cannot be checked); [] when it does."""
    p_whole, p_train, p_core = metrics.get("p_whole"), metrics.get("p_train"), metrics.get("p_core")
    notes = []
    if p_core is None and tot is not None and tot.steps and tot.steps <= tot.warmup_steps:
        notes.append(
            f"p_core unknown: all {int(tot.steps)} steps were warm-up steps "
            f"(warmup_steps={int(tot.warmup_steps)})"
        )
    if None in (p_whole, p_train, p_core):
        return notes
    if p_train < p_whole:
        notes.append(f"p_train {p_train:.4g} < p_whole {p_whole:.4g}: evaluation time negative?")
    if p_core < p_train:
        why = "steps outside the warm-up ran slower per sample than the warm-up steps"
        if tot is not None and tot.steps - tot.warmup_steps < 10:
            why = f"only {int(tot.steps - tot.warmup_steps)} steps after warm-up: timer noise"
        notes.append(f"p_core {p_core:.4g} < p_train {p_train:.4g}: {why}")
    return notes
