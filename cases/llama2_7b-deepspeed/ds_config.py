"""The DeepSpeed config, derived from the run's resolved hyperparameters and precision.

FlagPerf's case named a ds_config.json that some vendors' trees lacked, and its batch sizes
could disagree with the case's own config; here the one source is config.json's hp, and the
workload writes what it built to RUN_DIR/ds_config.json for the record.

ZeRO stage 3 with FlagPerf's settings (buckets, overlap, contiguous gradients), AdamW with
FlagPerf's betas and eps, gradient clipping 1.0. The optimizer is torch's AdamW
(``torch_adam``): DeepSpeed's fused Adam is compiled on first use on each host, which a
benchmark run should not wait for.
"""

from __future__ import annotations

from typing import Any

# DeepSpeed's own throughput log is not read (the harness times the steps): keep it quiet.
NEVER = 2**31 - 1


def precision_section(precision: str) -> dict[str, Any]:
    """fp16 (and amp, its other name): dynamic loss scaling; bf16: no scaler; else fp32."""
    if precision in ("fp16", "amp"):
        return {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}}
    if precision == "bf16":
        return {"bf16": {"enabled": True}}
    return {}


def build(hp: dict[str, Any], precision: str, world_size: int) -> dict[str, Any]:
    micro = int(hp["train_batch_size"])
    gas = int(hp["gradient_accumulation_steps"])
    return {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas,
        "train_batch_size": micro * gas * world_size,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": float(hp["learning_rate"]),
                "weight_decay": float(hp["weight_decay"]),
                "betas": [0.9, 0.95],
                "eps": 1e-5,
                "torch_adam": True,
            },
        },
        "zero_optimization": {
            "stage": 3,
            "stage3_max_live_parameters": 1e9,
            "stage3_max_reuse_distance": 1e9,
            "stage3_prefetch_bucket_size": 1e7,
            "sub_group_size": 1e9,
            "contiguous_gradients": True,
            "allgather_bucket_size": 1e8,
            "reduce_bucket_size": 1e7,
            "overlap_comm": True,
            "reduce_scatter": True,
        },
        "gradient_clipping": 1.0,
        "prescale_gradients": False,
        "steps_per_print": NEVER,
        "wall_clock_breakdown": False,
        **precision_section(precision),
    }
