"""Peak dense FLOP/s per chip and precision, and MFU.

One table for the whole repository. Figures are the vendors' data-sheet numbers for dense
math (where a sheet quotes "with sparsity", the dense figure is half of it). A chip or a
precision that is not here gives MFU ``None``: never a guess. Only add a figure with its
source.

Sources:
- A100 (SXM4/PCIe, 40/80 GB), A800: NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF,
  TF32 156 TF, BF16/FP16 312 TF (624 with sparsity). A800 lists the same compute.
- H100 SXM, H800 SXM, H200 SXM: NVIDIA H100 / H800 / H200 datasheets: FP32 67 TF,
  TF32 989 TF, BF16/FP16 1,979 TF, FP8 3,958 TF, all quoted with sparsity -> halved. TF32
  dense is the NVIDIA H100 Tensor Core GPU Architecture whitepaper's unrounded 494.7 TF
  (Table 3, H100 SXM5: 494.7 dense / 989.4 sparse), which the datasheet rounds to 989.
- H100 PCIe: NVIDIA H100 datasheet, PCIe column: FP32 51 TF, TF32 756 TF, BF16/FP16
  1,513 TF, FP8 3,026 TF (with sparsity) -> halved.
- V100 SXM2 / PCIe: NVIDIA V100 datasheet: FP32 15.7 / 14 TF, tensor FP16 125 / 112 TF.
- A10: NVIDIA A10 datasheet: FP32 31.2 TF, TF32 62.5 TF, BF16/FP16 125 TF (dense).
- T4: NVIDIA T4 datasheet: FP32 8.1 TF, mixed FP16/FP32 65 TF.
- BI-V100 (Iluvatar CoreX, "Big Island"): vendor launch figures (2021): FP32 37 TF,
  FP16/BF16 147 TF.
- R300 (Kunlunxin): no vendor datasheet figure we could find; FP16 128 TF is FlagPerf's own
  ``theoryflops = 128000000000000.0`` (training/kunlunxin/llama2_7b-deepspeed/config/
  config_R300x1x8.py at 43625f67, seed 004), the figure FlagPerf's MFU divides by there.
  ``PEAK_SOURCES`` names it, and every result that divides by it says so in a note.
Not listed for want of a source: CPUs (peak depends on SKU, cores, clocks and vector units).
"""

from __future__ import annotations

import re

T = 1e12

_A100 = {"fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T, "bf16": 312 * T}
_H100_SXM = {
    "fp32": 67 * T,
    "tf32": 494.7 * T,
    "fp16": 1979 / 2 * T,
    "bf16": 1979 / 2 * T,
    "fp8": 3958 / 2 * T,
}

PEAK_FLOPS: dict[str, dict[str, float]] = {
    "A100": _A100,
    "A800": _A100,
    "H100": _H100_SXM,
    "H800": _H100_SXM,
    "H200": _H100_SXM,
    "H100-PCIE": {
        "fp32": 51 * T,
        "tf32": 756 / 2 * T,
        "fp16": 1513 / 2 * T,
        "bf16": 1513 / 2 * T,
        "fp8": 3026 / 2 * T,
    },
    "V100": {"fp32": 15.7 * T, "fp16": 125 * T},
    "V100-PCIE": {"fp32": 14 * T, "fp16": 112 * T},
    "A10": {"fp32": 31.2 * T, "tf32": 62.5 * T, "fp16": 125 * T, "bf16": 125 * T},
    "T4": {"fp32": 8.1 * T, "fp16": 65 * T},
    "BI-V100": {"fp32": 37 * T, "fp16": 147 * T, "bf16": 147 * T},
    "R300": {"fp16": 128 * T},
}

# Figures that are not the vendor's datasheet: where each comes from (shown in the result).
PEAK_SOURCES = {
    "R300": "FlagPerf's theoryflops for R300 (training/kunlunxin/llama2_7b-deepspeed/config/"
    "config_R300x1x8.py @43625f67); Kunlunxin publishes no datasheet figure",
}

# Other spellings of the same chips (after upper-casing, "_" and " " read as "-").
ALIASES = {
    "H100-SXM": "H100",
    "H100-SXM5": "H100",
    "H800-SXM": "H800",
    "H200-SXM": "H200",
    "V100-SXM2": "V100",
    "A100-SXM4": "A100",
    "A100-PCIE": "A100",
    "BIV100": "BI-V100",
}

# A run's precision -> the math it runs at when nothing else changes it (the device layer's
# Device.math_mode() reports what actually ran). amp is autocast to float16.
PRECISION_MATH = {
    "fp32": "fp32",
    "tf32": "tf32",
    "amp": "fp16",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp8": "fp8",
}

# The hardware's own name -> the chip in PEAK_FLOPS, first match wins. Board variants with
# different figures (PCIe, NVL) are told apart; a name matching nothing has no datasheet peak.
_DEVICE_NAME_CHIPS: tuple[tuple[str, str | None], ...] = (
    (r"H100.*NVL", None),  # no NVL column in the table
    (r"H100.*PCIE", "H100-PCIE"),
    (r"H100", "H100"),
    (r"H800.*PCIE", None),
    (r"H800", "H800"),
    (r"H200.*NVL", None),
    (r"H200", "H200"),
    (r"A100", "A100"),
    (r"A800", "A800"),
    (r"V100.*PCIE", "V100-PCIE"),
    (r"BI-?V100", "BI-V100"),
    (r"V100", "V100"),
    (r"\bA10\b", "A10"),
    (r"\bT4\b", "T4"),
    (r"R300", "R300"),
)


def normalize_chip(chip: str) -> str:
    name = chip.strip().upper().replace("_", "-").replace(" ", "-")
    return ALIASES.get(name, name)


def chip_from_device_name(device_name: str) -> str | None:
    """The PEAK_FLOPS chip of a device as the hardware names it ("NVIDIA A100-SXM4-80GB"
    -> "A100", "NVIDIA H100 PCIe" -> "H100-PCIE"); None for anything else (CPUs too)."""
    name = device_name.upper()
    for pattern, chip in _DEVICE_NAME_CHIPS:
        if re.search(pattern, name):
            return chip
    return None


def peak_flops(chip: str | None, math: str | None) -> float | None:
    """Dense peak FLOP/s of one device of ``chip`` at ``math`` (a math mode or a precision);
    None where unknown."""
    if not chip or not math:
        return None
    mode = PRECISION_MATH.get(math.strip().lower())
    return PEAK_FLOPS.get(normalize_chip(chip), {}).get(mode) if mode else None


def datasheet_peak(
    config_chip: str | None, device_name: str, math: str
) -> tuple[float | None, str | None]:
    """(peak FLOP/s for MFU, None), (peak, a note naming a source other than a datasheet)
    or (None, a note saying why there is none).

    The chip comes from the hardware's name and must agree with the config's chip: a PCIe
    card run under an SXM config has another peak, and neither is the right divisor.
    """
    chip = chip_from_device_name(device_name)
    wanted = normalize_chip(config_chip) if config_chip else None
    if wanted and wanted != chip and (chip or wanted in PEAK_FLOPS):
        return None, (
            f"mfu null: the config's chip {config_chip!r} is not the hardware's "
            f"{device_name!r} ({chip or 'no datasheet entry'})"
        )
    if chip is None:
        return None, f"mfu null: no datasheet peak for device {device_name!r}"
    peak = peak_flops(chip, math)
    if peak is None:
        return None, f"mfu null: no datasheet peak for {chip} at {math} math"
    if chip in PEAK_SOURCES:
        return peak, f"mfu: {chip}'s {math} peak {peak / T:g} TFLOP/s is {PEAK_SOURCES[chip]}"
    return peak, None
