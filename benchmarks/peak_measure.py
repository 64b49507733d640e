"""How long the measured-peak calibration takes, and how stable its figures are.

    PYTHONPATH=cases .venv/bin/python benchmarks/peak_measure.py [--repeats 5] [--math fp32]

Runs ``harness.peakmeter.measure`` (no cache) ``--repeats`` times on the CPU device with
torch's default thread count, and prints per run: wall seconds, matrix side, matmul
GFLOP/s, copy GB/s; then the median and spread, and the host's load per CPU before and
after (a busy host makes every figure lower and the spread wider).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness import peakmeter  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--math", default="fp32", choices=("fp32", "bf16"))
    args = parser.parse_args()
    import torch

    device = harness.open_device("cpu", "fp32")
    load_before = peakmeter.load_per_cpu()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {device.name}")
    walls, flops, bandwidths = [], [], []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        entry = peakmeter.measure(device, args.math)
        walls.append(time.perf_counter() - t0)
        flops.append(entry["matmul_flops"])
        bandwidths.append(entry["mem_bw_bytes_per_s"])
        print(
            f"run {i}: {walls[-1]:.2f} s, n={entry['matmul_n']}, "
            f"{flops[-1] / 1e9:.1f} GFLOP/s, copy {bandwidths[-1] / 1e9:.1f} GB/s"
        )
    print(
        f"median: {statistics.median(walls):.2f} s, {statistics.median(flops) / 1e9:.1f} GFLOP/s "
        f"(min {min(flops) / 1e9:.1f}, max {max(flops) / 1e9:.1f}), "
        f"copy {statistics.median(bandwidths) / 1e9:.1f} GB/s"
    )
    print(f"load per CPU: {load_before:.2f} before, {peakmeter.load_per_cpu():.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
