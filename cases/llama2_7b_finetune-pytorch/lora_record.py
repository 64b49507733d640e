"""What the LoRA run's record says beside its figures: FlagPerf's MFU and the notes."""

from __future__ import annotations

from typing import Any

import harness
import mmlu

# FlagPerf's nominal parameter count in its MFU (run_pretraining.py: 7000000000.0).
FLAGPERF_PARAMS = 7.0e9
FP32_NOTE = "weights in fp32; MMLU without autocast (as FlagPerf)"
# What each precision ran, as FlagPerf's use_fp16 (fp16) or the harness's cast (bf16).
PRECISION_NOTES = {
    "fp16": "fp16 as FlagPerf's use_fp16: model.half() (every weight float16), autocast, a "
    "GradScaler and a fused AdamW on the float16 adapters; MMLU in float16 without autocast",
    "bf16": "bf16: every weight bfloat16 (device.cast_weights; FlagPerf has no bf16 path), "
    "autocast; MMLU in bfloat16 without autocast",
}


def flagperf_mfu(run: harness.Run) -> float | None:
    """FlagPerf's MFU: tokens/p/s x 2 x 7e9 / hp theory_flops (run_pretraining.py: 2 FLOPs
    per parameter of the nominal 7B, a forward only, over the A100's TF32 peak for every
    precision); None where theory_flops is 0 (a chip FlagPerf names no peak for)."""
    rate = harness.throughput_metrics(run.totals())["tokens_per_s_per_device"]
    if not rate or run.hp.theory_flops <= 0:
        return None
    return rate * 2 * FLAGPERF_PARAMS / run.hp.theory_flops


def notes(
    hp: Any,
    precision: str,
    params: tuple[int, int],
    epochs: int,
    items: list[mmlu.Item],
    per_subject: dict[str, dict[str, float]],
) -> list[str]:
    """The record's notes; ``params`` is (LoRA's trainable, the model's total)."""
    n_lora, n_total = params
    out = [
        f"LoRA (seed's LoraConfig): {n_lora} trainable parameters of {n_total}; base frozen",
        f"loss: FlagPerf's avg_train_loss, the mean over {epochs} epochs of each "
        "epoch's mean step loss",
        f"acc: MMLU {hp.mmlu_shots}-shot over {len(items)} questions of {len(per_subject)} "
        f"subjects (mmlu_subjects={hp.mmlu_subjects}; FlagPerf's TASKS: MMLU's 57; all "
        "questions weighted equally), "
        f"mmlu_scoring={hp.mmlu_scoring}: {mmlu.SCORING[hp.mmlu_scoring]}; per subject in "
        "mmlu_subjects.json",
        f"mmlu_mode={hp.mmlu_mode}: {mmlu.MODES[hp.mmlu_mode]}",
        "no accuracy target (seed: MMLU only checks the fine-tuned model works): "
        "passed = num_epochs trained to a finite loss",
        "samples are packed blocks of max_seq_length tokens: every token is real",
        "mfu_flagperf: FlagPerf's MFU, tokens/p/s x 2 x 7e9 / theory_flops "
        f"({hp.theory_flops:g}); mfu: the harness's, model FLOPs over the peak of the math run",
        PRECISION_NOTES.get(precision, FP32_NOTE),
    ]
    cut = sum(i.cut > 0 for i in items)
    if cut:
        out.append(f"MMLU: {cut} prompts cut to max_seq_length={hp.max_seq_length} (as FlagPerf)")
    if mmlu.overall(per_subject) == 0 and hp.mmlu_scoring == "vocab":
        out.append(
            "acc 0: under FlagPerf's rule only a letter as the argmax over the whole vocabulary "
            "counts; a model never trained to answer (the synthetic one) puts no letter first"
        )
    return out
