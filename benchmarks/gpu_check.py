"""TF32, strict FP32 and NVML energy on a CUDA machine, through the harness's own device layer.

    PYTHONPATH=cases python benchmarks/gpu_check.py [--n 8192] [--seconds 3]

For tf32 and then fp32 it opens device 0 with ``harness.open_device("nvidia", precision)``,
reads the float32 settings that left (matmul precision, cuDNN TF32, ``Device.math_mode()``),
times back-to-back N x N x N float32 matmuls for about ``--seconds``, and reads NVML's
total-energy counter over them with ``harness.energy.nvml_counter``. Prints one JSON object:
per precision the settings, TFLOP/s, the datasheet peak the result would divide by (and the
fraction of it reached), joules, watts and joules per TFLOP; and ``tf32_over_fp32``, the
speed-up, which is several times on Ampere and later when TF32 is really on.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import harness
from harness.energy import nvml_counter
from harness.peak import chip_from_device_name, peak_flops


def measure(precision: str, n: int, seconds: float) -> dict[str, Any]:
    import torch

    device = harness.open_device("nvidia", precision, 0)
    settings = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "math_mode": device.math_mode(),
    }
    a = torch.randn(n, n, device=device.torch_device)
    b = torch.randn(n, n, device=device.torch_device)
    for _ in range(3):  # warm-up: cuBLAS picks its kernel
        a @ b
    device.synchronize()
    t0 = time.perf_counter()
    a @ b
    device.synchronize()
    one = time.perf_counter() - t0
    reps = max(3, int(seconds / one))
    counter, why = nvml_counter(device.index or 0)
    start = counter.read() if counter else None
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    device.synchronize()
    elapsed = time.perf_counter() - t0
    joules = counter.joules(start, counter.read()) if counter and start else None
    flops = 2 * n**3 * reps
    chip = chip_from_device_name(device.name)
    peak = peak_flops(chip, settings["math_mode"])
    return {
        "precision": precision,
        "device": device.name,
        "driver": device.driver,
        **settings,
        "n": n,
        "reps": reps,
        "seconds": elapsed,
        "tflops": flops / elapsed / 1e12,
        "datasheet_peak_tflops": peak / 1e12 if peak else None,
        "fraction_of_datasheet": flops / elapsed / peak if peak else None,
        "joules": joules,
        "watts": joules / elapsed if joules is not None else None,
        "joules_per_tflop": joules / (flops / 1e12) if joules is not None else None,
        "energy_note": why or None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    import torch

    rows = [measure(p, args.n, args.seconds) for p in ("tf32", "fp32")]
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "runs": rows,
                "tf32_over_fp32": rows[0]["tflops"] / rows[1]["tflops"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
