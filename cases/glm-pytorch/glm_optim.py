"""GLM's optimizer set-up as FlagPerf's glm case has it (seed 000): AdamW without weight decay
on biases and LayerNorm parameters, and its learning-rate schedule.

FlagPerf's schedule (training/benchmarks/glm/pytorch/schedulers: ``create_scheduler`` and
``AnnealingLR``, decay style linear, one optimizer step per iteration): with
W = lr_warmup x lr_decay_iters warm-up steps and E = lr_decay_iters - W, the learning rate
after n optimizer steps is

    lr x n / W                                        n <= W (the first step runs at 0)
    lr x (1 - (1 - lr_decay_ratio) x min(1, (n - W) / E))   after

so it rises linearly to lr, falls linearly to lr x lr_decay_ratio at lr_decay_iters, and stays
there. The decay length is a step count of its own, not the sample budget (FlagPerf: 4338 steps
for 1x1 and 1x8, 2169 for 2x8). lr_warmup 0 and lr_decay_ratio 1 give a constant rate.
"""

from __future__ import annotations

from typing import Any

import torch


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
