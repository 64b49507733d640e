"""llama2_7b_finetune-pytorch: Llama-2-7B LoRA fine-tuning on samsum, then MMLU 5-shot (FlagPerf).

    PYTHONPATH=<repo>/cases python cases/llama2_7b_finetune-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

One process, as the seed's configs; the harness's ``Run`` (docs/harness.md) does the rest.
The base model (DATA_DIR/llama2_7b_hf) is frozen; peft adds the seed's LoRA adapters, the
only trained weights. samsum prompts are packed into blocks of max_seq_length tokens (no
padding), max_samples blocks are trained. Then MMLU k-shot (mmlu.py): ``acc`` over hp
mmlu_subjects under hp mmlu_scoring, by default as the seed's rows were (abstract_algebra,
argmax over the whole vocabulary); RUN_DIR/mmlu_subjects.json has each subject's result.
The seed's MMLU only checks the model works: a run passes on a finite loss.

Precision as FlagPerf's: float32 weights under the device's autocast (fp16 with a gradient
scaler); MMLU without autocast, as its evaluate_MMLU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import harness
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
    """The frozen float32 checkpoint with the seed's LoRA adapters (peft), on the device."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    base = LlamaForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    return get_peft_model(base, LoraConfig(**LORA)).to(device.torch_device)


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


@torch.no_grad()
def score_mmlu(run: harness.Run, model: Any, items: list[mmlu.Item], letters: list[int]) -> dict:
    """Per-subject MMLU results of ``model`` (mmlu.score); no autocast, as FlagPerf's."""
    model.eval()
    per_subject = mmlu.score(
        lambda ids: model(input_ids=ids.to(run.device.torch_device), logits_to_keep=1).logits,
        items,
        letters,
        run.hp.mmlu_scoring,
    )
    model.train()
    return per_subject


def main(run: harness.Run) -> None:
    hp, device = run.hp, run.device
    if run.env.world_size != 1:
        raise harness.InputError(f"{run.case.name} runs one process (got {run.env.world_size})")
    import transformers
    from torch.utils.data import DataLoader, RandomSampler
    from transformers import AutoTokenizer

    root = run.data / "mmlu"
    names = mmlu.select(root, hp.mmlu_subjects)  # bad hp: before any loading
    transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(run.data / CHECKPOINT)
    train_json = run.data / "samsum/train.json"
    blocks = samsum.pack(samsum.read_records(train_json), tokenizer, hp.max_seq_length)
    model = lora_model(run.data / CHECKPOINT, device)
    items = mmlu.build_items(
        root, names, tokenizer, hp.mmlu_shots, model.config.max_position_embeddings
    )
    letters = mmlu.letter_ids(tokenizer)
    flops, n_lora = model_flops(model, hp.max_seq_length)
    n_total = sum(p.numel() for p in model.parameters())
    run.say(f"LoRA: {n_lora} trainable of {n_total} parameters; {len(blocks)} blocks")

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=hp.learning_rate, weight_decay=hp.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=hp.lr_gamma)
    # One seeded permutation of the blocks per epoch, whole batches only.
    order = RandomSampler(blocks, generator=torch.Generator().manual_seed(hp.seed))
    loader = DataLoader(blocks, batch_size=hp.train_batch_size, sampler=order, drop_last=True)
    if len(loader) == 0:
        raise harness.InputError(f"{train_json}: fewer than {hp.train_batch_size} blocks")

    model.train()
    for batch in run.train(loader, epoch_end=scheduler.step):  # the seed's StepLR per epoch
        input_ids = batch.to(device.torch_device, non_blocking=True)
        with run.step(len(batch), batch.numel(), batch.numel()) as step:  # packed: all real
            with device.autocast():
                step.loss = model(input_ids=input_ids, labels=input_ids).loss
            run.optimize(step.loss, optimizer)

    per_subject: dict[str, dict[str, float]] = {}

    def evaluate() -> dict[str, float]:
        per_subject.update(score_mmlu(run, model, items, letters))
        return {"acc": mmlu.overall(per_subject)}

    run.evaluate(evaluate)  # after training, inside the window (out of p_train and p_core)
    (run.run_dir / "mmlu_subjects.json").write_text(json.dumps(per_subject, indent=1))

    shots = hp.mmlu_shots
    notes = [
        f"LoRA (seed's LoraConfig): {n_lora} trainable parameters of {n_total}; base frozen",
        f"acc: MMLU {shots}-shot over {len(items)} questions of {len(per_subject)} subjects "
        f"(mmlu_subjects={hp.mmlu_subjects}; all questions weighted equally), "
        f"mmlu_scoring={hp.mmlu_scoring}: {mmlu.SCORING[hp.mmlu_scoring]}; per subject in "
        "mmlu_subjects.json",
        "no accuracy target (seed: MMLU only checks the fine-tuned model works): "
        "passed = the sample budget trained to a finite loss",
        "samples are packed blocks of max_seq_length tokens: every token is real",
        "weights in fp32 under the precision's autocast; MMLU without autocast (as FlagPerf)",
    ]
    truncated = sum(i.shots < shots for i in items)
    if truncated:
        notes.append(f"MMLU: {truncated} prompts lost shots to fit the model's context")
    run.finish(
        flops,
        metrics={"lora_params": n_lora},
        notes=notes,
        extra={"mmlu_subjects": {name: s["acc"] for name, s in per_subject.items()}},
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
