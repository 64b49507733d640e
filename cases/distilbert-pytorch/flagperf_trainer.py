"""FlagPerf's distilbert trainer at f3c253a0, the parts run.py keeps as it had them:
the optimizer's groups, gradient accumulation, the lr schedule and the run's outcome."""

from __future__ import annotations

from typing import Any

import harness
import torch

NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight")  # FlagPerf's names


def optimizer(model: Any, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """optimizers/__init__.py: AdamW, weight decay on all but biases and norm weights."""
    named = list(model.named_parameters())
    decay = [p for n, p in named if not any(k in n for k in NO_DECAY)]
    rest = [p for n, p in named if any(k in n for k in NO_DECAY)]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


def linear_schedule(optimizer: Any, steps_per_epoch: int, epochs: int) -> Any:
    """schedulers/__init__.py: transformers' "linear" schedule, no warm-up, to 0 at
    len(train_dataloader) x max_epoch micro-batches."""
    from transformers import get_scheduler

    total = steps_per_epoch * epochs
    return get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=total)


def backward(run: harness.Run, loss: Any, optimizer: Any, micro: int, accumulate: int) -> bool:
    """trainer_adapter.backward: the loss over ``accumulate``, the optimizer step at every
    ``accumulate``-th micro-batch (``micro`` counts from 1 over the whole run). True where
    it stepped."""
    loss = loss / accumulate
    if micro % accumulate == 0:
        run.optimize(loss, optimizer)
        return True
    scaler = run.device.scaler
    (scaler.scale(loss) if scaler is not None else loss).backward()
    return False


def finish(run: harness.Run, flops: harness.ModelFlops, notes: list[str]) -> None:
    """The result: converged at the target; out of hp max_samples, failed (the harness's
    verdict); out of max_epoch epochs short of the target, failed unless hp require_target
    is false (then passed, not converged, and a note says so)."""
    hp = run.hp
    if run.converged or run.budget_spent or run.smoke:  # the harness's verdict
        run.finish(flops, notes=notes)
        return
    why = f"target acc {hp.target_acc} not reached by the end of epoch {hp.max_epoch}"
    if hp.require_target:
        run.finish(flops, notes=notes, converged=False, message=why)
    else:
        notes.append(f"{why}: passed, as FlagPerf published its row (require_target false)")
        run.finish(flops, notes=notes, converged=False, passed=True)
