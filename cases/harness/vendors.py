"""What each vendor's software stack can run: one table, standard library only.

The workload's device layer (``harness.device``) refuses a precision that is not listed for
its vendor, and the controller imports this module (``harness.vendors``, no torch) to refuse
the same run before anything is launched.

Precisions (config.json ``precision``):

- ``fp32``  plain float32; matmuls in full fp32 unless the run enables TF32 itself
- ``tf32``  float32 tensors, matmuls and convolutions in TF32 (NVIDIA Ampere and later)
- ``amp``   autocast to float16 with a gradient scaler
- ``fp16``  ``amp``'s autocast and scaler; a case whose FlagPerf code ran ``model.half()``
            also casts its weights (``Device.cast_weights``, float32 masters in the optimizer)
- ``bf16``  autocast to bfloat16, no scaler (``Device.cast_weights``: bfloat16 weights)
- ``fp64``, ``int8``, ``fp8``  a GEMM's operand type, for the base computation case only
            (``GEMM_ONLY``: a case accepts them only where its case.yaml lists them under
            ``choices.precision``); the device sets strict FP32 math and no autocast

Why a vendor lacks one: iluvatar's and kunlunxin's CUDA-compatible stacks have no TF32 math;
kunlunxin's bf16 support is not in the documentation we wrote from; a CPU has no float16
autocast worth benchmarking and no TF32. NVIDIA has TF32 from Ampere (compute capability
8.0) on: the chips before it are refused here by name and, on the host, by the device's
compute capability (``harness.device``). fp64, int8 and fp8 are in ``GEMM_BY_VENDOR``
where the vendor's documentation or FlagPerf's base configs for that vendor
(``base/benchmarks/computation-*``) run them; FP8 GEMMs need NVIDIA Ada or Hopper (compute
capability 8.9) or later.
"""

from __future__ import annotations

VENDORS = ("nvidia", "iluvatar", "kunlunxin", "cpu")
PRECISIONS = ("fp32", "tf32", "amp", "fp16", "bf16")  # every precision a model case may name
# Operand types of the base computation case's GEMM, named only by a case that lists them
# under its case.yaml ``choices.precision``.
GEMM_ONLY = ("fp64", "int8", "fp8")

PRECISIONS_BY_VENDOR: dict[str, tuple[str, ...]] = {
    "nvidia": ("fp32", "tf32", "amp", "fp16", "bf16"),
    "iluvatar": ("fp32", "amp", "fp16", "bf16"),
    "kunlunxin": ("fp32", "amp", "fp16"),
    "cpu": ("fp32", "bf16"),
}
# The GEMM-only types each vendor runs, beside its precisions above.
GEMM_BY_VENDOR: dict[str, tuple[str, ...]] = {
    "nvidia": ("fp64", "int8", "fp8"),
    "iluvatar": ("int8",),  # FlagPerf's computation-INT8 runs on BI150 (iluvatar/BI150)
    "kunlunxin": (),
    "cpu": ("fp64",),
}

# NVIDIA chips older than Ampere (Volta, Turing, Pascal, Kepler): no TF32 tensor math. A
# config's chip that starts with one of these names is refused tf32.
PRE_AMPERE_NVIDIA = ("V100", "T4", "TITAN-V", "P100", "P40", "P4", "K80")
TF32_MIN_CAPABILITY = (8, 0)  # Ampere
# NVIDIA chips with FP8 tensor math (Ada: L4, L40; Hopper; Blackwell); a config's chip that
# starts with none of these names is refused fp8.
FP8_NVIDIA = ("H100", "H800", "H200", "H20", "GH200", "L4", "L40", "B100", "B200", "GB200")
FP8_MIN_CAPABILITY = (8, 9)


def precision_problem(vendor: str, precision: str, chip: str | None = None) -> str | None:
    """Why ``vendor`` (its ``chip``, where given) cannot run ``precision`` (one line), or
    None when it can."""
    if vendor not in PRECISIONS_BY_VENDOR:
        return f"unknown vendor {vendor!r}; known: {', '.join(VENDORS)}"
    allowed = PRECISIONS_BY_VENDOR[vendor]
    if precision in GEMM_ONLY and precision not in GEMM_BY_VENDOR[vendor]:
        gemm = (*allowed, *GEMM_BY_VENDOR[vendor])
        return (
            f"precision {precision!r} is not available on vendor {vendor!r}; "
            f"its GEMMs take {', '.join(gemm)}"
        )
    if precision not in (*allowed, *GEMM_BY_VENDOR[vendor]):
        return (
            f"precision {precision!r} is not available on vendor {vendor!r}; "
            f"it has {', '.join(allowed)}"
        )
    name = (chip or "").strip().upper().replace("_", "-").replace(" ", "-")
    if precision == "tf32" and vendor == "nvidia" and name.startswith(PRE_AMPERE_NVIDIA):
        return (
            f"precision 'tf32' is not available on chip {chip!r}: TF32 needs an NVIDIA "
            "Ampere or later GPU (compute capability 8.0)"
        )
    if precision == "fp8" and vendor == "nvidia" and chip and not name.startswith(FP8_NVIDIA):
        return (
            f"precision 'fp8' is not available on chip {chip!r}: FP8 needs an NVIDIA Ada, "
            "Hopper or later GPU (compute capability 8.9)"
        )
    return None
