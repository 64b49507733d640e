"""The DeepSpeed config, derived from the run's resolved hyperparameters and precision.

FlagPerf's training/benchmarks/llama2_7b/deepspeed/ds_config.json at the seed's commit
43625f67, with its batch sizes, lr, weight decay and steps_per_print from config.json's hp
(the one source: FlagPerf's json could disagree with its config_*.py); the workload writes
what it built to RUN_DIR/ds_config.json for the record.

ZeRO stage 3 with FlagPerf's settings (buckets, overlap, contiguous gradients), AdamW with
FlagPerf's betas and eps, no scheduler (a constant lr), gradient clipping 1.0. One
difference: the optimizer is torch's AdamW (``torch_adam``), the same update; FlagPerf's
json gets DeepSpeed's FusedAdam, a CUDA op that the images (CUDA runtime, no nvcc) would
have to compile on each host at the first step.
"""

from __future__ import annotations

from typing import Any

# DeepSpeed 0.10.1's (the seed's stack) fp16 defaults, which FlagPerf's {"enabled": true}
# took: written out so that another DeepSpeed's defaults cannot change the run.
FP16_AS_0_10_1 = {
    "loss_scale": 0,  # dynamic
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "consecutive_hysteresis": False,
    "min_loss_scale": 1,
}


def precision_section(precision: str) -> dict[str, Any]:
    """fp16 (and amp, its other name): dynamic loss scaling; bf16: no scaler; else fp32."""
    if precision in ("fp16", "amp"):
        return {"fp16": {"enabled": True, **FP16_AS_0_10_1}}
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
        "prescale_gradients": False,
        "zero_allow_untested_optimizer": True,
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
        # the step whose RunningAvgSamplesPerSec FlagPerf reads (run.py, tokens_per_s_flagperf)
        "steps_per_print": int(hp["steps_per_print"]),
        "gradient_clipping": 1.0,
        "wall_clock_breakdown": False,
        **precision_section(precision),
        # FlagPerf's, inert as there: it configures deepspeed.checkpointing, which neither
        # runs; HF's gradient checkpointing (hp gradient_checkpointing) is torch's
        "activation_checkpointing": {
            "partition_activations": True,
            "contiguous_memory_optimization": False,
        },
    }
