"""distilbert-pytorch: DistilBERT fine-tuned for SST-2 sentence classification (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/distilbert-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun for several processes), as docs/workload-contract.md says; the harness's
``Run`` (docs/harness.md) does the rest. As FlagPerf's trainer at f3c253a0: one evaluation
before training (outside the training clock), the lr decayed linearly to 0 over hp
max_epoch epochs (transformers' "linear" schedule, stepped every micro-batch), an
evaluation at each epoch's end, the run ending at the first that reaches hp target_acc or
after max_epoch epochs; optional gradient accumulation (FlagPerf's trainer_adapter).
Sequences are padded to max_seq_length, as in FlagPerf: throughputs count real samples,
tokens_per_s_per_device real (non-pad) tokens, MFU the padded tokens the device computed on.
"""

from __future__ import annotations

import csv
import sys
from functools import partial
from pathlib import Path
from typing import Any

import harness
import torch


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


# --------------------------------------------------------------------------------- model
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


def right(model: Any, device: harness.Device, batch: dict[str, Any]) -> tuple[int, int]:
    """(right, counted) for one dev batch: the argmax class against the label."""
    logits = model(
        input_ids=batch["input_ids"].to(device.torch_device),
        attention_mask=batch["attention_mask"].to(device.torch_device),
    ).logits
    return int((logits.argmax(-1).cpu() == batch["labels"]).sum()), len(batch["labels"])


# ------------------------------------------------------------------------------ the run
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight")  # FlagPerf's names


def param_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    """FlagPerf's optimizers/__init__.py: weight decay on all but biases and norm weights."""
    named = list(model.named_parameters())
    return [
        {
            "params": [p for n, p in named if not any(k in n for k in NO_DECAY)],
            "weight_decay": weight_decay,
        },
        {"params": [p for n, p in named if any(k in n for k in NO_DECAY)], "weight_decay": 0.0},
    ]


def backward(run: harness.Run, loss: Any, optimizer: Any, micro: int, accumulate: int) -> bool:
    """FlagPerf's trainer_adapter.backward: the loss over ``accumulate``, the optimizer step
    at every ``accumulate``-th micro-batch (``micro`` counts from 1 over the whole run).
    True where it stepped."""
    loss = loss / accumulate
    if micro % accumulate == 0:
        run.optimize(loss, optimizer)
        return True
    scaler = run.device.scaler
    (scaler.scale(loss) if scaler is not None else loss).backward()
    return False


def linear_schedule(optimizer: Any, steps_per_epoch: int, epochs: int) -> Any:
    """FlagPerf's schedulers/__init__.py: transformers' "linear" schedule, no warm-up, to 0
    at len(train_dataloader) x max_epoch micro-batches."""
    from transformers import get_scheduler

    total = steps_per_epoch * epochs
    return get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=total)


def finish(run: harness.Run, flops: harness.ModelFlops, optimizer_steps: int) -> None:
    """The result: converged at the target; out of hp max_samples, failed (the harness's
    verdict); out of max_epoch epochs short of the target, failed unless hp require_target
    is false (then passed, not converged, and a note says so)."""
    hp = run.hp
    accumulate = hp.gradient_accumulation_steps
    notes = [f"{optimizer_steps} optimizer steps (gradient accumulation {accumulate})"]
    if run.converged or run.budget_spent or run.smoke:  # the harness's verdict
        run.finish(flops, notes=notes)
        return
    why = f"target acc {hp.target_acc} not reached by the end of epoch {hp.max_epoch}"
    if hp.require_target:
        run.finish(flops, notes=notes, converged=False, message=why)
    else:
        notes.append(f"{why}: passed, as FlagPerf published its row (require_target false)")
        run.finish(flops, notes=notes, converged=False, passed=True)


def main(run: harness.Run) -> None:
    hp, device = run.hp, run.device
    import transformers  # late: slow to import
    from transformers import AutoTokenizer, DistilBertForSequenceClassification

    transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(run.data / "checkpoint")
    model = DistilBertForSequenceClassification.from_pretrained(
        run.data / "checkpoint", num_labels=2
    ).to(device.torch_device)
    flops = model_flops(model, hp.max_seq_length)
    ddp = run.data_parallel(model)  # evaluation runs on the bare model

    sst = run.data / "SST-2"
    train = tokenize(tokenizer, read_sst2(sst / "train.tsv"), hp.max_seq_length)
    dev = tokenize(tokenizer, read_sst2(sst / "dev.tsv"), hp.max_seq_length)
    coll = partial(collate, max_len=hp.max_seq_length, pad_id=tokenizer.pad_token_id)
    train_loader = run.train_loader(train, hp.train_batch_size, coll, source=sst / "train.tsv")
    dev_loader = run.eval_loader(dev, hp.eval_batch_size, coll)
    optimizer = torch.optim.AdamW(param_groups(ddp, hp.weight_decay), lr=hp.learning_rate)
    scheduler = linear_schedule(optimizer, len(train_loader), hp.max_epoch)
    run.say(f"model: {flops.formula}; train {len(train)} rows, dev {len(dev)} rows")

    score = partial(right, model, device)
    acc = partial(run.accuracy, model, dev_loader, score)
    # FlagPerf's INIT_EVALUATION: inside e2e_time, before the training clock starts
    run.say(f"initial evaluation: acc {acc():.4f}")
    evaluate = lambda: {"acc": acc()}  # noqa: E731
    ddp.train()
    optimizer_steps = 0
    batches = run.train(
        train_loader,
        evaluate=evaluate,  # where hp max_samples or eval_every_samples ask for one
        lr=lambda: scheduler.get_last_lr()[0],
        epochs=hp.max_epoch,
        epoch_end=lambda: run.evaluate(evaluate),
    )
    for micro, batch in enumerate(batches, 1):
        inputs = {
            k: batch[k].to(device.torch_device, non_blocking=True)
            for k in ("input_ids", "attention_mask", "labels")
        }  # loading and host-to-device copies: outside p_core
        n = len(batch["labels"])
        with run.step(n, batch["real_tokens"], inputs["input_ids"].numel()) as step:
            with device.autocast():
                step.loss = ddp(**inputs).loss
            stepped = backward(run, step.loss, optimizer, micro, hp.gradient_accumulation_steps)
            scheduler.step()
        optimizer_steps += stepped
    finish(run, flops, optimizer_steps)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
