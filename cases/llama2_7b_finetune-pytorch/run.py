"""llama2_7b_finetune-pytorch: Llama-2-7B LoRA fine-tuning on samsum, then MMLU 5-shot (FlagPerf).

    PYTHONPATH=<repo>/cases python cases/llama2_7b_finetune-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md; one process, as the seed's configs. The base model is
LlamaForCausalLM from DATA_DIR/llama2_7b_hf, frozen; peft adds LoRA adapters with the seed's
LoraConfig (r=8, alpha 32, dropout 0.05, q_proj and v_proj); only they are trained. samsum
prompts are packed into blocks of max_seq_length tokens (no padding) and trained on for
max_samples blocks. Then MMLU is scored k-shot (mmlu.py): ``acc`` is over all questions, and
RUN_DIR/mmlu_subjects.json keeps each subject's accuracy.

Precision: the device layer's autocast (fp16 with a gradient scaler); for fp16 and bf16 the
frozen base weights are stored in that type too (adapters stay fp32): they get no gradient,
so a float32 copy would only cost memory and a cast per step.

The seed marks MMLU as a functional check of the fine-tuned model, not a target: a run
passes when it trains its budget to a finite loss and scores MMLU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import harness
import mmlu
import samsum
import torch

CASE = "llama2_7b_finetune-pytorch"
CHECKPOINT = "llama2_7b_hf"
REQUIRED_PATHS = (CHECKPOINT, "samsum/train.json", "mmlu/dev", "mmlu/test")
HP_KEYS = (
    "train_batch_size",
    "learning_rate",
    "weight_decay",
    "lr_gamma",
    "max_seq_length",
    "max_samples",
    "mmlu_shots",
    "mmlu_subjects",
    "log_every_steps",
    "warmup_steps",
    "seed",
)
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
HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
SYS_EVERY_S = 10.0


def case_registry() -> dict[str, harness.Metric]:
    """The metric registry with this case's own metrics, as case.yaml declares them."""
    import yaml

    case = yaml.safe_load(Path(__file__).with_name("case.yaml").read_text(encoding="utf-8"))
    return harness.registry(harness.Metric(**m) for m in case.get("metrics", []))


def check_hp(path: Path, hp: dict[str, Any]) -> None:
    missing = [k for k in HP_KEYS if k not in hp]
    if missing:
        raise harness.InputError(f"{path}: hp lacks {', '.join(missing)}")
    positive = ("train_batch_size", "max_seq_length", "max_samples", "log_every_steps")
    bad = [k for k in positive if int(hp[k]) <= 0]
    if bad:
        raise harness.InputError(f"{path}: hp {', '.join(bad)} must be positive")


def lora_model(ckpt: Path, device: harness.Device) -> Any:
    """The frozen checkpoint with the seed's LoRA adapters (peft), on the device."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    base = LlamaForCausalLM.from_pretrained(ckpt, dtype=HALF.get(device.precision, torch.float32))
    model = get_peft_model(base, LoraConfig(**LORA))  # freezes the base, adapters in fp32
    return model.to(device.torch_device)


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
def score_mmlu(
    model: Any, tokenizer: Any, root: Path, hp: dict[str, Any], device: Any
) -> tuple[dict, int]:
    """Per-subject MMLU results of ``model`` (see mmlu.py), and how many prompts lost shots."""
    names = mmlu.subjects(root)
    wanted = str(hp["mmlu_subjects"])
    if wanted != "all":
        unknown = sorted(set(wanted.split(",")) - set(names))
        if unknown:
            raise harness.InputError(f"{root / 'test'}: no subject {unknown[0]!r}")
        names = wanted.split(",")
    max_len = int(model.config.max_position_embeddings)
    items = mmlu.build_items(root, names, tokenizer, int(hp["mmlu_shots"]), max_len)

    def logits_of(ids: torch.Tensor) -> torch.Tensor:
        with device.autocast():
            out = model(input_ids=ids.to(device.torch_device), logits_to_keep=1)
        return out.logits.float()

    model.eval()
    per_subject = mmlu.score(logits_of, items, mmlu.letter_ids(tokenizer))
    model.train()
    return per_subject, sum(i.shots < int(hp["mmlu_shots"]) for i in items)


def main(args: argparse.Namespace, env: harness.DistEnv, events: harness.EventWriter) -> int:
    config = harness.load_config(args.config)
    hp = config["hp"]
    check_hp(args.config, hp)
    harness.require_paths(args.data_dir, REQUIRED_PATHS)
    if env.world_size != 1:
        raise harness.InputError(f"{CASE} runs one process (got world size {env.world_size})")
    if not config.get("vendor"):
        raise harness.InputError(f"{args.config}: no 'vendor'")
    precision = str(config.get("precision") or hp.get("precision") or "fp32")
    bs, seq = int(hp["train_batch_size"]), int(hp["max_seq_length"])
    device = harness.open_device(str(config["vendor"]), precision, env.local_rank)
    events.emit("start", world_size=1, case=CASE, precision=precision)
    print(f"{CASE}: device {device.name}, precision {precision}", flush=True)
    torch.manual_seed(int(hp["seed"]))

    import transformers
    from transformers import AutoTokenizer

    transformers.utils.logging.disable_progress_bar()
    data = Path(args.data_dir)
    tokenizer = AutoTokenizer.from_pretrained(data / CHECKPOINT)
    blocks = samsum.pack(samsum.read_records(data / "samsum/train.json"), tokenizer, seq)
    if len(blocks) < bs:
        raise harness.InputError(f"{data / 'samsum/train.json'}: fewer than {bs} blocks of {seq}")
    model = lora_model(data / CHECKPOINT, device)
    flops, n_lora = model_flops(model, seq)
    n_total = sum(p.numel() for p in model.parameters())
    print(f"LoRA: {n_lora} trainable of {n_total} parameters; {len(blocks)} blocks", flush=True)

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=float(hp["learning_rate"]), weight_decay=float(hp["weight_decay"])
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=float(hp["lr_gamma"]))
    perf = harness.PerfTracker(int(hp["warmup_steps"]), device.synchronize, harness.barrier)
    memory = harness.MemoryMonitor(device)
    sysmon = harness.SysSampler(device, min_interval_s=SYS_EVERY_S)
    gen = torch.Generator().manual_seed(int(hp["seed"]))
    max_samples, log_every = int(hp["max_samples"]), int(hp["log_every_steps"])

    step = samples = 0
    win_loss, win_steps, win_samples, last_loss = 0.0, 0, 0, math.nan
    win_t0 = perf.clock()
    model.train()
    perf.train_begin()
    while samples < max_samples:
        order = torch.randperm(len(blocks), generator=gen)
        for i in range(0, len(order) - bs + 1, bs):  # whole batches only
            input_ids = blocks[order[i : i + bs]].to(device.torch_device, non_blocking=True)
            perf.step_begin()
            with device.autocast():
                loss = model(input_ids=input_ids, labels=input_ids).loss
            if device.scaler is not None:
                device.scaler.scale(loss).backward()
                device.scaler.step(optimizer)
                device.scaler.update()
            else:
                loss.backward()
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            perf.step_end(bs, input_ids.numel(), input_ids.numel())  # packed: every token real
            step, samples = step + 1, samples + bs
            win_loss += loss.item()
            win_steps += 1
            win_samples += bs
            if step % log_every == 0 or samples >= max_samples:
                now = perf.clock()
                last_loss = win_loss / win_steps
                memory.sample()
                used, total = memory.peak_gib()
                events.emit(
                    "step",
                    step=step,
                    samples=samples,
                    tokens=samples * seq,
                    loss=last_loss,
                    lr=optimizer.param_groups[0]["lr"],
                    throughput=win_samples / (now - win_t0),
                    mem_used_gib=used,
                    mem_total_gib=total,
                )
                print(f"step {step} samples {samples} loss {last_loss:.4f}", flush=True)
                if sysmon.due():
                    events.emit("sys", **sysmon.sample())
                win_loss, win_steps, win_samples, win_t0 = 0.0, 0, 0, perf.clock()
            if samples >= max_samples:
                break
        scheduler.step()  # the seed's StepLR: lr x gamma after each epoch
    with perf.evaluating():
        per_subject, truncated = score_mmlu(model, tokenizer, data / "mmlu", hp, device)
    perf.train_end()
    acc = mmlu.overall(per_subject)
    n_questions = sum(int(s["total"]) for s in per_subject.values())
    (Path(args.run_dir) / "mmlu_subjects.json").write_text(json.dumps(per_subject, indent=1))
    events.emit("eval", name="acc", value=acc, samples=samples)
    print(f"MMLU {hp['mmlu_shots']}-shot acc {acc:.4f} over {n_questions} questions", flush=True)

    finite = math.isfinite(last_loss)
    notes = [
        f"LoRA (seed's LoraConfig): {n_lora} trainable parameters of {n_total}; base frozen",
        f"acc: MMLU {hp['mmlu_shots']}-shot over {n_questions} questions of "
        f"{len(per_subject)} subjects (all questions weighted equally); per subject in "
        "mmlu_subjects.json; scored by the next-token logits of A/B/C/D",
        "no accuracy target (seed: MMLU only checks the fine-tuned model works): "
        "passed = the sample budget trained to a finite loss",
        "samples are packed blocks of max_seq_length tokens: every token is real",
    ]
    if truncated:
        notes.append(f"MMLU: {truncated} prompts lost shots to fit the model's context")
    if precision in HALF:
        notes.append(f"frozen base weights stored in {precision}, adapters in fp32")
    result = harness.build_result(
        totals=harness.reduce_totals(perf.totals()),
        world_size=1,
        device=device,
        chip=config.get("chip"),
        flops=flops,
        memory=harness.reduce_memory(*memory.peak_gib()),
        metrics={"acc": acc, "loss": last_loss if finite else None, "lora_params": n_lora},
        converged=finite,
        message=None if finite else f"training loss is {last_loss}",
        notes=notes,
        peak_cache=harness.peak_cache_path(data.parent),
        registry=case_registry(),
    )
    # beyond the contract's fields: MMLU per subject, kept with the received events
    result["mmlu_subjects"] = {name: s["acc"] for name, s in per_subject.items()}
    events.emit("result", **result)
    shown = ", ".join(f"{k}={v:.4g}" for k, v in result["metrics"].items() if v is not None)
    print(f"result {result['status']}: {shown}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(harness.run_workload("llama2_7b_finetune-pytorch workload", main))
