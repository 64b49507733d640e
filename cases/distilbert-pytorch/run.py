"""distilbert-pytorch: DistilBERT fine-tuned for SST-2 sentence classification (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/distilbert-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun for several processes). Follows docs/workload-contract.md: reads hp from
config.json, the checkpoint and SST-2 TSVs from DATA_DIR, appends events to
RUN_DIR/events.jsonl, prints a short log on stdout (global rank 0), exits 0 once the result
is written, 2 on bad input, 1 on any other failure.

Trains until dev accuracy reaches hp target_acc (checked every eval_every_samples training
samples, counted over all ranks) or until max_samples, then writes the result. Sequences are
padded to max_seq_length, as in FlagPerf. Throughputs count real samples; tokens_per_s_per_device
counts real (non-pad) tokens; MFU counts the padded tokens the device computed on.
"""

from __future__ import annotations

import argparse
import csv
import sys
from functools import partial
from pathlib import Path
from typing import Any

import harness
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

CASE = "distilbert-pytorch"
REQUIRED_PATHS = ("checkpoint", "SST-2/train.tsv", "SST-2/dev.tsv")
HP_KEYS = (
    "train_batch_size",
    "eval_batch_size",
    "learning_rate",
    "weight_decay",
    "max_seq_length",
    "max_samples",
    "eval_every_samples",
    "target_acc",
    "log_every_steps",
    "warmup_steps",
    "seed",
    "num_workers",
)
SYS_EVERY_S = 10.0  # at most one sys record per this many seconds (taken at a log step)


# ---------------------------------------------------------------------------------- data
def read_sst2(path: Path) -> list[tuple[str, int]]:
    """GLUE SST-2 TSV (header "sentence<TAB>label", no quoting) -> [(sentence, label)]."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, [])
        if "sentence" not in header or "label" not in header:
            raise harness.InputError(f"{path}: header must have 'sentence' and 'label' columns")
        s, y = header.index("sentence"), header.index("label")
        return [(row[s], int(row[y])) for row in reader if row]


def tokenize(tokenizer: Any, rows: list[tuple[str, int]], max_len: int) -> list[tuple[list, int]]:
    ids = tokenizer([text for text, _ in rows], truncation=True, max_length=max_len)["input_ids"]
    return list(zip(ids, [label for _, label in rows], strict=True))


def collate(batch: list[tuple[list, int]], max_len: int, pad_id: int) -> dict[str, Any]:
    """Pad every sequence to max_len (the device always sees B x max_len tokens)."""
    input_ids = torch.full((len(batch), max_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), max_len), dtype=torch.long)
    for i, (ids, _) in enumerate(batch):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention_mask[i, : len(ids)] = 1
    labels = torch.tensor([label for _, label in batch])
    real_tokens = sum(len(ids) for ids, _ in batch)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "real_tokens": real_tokens,
    }


# ----------------------------------------------------------------------------- training
@torch.no_grad()
def evaluate(model: Any, loader: DataLoader, device: harness.Device) -> float:
    """Accuracy over the whole dev set (each rank scores its shard, counts are summed)."""
    model.eval()
    correct = total = 0
    for batch in loader:
        with device.autocast():
            logits = model(
                input_ids=batch["input_ids"].to(device.torch_device),
                attention_mask=batch["attention_mask"].to(device.torch_device),
            ).logits
        correct += int((logits.argmax(-1).cpu() == batch["labels"]).sum())
        total += len(batch["labels"])
    model.train()
    correct, total = harness.all_reduce([correct, total])
    return correct / total


def main(args: argparse.Namespace, env: harness.DistEnv, events: harness.EventWriter) -> int:
    config = harness.load_config(args.config)
    hp = config["hp"]
    missing = [k for k in HP_KEYS if k not in hp]
    if missing:
        raise harness.InputError(f"{args.config}: hp lacks {', '.join(missing)}")
    positive = (
        "train_batch_size",
        "eval_batch_size",
        "max_seq_length",
        "log_every_steps",
        "eval_every_samples",
        "max_samples",
    )
    bad = [k for k in positive if int(hp[k]) <= 0]
    if bad:
        raise harness.InputError(f"{args.config}: hp {', '.join(bad)} must be positive")
    harness.require_paths(args.data_dir, REQUIRED_PATHS)
    precision = str(config.get("precision") or hp.get("precision") or "fp32")
    if not config.get("vendor"):
        raise harness.InputError(f"{args.config}: no 'vendor'")
    bs, max_len = int(hp["train_batch_size"]), int(hp["max_seq_length"])
    log_every, world = int(hp["log_every_steps"]), env.world_size
    say = print if env.is_global_zero else (lambda *a, **k: None)

    device = harness.open_device(str(config["vendor"]), precision, env.local_rank)
    harness.init_distributed(env, device)
    events.emit("start", world_size=world, case=CASE, precision=precision)
    say(f"{CASE}: world_size {world}, device {device.name}, precision {precision}", flush=True)
    torch.manual_seed(int(hp["seed"]))

    # model and tokenizer from the staged checkpoint (transformers imported late: it is slow)
    import transformers
    from transformers import AutoTokenizer, DistilBertForSequenceClassification

    transformers.utils.logging.disable_progress_bar()

    ckpt = Path(args.data_dir) / "checkpoint"
    tokenizer = AutoTokenizer.from_pretrained(ckpt)
    model = DistilBertForSequenceClassification.from_pretrained(ckpt, num_labels=2)
    model.to(device.torch_device)
    flops = model_flops(model, max_len)
    raw_model = model  # evaluation runs on the bare model: ranks may see different batch counts
    if world > 1:
        model = DistributedDataParallel(model, device_ids=device.ddp_device_ids)

    # data: train shuffled and split over ranks; dev split without padding for an exact acc
    sst = Path(args.data_dir) / "SST-2"
    train = tokenize(tokenizer, read_sst2(sst / "train.tsv"), max_len)
    dev_all = tokenize(tokenizer, read_sst2(sst / "dev.tsv"), max_len)
    dev = dev_all[env.rank :: world]
    coll = partial(collate, max_len=max_len, pad_id=tokenizer.pad_token_id)
    sampler = DistributedSampler(
        train, num_replicas=world, rank=env.rank, shuffle=True, seed=int(hp["seed"]), drop_last=True
    )
    workers = int(hp["num_workers"])
    train_loader = DataLoader(
        train,
        batch_size=bs,
        sampler=sampler,
        collate_fn=coll,
        num_workers=workers,
        pin_memory=device.pin_memory,
        drop_last=True,
    )
    dev_loader = DataLoader(
        dev,
        batch_size=int(hp["eval_batch_size"]),
        collate_fn=coll,
        num_workers=workers,
        pin_memory=device.pin_memory,
    )
    if len(train_loader) == 0:
        raise harness.InputError(f"{sst / 'train.tsv'}: fewer rows than one global batch")

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(hp["learning_rate"]), weight_decay=float(hp["weight_decay"])
    )
    perf = harness.PerfTracker(int(hp["warmup_steps"]), device.synchronize, harness.barrier)
    memory = harness.MemoryMonitor(device)
    sysmon = harness.SysSampler(device, min_interval_s=SYS_EVERY_S)
    max_samples, eval_every = int(hp["max_samples"]), int(hp["eval_every_samples"])
    target = float(hp["target_acc"])
    say(f"model: {flops.formula}; train {len(train)} rows, dev {len(dev_all)} rows", flush=True)

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
        lr = optimizer.param_groups[0]["lr"]
        throughput = win_samples / (now - win_t0)
        events.emit(
            "step",
            step=step,
            samples=samples,
            tokens=int(tokens),
            loss=last_loss,
            lr=lr,
            throughput=throughput,
            mem_used_gib=used,
            mem_total_gib=total,
        )
        say(
            f"step {step} samples {samples} loss {last_loss:.4f} {throughput:.1f} samples/s",
            flush=True,
        )
        if sysmon.due():
            events.emit("sys", **sysmon.sample())
        win_loss, win_steps, win_samples, win_t0 = 0.0, 0, 0, perf.clock()

    model.train()
    perf.train_begin()
    while not done:
        sampler.set_epoch(epoch)
        for batch in train_loader:  # loading and host-to-device copies: outside p_core
            input_ids = batch["input_ids"].to(device.torch_device, non_blocking=True)
            attention_mask = batch["attention_mask"].to(device.torch_device, non_blocking=True)
            labels = batch["labels"].to(device.torch_device, non_blocking=True)

            perf.step_begin()
            with device.autocast():
                loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
            if device.scaler is not None:
                device.scaler.scale(loss).backward()
                device.scaler.step(optimizer)
                device.scaler.update()
            else:
                loss.backward()
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            perf.step_end(len(labels), batch["real_tokens"], input_ids.numel())

            step += 1
            samples += len(labels) * world  # drop_last: every rank runs full batches
            local_tokens += batch["real_tokens"]
            win_loss += loss.item()
            win_steps += 1
            win_samples += len(labels) * world
            if step % log_every == 0:
                log_step()
            if samples >= next_eval or samples >= max_samples:
                with perf.evaluating():
                    acc = evaluate(raw_model, dev_loader, device)
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

    totals = harness.reduce_totals(perf.totals())  # collectives: every rank takes part
    mem = harness.reduce_memory(*memory.peak_gib())
    harness.shutdown_distributed()
    if not env.is_global_zero:
        return 0
    message = None if converged else f"target acc {target} not reached in {max_samples} samples"
    result = harness.build_result(
        totals=totals,
        world_size=world,
        device=device,
        chip=config.get("chip"),
        flops=flops,
        memory=mem,
        metrics={"acc": acc, "loss": last_loss},
        converged=converged,
        message=message,
        peak_cache=harness.peak_cache_path(Path(args.data_dir).parent),
    )
    events.emit("result", **result)
    shown = ", ".join(f"{k}={v:.4g}" for k, v in result["metrics"].items() if v is not None)
    say(f"result {result['status']}: {shown}", flush=True)
    return 0


def model_flops(model: Any, seq_len: int) -> harness.ModelFlops:
    """Training FLOPs: 6N+12LHQT per padded token for the encoder; the head (pre_classifier,
    classifier) runs on the first token only: 6 x its parameters per sequence."""
    c = model.config
    head = harness.params_of(model.pre_classifier, model.classifier)
    n_body = harness.non_embedding_params(model) - head
    per_token = harness.training_flops_per_token(
        n_body, c.n_layers, c.n_heads, c.dim // c.n_heads, seq_len
    )
    formula = f"6N+12LHQT, N={n_body} without embeddings and head, T={seq_len}; 6x{head} head"
    return harness.ModelFlops(per_token, 6 * head, formula)


if __name__ == "__main__":
    sys.exit(harness.run_workload("distilbert-pytorch workload", main))
