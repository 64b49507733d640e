"""distilbert-pytorch: DistilBERT fine-tuned for SST-2 sentence classification (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/distilbert-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun for several processes), as docs/workload-contract.md says; the harness's
``Run`` (docs/harness.md) does the rest. As FlagPerf's trainer at f3c253a0
(flagperf_trainer.py): one evaluation before training (outside the training clock), the lr
decayed linearly to 0 over hp max_epoch epochs, an evaluation at each epoch's end, the run
ending at the first that reaches hp target_acc or after max_epoch epochs; optional gradient
accumulation. The rows are FlagPerf's pre-tokenised arrays (sst2.py), padded to
max_seq_length: throughputs count real samples, tokens_per_s_per_device real (non-pad)
tokens, MFU the padded tokens the device computed on. hp epoch_order: FlagPerf's samplers
(harness.order). The imports come before main(), as FlagPerf's before its clock starts.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import flagperf_trainer as fp
import harness
import sst2
import transformers
from harness.order import ORDERS, epoch_sampler
from transformers import DistilBertForSequenceClassification


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
    transformers.utils.logging.disable_progress_bar()
    model = DistilBertForSequenceClassification.from_pretrained(
        run.data / "checkpoint", num_labels=2
    ).to(device.torch_device)
    flops = model_flops(model, hp.max_seq_length)
    ddp = run.data_parallel(model)  # evaluation runs on the bare model

    # ------------------------------------------------------------------------------ data
    train = sst2.load(run.data / sst2.TRAIN, hp.max_seq_length)
    dev = sst2.load(run.data / sst2.DEV, hp.max_seq_length)
    sampler = epoch_sampler(train, hp.epoch_order, run.layout.dp, run.layout.dp_rank, hp.seed)
    train_loader = run.train_loader(
        train, hp.train_batch_size, sst2.collate, source=run.data / sst2.TRAIN, sampler=sampler
    )
    dev_loader = run.eval_loader(dev, hp.eval_batch_size, sst2.collate)
    optimizer = fp.optimizer(ddp, hp.learning_rate, hp.weight_decay)
    scheduler = fp.linear_schedule(optimizer, len(train_loader), hp.max_epoch)
    run.say(f"model: {flops.formula}; train {len(train)} rows, dev {len(dev)} rows")

    # ------------------------------------------------------------------------ evaluation
    score = partial(right, model, device)
    acc = partial(run.accuracy, model, dev_loader, score)
    # FlagPerf's INIT_EVALUATION: inside e2e_time, before the training clock starts
    run.say(f"initial evaluation: acc {acc():.4f}")
    evaluate = lambda: {"acc": acc()}  # noqa: E731

    # -------------------------------------------------------------------------- training
    ddp.train()
    optimizer_steps, accumulate = 0, hp.gradient_accumulation_steps
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
            optimizer_steps += fp.backward(run, step.loss, optimizer, micro, accumulate)
            scheduler.step()
    fp.finish(
        run,
        flops,
        notes=[
            f"{optimizer_steps} optimizer steps (gradient accumulation {accumulate})",
            f"epoch_order={hp.epoch_order}: {ORDERS[hp.epoch_order]}",
            "e2e_time_main as FlagPerf's e2e_time: from main(), after the imports, on "
            "pre-tokenised rows (dataset/*.npz)",
        ],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
