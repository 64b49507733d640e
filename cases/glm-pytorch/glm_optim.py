"""GLM's optimizer set-up as FlagPerf's glm case has it (seed 000): AdamW without weight decay
on biases and LayerNorm parameters, and its learning-rate schedule.

FlagPerf's schedule (training/benchmarks/glm/pytorch/schedulers: ``create_scheduler`` and
``AnnealingLR``, decay style linear, one optimizer step per iteration): with
W = lr_warmup x lr_decay_iters warm-up steps and E = lr_decay_iters - W, the learning rate
after n optimizer steps is

    lr x n / W                                        n <= W (the first step runs at 0)
    lr x (1 - (1 - lr_decay_ratio) x min(1, (n - W) / E))   after

so it rises linearly to lr, falls linearly to lr x lr_decay_ratio at lr_decay_iters, and stays
there. The decay length is a step count of its own, not the sample budget (FlagPerf e5edef37:
4338 steps in every config). lr_warmup 0 and lr_decay_ratio 1 give a constant rate.

fp16 (FlagPerf's _base.py ``fp16 = True``): the model's weights are float16 (its trainer
adapters' ``model.half()``) and its FP16_Optimizer steps float32 master copies under dynamic
loss scaling (optimizers/fp16_optimizer.py, loss_scaler.py): the harness's
``Device.cast_weights`` and ``Device.optimizer``, with the scaler set to FlagPerf's start
(2^32) and growth window (1000 steps); a step skipped for an overflow does not step the
schedule either (trainer_adapter.backward: ``if not (args.fp16 and optimizer.overflow)``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

LOSS_SCALE, LOSS_SCALE_WINDOW = 2.0**32, 1000  # FlagPerf's DynamicLossScaler, _base.py


def lr_factor(step: int, warmup: float, decay_iters: int, decay_ratio: float) -> float:
    """The multiple of the base learning rate after ``step`` optimizer steps (see above)."""
    warmup_steps = warmup * decay_iters
    if warmup_steps > 0 and step <= warmup_steps:
        return step / warmup_steps
    decay_steps = decay_iters - warmup_steps
    done = min(1.0, (step - warmup_steps) / decay_steps) if decay_steps > 0 else 1.0
    return 1.0 - (1.0 - decay_ratio) * done


def annealing_lr(optimizer: torch.optim.Optimizer, hp: Any) -> torch.optim.lr_scheduler.LambdaLR:
    """FlagPerf's schedule over hp lr_warmup, lr_decay_iters, lr_decay_ratio; step it once
    after each optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda n: lr_factor(n, hp.lr_warmup, hp.lr_decay_iters, hp.lr_decay_ratio)
    )


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """GLM's two groups: weight decay on every weight but LayerNorm's; none on biases."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            layer_norm = isinstance(module, torch.nn.LayerNorm)
            (no_decay if layer_norm or name == "bias" else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def glm_optimizer(
    device: Any, model: torch.nn.Module, hp: Any
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over GLM's groups (float32 masters for a float16 model) and its schedule; for
    fp16 the device's loss scaler gets FlagPerf's constants."""
    adamw = partial(torch.optim.AdamW, lr=hp.learning_rate)
    optimizer = device.optimizer(adamw, param_groups(model, hp.weight_decay))
    if device.scaler is not None:
        device.scaler = torch.amp.GradScaler(
            device.type, init_scale=LOSS_SCALE, growth_interval=LOSS_SCALE_WINDOW
        )
    return optimizer, annealing_lr(optimizer, hp)


def optimize(
    run: Any, loss: torch.Tensor, optimizer: Any, scheduler: Any, clip_grad: float
) -> bool:
    """``run.optimize``, then the schedule's step unless the loss scaler skipped this
    optimizer step for an overflow (its scale went down); False for a skipped step."""
    scaler = run.device.scaler
    scale = scaler.get_scale() if scaler is not None else 0.0
    run.optimize(loss, optimizer, clip_grad=clip_grad)
    stepped = scaler is None or scaler.get_scale() >= scale
    if stepped:
        scheduler.step()
    return stepped
