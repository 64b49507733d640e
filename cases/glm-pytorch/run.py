"""glm-pytorch: GLM fine-tuned on SuperGLUE ReCoRD as a multi-token cloze (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/glm-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun). Follows docs/workload-contract.md. Loads the GLM state dict
(checkpoint/mp_rank_00_model_states.pt, THUDM/GLM key names) and its WordPiece vocabulary,
trains on ReCoRD/train.jsonl with data parallelism, and every eval_every_samples training
questions (over all ranks) scores ReCoRD/val.jsonl: acc is exact match (see record.py). Stops
when acc reaches target_acc or after max_samples questions.

A sample is one question: its candidates are one padded sequence each (max_seq_length), the
loss is the cross-entropy over the candidates' log-likelihoods. Throughputs count questions;
tokens_per_s_per_device counts real tokens of all candidate sequences; MFU counts the padded
sequences the device computed on.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

import harness
import torch
from glm_model import GLMConfig, GLMModel, MultiTokenCloze, load_state_dict_file
from record import DataError, WordPiece, collate, encode_question, exact_match, read_record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

CASE = "glm-pytorch"
CHECKPOINT = "checkpoint/mp_rank_00_model_states.pt"
VOCAB = "checkpoint/vocab.txt"
TRAIN, DEV = "ReCoRD/train.jsonl", "ReCoRD/val.jsonl"
HP_KEYS = (
    "train_batch_size",
    "eval_batch_size",
    "learning_rate",
    "weight_decay",
    "clip_grad",
    "max_seq_length",
    "num_attention_heads",
    "dropout",
    "checkpoint_activations",
    "max_samples",
    "eval_every_samples",
    "target_acc",
    "log_every_steps",
    "warmup_steps",
    "seed",
    "num_workers",
)
SYS_EVERY_S = 10.0


def load_questions(path: Path, tok: WordPiece, max_len: int) -> list[Any]:
    try:
        return [encode_question(tok, q, max_len) for q in read_record(path)]
    except DataError as e:
        raise harness.InputError(str(e)) from None


MODEL_INPUTS = ("input_ids", "position_ids", "sep", "targets", "target_mask", "choice_index")


def model_inputs(batch: dict[str, Any], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: batch[k].to(device, non_blocking=True) for k in MODEL_INPUTS}


@torch.no_grad()
def evaluate(model: MultiTokenCloze, loader: DataLoader, device: Any) -> float:
    """Exact match over the whole dev set (each rank scores its shard; counts are summed)."""
    model.eval()
    correct = total = 0
    for batch in loader:
        with device.autocast():
            scores = model(**model_inputs(batch, device.torch_device))
        for q, pick in zip(batch["questions"], scores.argmax(-1).tolist(), strict=True):
            correct += bool(q.candidates) and exact_match(q.candidates[pick], q.answers)
            total += 1
    model.train()
    correct, total = harness.all_reduce([correct, total])
    return correct / total


def main(args: argparse.Namespace, env: harness.DistEnv, events: harness.EventWriter) -> int:
    config = harness.load_config(args.config)
    hp = config["hp"]
    missing = [k for k in HP_KEYS if k not in hp]
    if missing:
        raise harness.InputError(f"{args.config}: hp lacks {', '.join(missing)}")
    harness.require_paths(args.data_dir, (CHECKPOINT, VOCAB, TRAIN, DEV))
    precision = str(config.get("precision") or hp.get("precision") or "fp32")
    device = harness.open_device(str(config.get("vendor", "cpu")), precision, env.local_rank)
    harness.init_distributed(env, device)
    world, bs, max_len = env.world_size, int(hp["train_batch_size"]), int(hp["max_seq_length"])
    say = print if env.is_global_zero else (lambda *a, **k: None)
    events.emit("start", world_size=world, case=CASE, precision=precision)
    say(f"{CASE}: world_size {world}, device {device.name}, precision {precision}", flush=True)
    torch.manual_seed(int(hp["seed"]))

    data = Path(args.data_dir)
    try:  # these errors name their file
        tok = WordPiece(data / VOCAB)
        state = load_state_dict_file(data / CHECKPOINT)
    except ValueError as e:
        raise harness.InputError(str(e)) from None
    try:
        cfg = GLMConfig.from_state_dict(
            state,
            int(hp["num_attention_heads"]),
            float(hp["dropout"]),
            bool(hp["checkpoint_activations"]),
        )
    except (ValueError, KeyError) as e:
        raise harness.InputError(f"{data / CHECKPOINT}: {e}") from None
    if tok.size > cfg.vocab_size or max_len > cfg.max_sequence_length:
        raise harness.InputError(
            f"{data / CHECKPOINT}: {cfg.vocab_size} token rows and {cfg.max_sequence_length} "
            f"positions do not fit {tok.size} tokens (vocab.txt + 2) and max_seq_length {max_len}"
        )
    glm = GLMModel(cfg)
    glm.load_state_dict(state)
    del state
    raw = MultiTokenCloze(glm).to(device.torch_device)
    n_params = harness.non_embedding_params(glm)
    per_token = harness.training_flops_per_token(
        n_params, cfg.num_layers, cfg.num_heads, cfg.head_dim, max_len
    )
    model: torch.nn.Module = raw
    if world > 1:
        model = DistributedDataParallel(raw, device_ids=device.ddp_device_ids)

    train = [q for q in load_questions(data / TRAIN, tok, max_len) if q.label >= 0]
    dev_all = load_questions(data / DEV, tok, max_len)
    dev = dev_all[env.rank :: world]
    coll = partial(collate, max_len=max_len, tok=tok)
    sampler = DistributedSampler(
        train, num_replicas=world, rank=env.rank, shuffle=True, seed=int(hp["seed"]), drop_last=True
    )
    loader_args = {
        "collate_fn": coll,
        "num_workers": int(hp["num_workers"]),
        "pin_memory": device.pin_memory,
    }
    train_loader = DataLoader(train, batch_size=bs, sampler=sampler, drop_last=True, **loader_args)
    dev_loader = DataLoader(dev, batch_size=int(hp["eval_batch_size"]), **loader_args)
    if len(train_loader) == 0:
        raise harness.InputError(
            f"{data / TRAIN}: fewer answerable questions than one global batch"
        )

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(hp["learning_rate"]), weight_decay=float(hp["weight_decay"])
    )
    scaler = device.scaler
    perf = harness.PerfTracker(int(hp["warmup_steps"]), device.synchronize, harness.barrier)
    memory = harness.MemoryMonitor(device)
    sysmon = harness.SysSampler(device, min_interval_s=SYS_EVERY_S)
    max_samples, eval_every = int(hp["max_samples"]), int(hp["eval_every_samples"])
    target, log_every, clip = (
        float(hp["target_acc"]),
        int(hp["log_every_steps"]),
        float(hp["clip_grad"]),
    )
    say(
        f"model: GLM {cfg.num_layers} layers, hidden {cfg.hidden_size}, {cfg.num_heads} heads, "
        f"{n_params} non-embedding params; train {len(train)} questions, dev {len(dev_all)}",
        flush=True,
    )

    step = samples = local_tokens = epoch = 0
    next_eval = eval_every
    acc: float | None = None
    last_loss: float | None = None
    converged = done = False
    win_loss, win_steps, win_samples = 0.0, 0, 0
    win_t0 = perf.clock()

    def log_step() -> None:
        nonlocal win_loss, win_steps, win_samples, win_t0, last_loss
        loss_sum, loss_n, tokens = harness.all_reduce([win_loss, win_steps, local_tokens])
        now = perf.clock()
        last_loss = loss_sum / loss_n
        memory.sample()
        used, total = memory.peak_gib()
        throughput = win_samples / (now - win_t0)
        events.emit(
            "step",
            step=step,
            samples=samples,
            tokens=int(tokens),
            loss=last_loss,
            lr=optimizer.param_groups[0]["lr"],
            throughput=throughput,
            mem_used_gib=used,
            mem_total_gib=total,
        )
        say(f"step {step} samples {samples} loss {last_loss:.4f} {throughput:.2f} q/s", flush=True)
        if sysmon.due():
            events.emit("sys", **sysmon.sample())
        win_loss, win_steps, win_samples, win_t0 = 0.0, 0, 0, perf.clock()

    model.train()
    perf.train_begin()
    while not done:
        sampler.set_epoch(epoch)
        for cpu_batch in train_loader:  # loading and host-to-device copies: outside p_core
            inputs = model_inputs(cpu_batch, device.torch_device)
            labels = cpu_batch["labels"].to(device.torch_device, non_blocking=True)
            perf.step_begin()
            with device.autocast():
                loss = torch.nn.functional.cross_entropy(model(**inputs), labels)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            n_seq = inputs["input_ids"].shape[0]
            perf.step_end(bs, cpu_batch["real_tokens"], n_seq * max_len)

            step += 1
            samples += bs * world
            local_tokens += cpu_batch["real_tokens"]
            win_loss += loss.item()
            win_steps += 1
            win_samples += bs * world
            if step % log_every == 0:
                log_step()
            if samples >= next_eval or samples >= max_samples:
                with perf.evaluating():
                    acc = evaluate(raw, dev_loader, device)
                events.emit("eval", name="acc", value=acc, samples=samples)
                say(f"eval samples {samples} acc {acc:.4f}", flush=True)
                while next_eval <= samples:
                    next_eval += eval_every
                converged = acc >= target
                done = converged or samples >= max_samples
            if done:
                break
        epoch += 1
    perf.train_end()
    if win_steps:
        log_step()

    totals = harness.reduce_totals(perf.totals())
    mem = harness.reduce_memory(*memory.peak_gib())
    harness.shutdown_distributed()
    if env.is_global_zero:
        message = None if converged else f"target acc {target} not reached in {max_samples} samples"
        payload = harness.build_result(
            totals=totals,
            world_size=world,
            device=device,
            chip=config.get("chip"),
            flops=harness.ModelFlops(
                per_token,
                formula=f"6N+12LHQT, N={n_params} without embeddings, T={max_len}, "
                "one padded sequence per candidate",
            ),
            memory=mem,
            metrics={"acc": acc, "loss": last_loss},
            converged=converged,
            message=message,
            notes=["a sample is one ReCoRD question with all its candidates"],
            peak_cache=harness.peak_cache_path(Path(args.data_dir).parent),
        )
        events.emit("result", **payload)
        say(f"result {payload['status']}: acc={acc} loss={last_loss}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(harness.run_workload("glm-pytorch workload", main))
