"""Timers behind the seeds' throughput columns (docs/metrics.md).

One ``PerfTracker`` per process sees the training timeline::

    train_begin()
      [fetch batch, copy to device]                              <- whole, train
      step_begin()  forward, backward, optimizer  step_end(...)  <- whole, train, core
      ...
      eval_begin()  evaluation  eval_end()                       <- whole only
    train_end()

The first ``warmup_steps`` steps are warm-up: the counted window starts when the last of them
ends (at ``train_begin()`` without warm-up). Every rate counts the same samples, those of the
steps after warm-up, over three nested times of the counted window:

- whole   = the window's wall time (evaluation included)         -> p_whole
- train   = whole - the evaluation inside the window              -> p_train
- compute = the compute intervals of the counted steps            -> p_core

compute <= train <= whole on every rank, so p_core >= p_train >= p_whole by construction.
A step's compute interval starts after the device is synchronised and, in a multi-process
run, after a barrier: a rank that waits for peers still loading data waits outside it.
In a distributed run each rank keeps its own totals; ``merge_totals`` (and, across
processes, ``harness.dist.reduce_totals``) sums the counts and takes each time from the
slowest rank.

- e2e_time = wall seconds since the workload process started (interpreter start, imports and
  init included), read from /proc on Linux.
- e2e_time_main = wall seconds since ``harness.guarded`` called the workload's main()
  (FlagPerf's clock).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace

_IMPORT_WALL = time.time()
_main_started: float | None = None


def process_age_s(
    stat_path: str = "/proc/self/stat", uptime_path: str = "/proc/uptime"
) -> float | None:
    """Seconds since this process was created (Linux: /proc/self/stat and /proc/uptime);
    None where they cannot be read."""
    try:
        with open(stat_path) as f:
            stat = f.read()
        with open(uptime_path) as f:
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


def mark_main_start(at: float | None = None) -> None:
    """Record when the workload's main() started (``harness.guarded`` calls this)."""
    global _main_started
    _main_started = time.time() if at is None else at


def main_age_s() -> float | None:
    """Seconds since ``mark_main_start``; None if it was not called."""
    return None if _main_started is None else time.time() - _main_started


@dataclass
class PerfTotals:
    """What one rank (or, merged, the whole run) did and how long it took.

    samples, tokens and padded_tokens count the steps after warm-up only.
    """

    samples: float = 0.0  # training samples of the counted steps
    tokens: float = 0.0  # their real (non-pad) tokens
    padded_tokens: float = 0.0  # the tokens the device computed on (padded length)
    steps: float = 0.0  # all steps, warm-up included
    warmup_steps: float = 0.0
    warmup_samples: float = 0.0
    whole_time: float = 0.0  # counted window, evaluation included
    eval_time: float = 0.0  # evaluation inside the counted window
    train_time: float = 0.0  # whole_time - eval_time, per rank
    compute_time: float = 0.0  # compute of the counted steps
    warmup_time: float = 0.0  # compute of the warm-up steps

    SUM_FIELDS = ("samples", "tokens", "padded_tokens", "warmup_samples")
    MAX_FIELDS = (
        "steps",
        "warmup_steps",
        "whole_time",
        "eval_time",
        "train_time",
        "compute_time",
        "warmup_time",
    )

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def merge_totals(ranks: Sequence[PerfTotals]) -> PerfTotals:
    """The run's totals from each rank's: counts summed, times of the slowest rank."""
    return PerfTotals(
        **{f: sum(getattr(t, f) for t in ranks) for f in PerfTotals.SUM_FIELDS},
        **{f: max(getattr(t, f) for t in ranks) for f in PerfTotals.MAX_FIELDS},
    )


class PerfTracker:
    """Accumulates the intervals of one process's training run (see the module docstring).

    ``sync`` waits for the device (``Device.synchronize``); ``barrier`` waits for the other
    ranks (``harness.dist.barrier``); both default to no-ops.
    """

    def __init__(
        self,
        warmup_steps: int = 0,
        sync: Callable[[], None] | None = None,
        barrier: Callable[[], None] | None = None,
        *,
        start_time: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.warmup_steps = warmup_steps
        self.sync = sync or (lambda: None)
        self.barrier = barrier or (lambda: None)
        self.clock = clock
        self.start_time = process_start_time() if start_time is None else start_time
        self.totals_ = PerfTotals()
        self._window_t0: float | None = None  # start of the counted window
        self._train_t1: float | None = None
        self._eval_t0: float | None = None
        self._step_t0: float | None = None

    # -- training window -------------------------------------------------------------------
    def train_begin(self) -> None:
        self.sync()
        if self.warmup_steps == 0:
            self._window_t0 = self.clock()
        self._train_t1 = None

    def train_end(self) -> None:
        self.sync()
        self._train_t1 = self.clock()

    # -- evaluation --------------------------------------------------------------------------
    def eval_begin(self) -> None:
        self.sync()
        self._eval_t0 = self.clock()

    def eval_end(self) -> float:
        """Close the evaluation; returns its seconds (left out of p_train if in the window)."""
        if self._eval_t0 is None:
            raise RuntimeError("eval_end() without eval_begin()")
        self.sync()
        seconds = self.clock() - self._eval_t0
        self._eval_t0 = None
        if self._window_t0 is not None:
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
        self.barrier()  # waiting for peers that still load data is not compute
        self._step_t0 = self.clock()

    def step_end(self, samples: int, tokens: int = 0, padded_tokens: int = 0) -> float:
        """Close the step opened by step_begin(); returns its compute seconds."""
        if self._step_t0 is None:
            raise RuntimeError("step_end() without step_begin()")
        self.sync()
        now = self.clock()
        seconds = now - self._step_t0
        self._step_t0 = None
        tot = self.totals_
        tot.steps += 1
        if tot.steps <= self.warmup_steps:
            tot.warmup_steps += 1
            tot.warmup_samples += samples
            tot.warmup_time += seconds
            if tot.steps == self.warmup_steps:
                self._window_t0 = now
        else:
            tot.samples += samples
            tot.tokens += tokens
            tot.padded_tokens += padded_tokens
            tot.compute_time += seconds
        return seconds

    @property
    def in_warmup(self) -> bool:
        return self.totals_.steps < self.warmup_steps

    # -- results -----------------------------------------------------------------------------
    def totals(self) -> PerfTotals:
        """A copy of the totals; the window runs to now if train_end() is not called."""
        if self._window_t0 is None:
            return replace(self.totals_)
        end = self._train_t1 if self._train_t1 is not None else self.clock()
        whole = end - self._window_t0
        return replace(self.totals_, whole_time=whole, train_time=whole - self.totals_.eval_time)

    def e2e_time(self) -> float:
        return time.time() - self.start_time


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 and num > 0 else None


def throughput_metrics(tot: PerfTotals, world_size: int = 1) -> dict[str, float | None]:
    """p_whole, p_train, p_core (samples/s), tokens_per_s_per_device and warmup_samples."""
    return {
        "p_whole": _ratio(tot.samples, tot.whole_time),
        "p_train": _ratio(tot.samples, tot.train_time),
        "p_core": _ratio(tot.samples, tot.compute_time),
        "tokens_per_s_per_device": _ratio(tot.tokens, tot.train_time * max(1, world_size)),
        "warmup_samples": tot.warmup_samples,
    }


def token_rates(tot: PerfTotals, padded: bool = False) -> tuple[float | None, float | None]:
    """An inference pass's (tokens / window wall time, tokens / compute time) of the counted
    steps: p_val_whole and p_val_core, p_infer_whole and p_infer_core. Real tokens, or with
    ``padded`` the positions the device computed (padding included)."""
    tokens = tot.padded_tokens if padded else tot.tokens
    return _ratio(tokens, tot.whole_time), _ratio(tokens, tot.compute_time)


def throughput_notes(tot: PerfTotals) -> list[str]:
    """What the rates left out, and why they are unknown where they are."""
    if tot.steps and tot.steps <= tot.warmup_steps:
        return [
            f"p_whole, p_train, p_core unknown: all {int(tot.steps)} steps were warm-up "
            f"steps (warmup_steps={int(tot.warmup_steps)})"
        ]
    return [
        f"warm-up: the first {int(tot.warmup_steps)} steps ({int(tot.warmup_samples)} "
        "samples) are left out of p_whole, p_train, p_core and tokens_per_s_per_device alike"
    ]
