"""FlagPerf's own figures for llama2_7b-deepspeed, as its run_pretraining.py at 43625f67
computes and prints them: the loss, tokens per second per chip and MFU the seed's table and
references use (run.py reports them beside the harness's)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class FlagPerfFigures:
    """What FlagPerf's run_pretraining.py (43625f67) prints, fed step by step on every rank
    (global rank 0's values are the result's, as FlagPerf prints rank 0's)."""

    window: float = 0.0  # ave_loss: rank 0's own losses, summed
    loss: float | None = None  # the last printed ave_loss / 10
    samples_per_s: float | None = None  # the last logged RunningAvgSamplesPerSec

    def step_loss(self, index: int, loss: float) -> None:
        """``index``: the step's 0-based index in its epoch. FlagPerf prints ave_loss / 10 at
        every index divisible by 10 (index 0 too: one loss over 10) and restarts the sum."""
        self.window = (0.0 if index == 0 else self.window) + loss
        if index % 10 == 0:
            self.loss, self.window = self.window / 10, 0.0

    def read_timer(self, timer: Any, steps_per_print: int) -> None:
        """DeepSpeed's ThroughputTimer logs RunningAvgSamplesPerSec (sequences over all ranks
        per second since its start_step) every steps_per_print global steps; FlagPerf reads
        the last."""
        count = timer.global_step_count
        if count % steps_per_print == 0 and count > timer.start_step:
            self.samples_per_s = timer.avg_samples_per_sec()

    def metrics(
        self, seq: int, batch: int, nproc: int, nnodes: int, theory_flops: float
    ) -> dict[str, float | None]:
        """FlagPerf's chip_tps = seqlength x batchsize x RunningAvgSamplesPerSec / nproc x
        nnodes and its MFU, a flat 7e9 x 6 FLOPs per token over theoryflops (0: none).
        FlagPerf's ds_config.json says micro batch 1 whatever batchsize the loader gives, so
        its timer counted one sample per rank and micro step where this run's counts
        ``batch``: chip_tps is the tokens trained per second / nproc x nnodes (nnodes^2
        times the per-device rate; the rate itself on one host)."""
        tps = None
        if self.samples_per_s is not None:
            logged = self.samples_per_s / batch  # what FlagPerf's DeepSpeed logged
            tps = seq * batch * logged / nproc * nnodes
        finite = self.loss is not None and math.isfinite(self.loss)
        return {
            "loss_flagperf": self.loss if finite else None,
            "tokens_per_s_flagperf": tps,
            "mfu_flagperf": tps * 7e9 * 6 / theory_flops if tps and theory_flops else None,
        }
