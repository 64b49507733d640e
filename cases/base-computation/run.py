"""Base benchmark: GEMM rate per device (FlagPerf base/benchmarks/computation-*/main.py).

Every device builds two random matrix_size² operands at hp ``precision``, runs ``warmup``
GEMMs, then times ``iterations`` of them between device synchronisations (harness.gemm, the
timer ``fleetperf peak`` uses too): 2·N³·iterations / seconds, TFLOPS (TOPS for int8).
"""

from __future__ import annotations

import sys

import harness
from harness.basebench import report, warm_then_time
from harness.gemm import Gemm


def main(run: harness.Run) -> None:
    hp = run.hp
    gemm = Gemm(run.device, hp.precision, hp.matrix_size)
    seconds = warm_then_time(gemm.run, run.device, hp.warmup, hp.iterations)
    unit = "TOPS" if hp.precision == "int8" else "TFLOPS"
    report(
        run,
        "gemm_tflops",
        gemm.ops * hp.iterations / seconds / 1e12,
        unit,
        notes=[
            f"{hp.iterations} GEMMs of {hp.matrix_size}³ at {hp.precision} after {hp.warmup} "
            f"warm-up ones; {unit}"
        ],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
