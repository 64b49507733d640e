"""Base benchmark: GEMM rate per device (FlagPerf base/benchmarks/computation-*/main.py).

Every device builds two random matrix_size² operands at hp ``precision``, runs ``warmup``
GEMMs, then times ``iterations`` of them between device synchronisations (harness.gemm, the
timer ``fleetperf peak`` uses too): 2·N³·iterations / seconds, TFLOPS (TOPS for int8).
At a model's math (fp32, tf32, fp16, bf16) the node's first device's rate fills the
measured-peak cache that ``mfu_measured`` divides by (``harness.peakmeter.store_base_rate``).
"""

from __future__ import annotations

import sys

import harness
from harness.basebench import report, warm_then_time
from harness.gemm import Gemm
from harness.peak_cache import cache_path
from harness.peakmeter import store_base_rate


def main(run: harness.Run) -> None:
    hp = run.hp
    gemm = Gemm(run.device, hp.precision, hp.matrix_size)
    seconds = warm_then_time(gemm.run, run.device, hp.warmup, hp.iterations)
    rate = gemm.ops * hp.iterations / seconds
    unit = "TOPS" if hp.precision == "int8" else "TFLOPS"
    notes = [
        f"{hp.iterations} GEMMs of {hp.matrix_size}³ at {hp.precision} after {hp.warmup} "
        f"warm-up ones; {unit}"
    ]
    if run.env.local_rank == 0:  # the node's first device stands for its devices' name
        cache = cache_path(run.data.parent)
        notes.append(
            store_base_rate(run.device, hp.precision, rate, hp.matrix_size, cache, seconds)
        )
    report(run, "gemm_tflops", rate / 1e12, unit, notes=notes)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
