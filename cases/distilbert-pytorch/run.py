"""distilbert-pytorch: DistilBERT fine-tuned for SST-2 sentence classification (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/distilbert-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun for several processes), as docs/workload-contract.md says; the harness's
``Run`` (docs/harness.md) does the rest. Trains until dev accuracy reaches hp target_acc
(checked every eval_every_samples training samples over all ranks) or until max_samples.
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
    optimizer = torch.optim.AdamW(
        ddp.parameters(), lr=hp.learning_rate, weight_decay=hp.weight_decay
    )
    run.say(f"model: {flops.formula}; train {len(train)} rows, dev {len(dev)} rows")

    ddp.train()
    score = partial(right, model, device)
    evaluate = lambda: {"acc": run.accuracy(model, dev_loader, score)}  # noqa: E731
    for batch in run.train(train_loader, evaluate=evaluate):
        inputs = {
            k: batch[k].to(device.torch_device, non_blocking=True)
            for k in ("input_ids", "attention_mask", "labels")
        }  # loading and host-to-device copies: outside p_core
        n = len(batch["labels"])
        with run.step(n, batch["real_tokens"], inputs["input_ids"].numel()) as step:
            with device.autocast():
                step.loss = ddp(**inputs).loss
            run.optimize(step.loss, optimizer)
    run.finish(flops)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
