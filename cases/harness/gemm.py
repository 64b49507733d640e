"""The one GEMM timer: a square ``torch.mm`` (M = N = K) timed between device synchronisations.

``harness.peakmeter`` (``fleetperf peak``, ``mfu_measured``) and the base computation case
(``cases/base-computation``) both time their matmuls with ``Gemm`` and ``timed``, so a
measured peak and a base row are the same measurement at different sizes and repetitions.

Operands per precision (FlagPerf's ``base/benchmarks/computation-*/main.py`` build them with
``torch.randn`` in the type, INT8 with ``torch.ones``):

- fp64, fp32, tf32, fp16, bf16: ``torch.mm`` on random operands of the type (tf32 is float32
  under the device's TF32 matmul setting, ``harness.device``);
- int8: ``torch.mm`` on a CPU, ``torch._int_mm`` (int8 x int8 -> int32) on a CUDA device,
  whose ``torch.mm`` has no int8 kernel;
- fp8: ``torch._scaled_mm`` on float8_e4m3fn operands (the second column-major, as it
  requires), unit scales, bfloat16 out (CUDA compute capability 8.9 or later).

Operations counted: 2·N³ per GEMM (one multiply and one add per term), so int8's and fp8's
rates are TOPS and TFLOPS as vendors' datasheets count their dense figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.device import Device

DTYPES = {
    "fp64": "float64",
    "fp32": "float32",
    "tf32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "int8": "int8",
    "fp8": "float8_e4m3fn",
}


def timed(run: Callable[[], Any], sync: Callable[[], None], reps: int = 1) -> float:
    """Seconds that ``reps`` calls of ``run`` take, the device synchronised before and after."""
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        run()
    sync()
    return time.perf_counter() - t0


class Gemm:
    """One ``side``³ GEMM at ``precision`` on ``device``: ``run()`` computes it once."""

    def __init__(self, device: Device, precision: str, side: int) -> None:
        import torch

        dev, dtype = device.torch_device, getattr(torch, DTYPES[precision])
        self.side = side
        self.ops = 2.0 * side**3
        if precision == "int8":
            a = torch.randint(-8, 8, (side, side), dtype=dtype, device=dev)
            b = torch.randint(-8, 8, (side, side), dtype=dtype, device=dev)
            mm = torch.mm if dev.type == "cpu" else torch._int_mm
            self._call: Callable[[], Any] = lambda: mm(a, b)
        elif precision == "fp8":
            a = torch.randn(side, side, device=dev).to(dtype)
            b = torch.randn(side, side, device=dev).to(dtype).t()  # column-major
            one = torch.ones((), device=dev)
            self._call = lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
        else:
            a = torch.randn(side, side, device=dev, dtype=dtype)
            b = torch.randn(side, side, device=dev, dtype=dtype)
            self._call = lambda: torch.mm(a, b)

    def run(self) -> None:
        self._call()
