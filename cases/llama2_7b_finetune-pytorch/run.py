"""llama2_7b_finetune-pytorch: Llama-2-7B LoRA fine-tuning on samsum, then MMLU 5-shot (FlagPerf).

    PYTHONPATH=<repo>/cases python cases/llama2_7b_finetune-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

One process, as the seed's configs; the harness's ``Run`` (docs/harness.md) does the rest.
As FlagPerf's run_pretraining.py at the seed's commit (docs/cases/llama2.md's table): the
base model (DATA_DIR/llama2_7b_hf) is frozen, peft adds the seed's LoRA adapters, and for
fp16 the whole model is cast to float16 (``model.half()``: ``device.cast_weights``) and
trained by a fused AdamW under autocast and a GradScaler. samsum prompts are packed into
blocks of max_seq_length tokens (no padding), read in order for hp num_epochs epochs. The
loss is FlagPerf's ``avg_train_loss``, the mean of the epochs' mean losses. Then MMLU
k-shot (mmlu.py) over hp mmlu_subjects (all: FlagPerf loops its 57 TASKS), each prompt cut
to max_seq_length; RUN_DIR/mmlu_subjects.json has each subject's result. The seed's MMLU
only checks the model works: a run passes on a finite loss. MMLU is scored in training
mode, as FlagPerf's (hp mmlu_mode; eval: fleetperf's own). ``mfu_flagperf`` is FlagPerf's
MFU beside the harness's ``mfu`` (lora_record.py, with the record's notes).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import harness
import lora_record
import mmlu
import samsum
import torch

CHECKPOINT = "llama2_7b_hf"
# The seed's LoraConfig (FlagPerf llama2_7b_finetune-pytorch), field for field.
LORA = {
    "task_type": "CAUSAL_LM",
    "r": 8,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "target_modules": ["q_proj", "v_proj"],
    "bias": "none",
    "fan_in_fan_out": False,
    "inference_mode": False,
    "init_lora_weights": True,
}


def lora_model(ckpt: Path, device: harness.Device) -> Any:
    """The frozen checkpoint with the seed's LoRA adapters (peft), on the device, its weights
    in the precision's type where FlagPerf casts them (fp16: ``model.half()`` after peft)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    base = LlamaForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    model = device.cast_weights(get_peft_model(base, LoraConfig(**LORA)))
    return model.to(device.torch_device)


def lora_optimizer(model: Any, hp: Any, precision: str) -> torch.optim.Optimizer:
    """FlagPerf's AdamW over the adapters, fused for fp16: the fused kernel takes float16
    parameters and unscales their gradients itself (torch's GradScaler refuses to unscale
    float16 gradients for an unfused optimizer), so there are no float32 master copies."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        trainable, lr=hp.learning_rate, weight_decay=hp.weight_decay, fused=precision == "fp16"
    )


def model_flops(model: Any, seq_len: int) -> tuple[harness.ModelFlops, int]:
    """LoRA training FLOPs per token, 4N + 6N_lora + 12LHQT, and N_lora."""
    c = model.config
    n_lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_frozen = harness.non_embedding_params(model) - n_lora
    head_dim = c.hidden_size // c.num_attention_heads
    per_token = harness.lora_training_flops_per_token(
        n_frozen, n_lora, c.num_hidden_layers, c.num_attention_heads, head_dim, seq_len
    )
    formula = f"4N+6N_lora+12LHQT, N={n_frozen} frozen without embeddings, N_lora={n_lora}, "
    return harness.ModelFlops(per_token, 0.0, formula + f"T={seq_len}"), n_lora


def main(run: harness.Run) -> None:
    hp, device = run.hp, run.device
    if run.env.world_size != 1:
        raise harness.InputError(f"{run.case.name} runs one process (got {run.env.world_size})")
    import transformers
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer

    root = run.data / mmlu.DIR
    names = mmlu.select(root, hp.mmlu_subjects)  # bad hp: before any loading
    transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(run.data / CHECKPOINT)
    train_json = run.data / samsum.TRAIN_JSON
    blocks = samsum.pack(samsum.read_records(train_json), tokenizer, hp.max_seq_length)
    model = lora_model(run.data / CHECKPOINT, device)
    items = mmlu.build_items(root, names, tokenizer, hp.mmlu_shots, hp.max_seq_length)
    letters = mmlu.letter_ids(tokenizer)
    flops, n_lora = model_flops(model, hp.max_seq_length)
    n_total = sum(p.numel() for p in model.parameters())
    run.say(f"LoRA: {n_lora} trainable of {n_total} parameters; {len(blocks)} blocks")

    optimizer = lora_optimizer(model, hp, device.precision)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=hp.lr_gamma)
    # FlagPerf's DataLoader: no sampler, so the blocks in order every epoch; whole batches only.
    loader = DataLoader(blocks, batch_size=hp.train_batch_size, drop_last=True)
    if len(loader) == 0:
        raise harness.InputError(f"{train_json}: fewer than {hp.train_batch_size} blocks")

    epoch_losses: list[float] = []  # each epoch's mean step loss (FlagPerf's train_epoch_loss)
    total = torch.zeros((), device=device.torch_device)

    def end_epoch() -> None:
        epoch_losses.append(total.item() / len(loader))
        total.zero_()
        scheduler.step()  # the seed's StepLR, once per epoch

    model.train()
    for batch in run.train(loader, epochs=hp.num_epochs, epoch_end=end_epoch):
        input_ids = batch.to(device.torch_device, non_blocking=True)
        with run.step(len(batch), batch.numel(), batch.numel()) as step:  # packed: all real
            with device.autocast():
                step.loss = model(input_ids=input_ids, labels=input_ids).loss
            total.add_(step.loss.detach().float())
            run.optimize(step.loss, optimizer)

    per_subject: dict[str, dict[str, float]] = {}

    def evaluate() -> dict[str, float]:
        scored = mmlu.score_model(
            model, device.torch_device, items, letters, hp.mmlu_scoring, hp.mmlu_mode
        )
        per_subject.update(scored)
        return {"acc": mmlu.overall(per_subject)}

    run.evaluate(evaluate)  # after training, inside the window (out of p_train and p_core)
    (run.run_dir / "mmlu_subjects.json").write_text(json.dumps(per_subject, indent=1))

    loss = sum(epoch_losses) / len(epoch_losses)  # FlagPerf's avg_train_loss
    params = (n_lora, n_total)
    run.finish(
        flops,
        metrics={
            "lora_params": n_lora,
            "loss": loss if math.isfinite(loss) else None,
            "mfu_flagperf": lora_record.flagperf_mfu(run),
        },
        notes=lora_record.notes(
            hp, device.precision, params, len(epoch_losses), items, per_subject
        ),
        converged=math.isfinite(loss),
        message=None if math.isfinite(loss) else f"training loss is {loss}",
        extra={"mmlu_subjects": {name: s["acc"] for name, s in per_subject.items()}},
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
