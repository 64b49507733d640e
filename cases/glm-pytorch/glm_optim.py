"""GLM's optimizer set-up as FlagPerf's glm case ran it (seed 000): AdamW with its two
parameter groups, its learning-rate schedule and its dynamic loss scaler.

Weight decay (``optimizers/__init__.py`` ``glm_get_params_for_weight_decay_optimization``):
none on biases and on the parameters of ``torch.nn.LayerNorm`` modules. On iluvatar (and
nvidia) the vendor's ``extern/converter.py`` rebuilds the transformer with apex's
``FusedLayerNorm``, a plain ``nn.Module``, before the optimizer is made, so FlagPerf's runs
decayed the LayerNorm weights (their biases escaped by name). hp ``layernorm_decay``:
``flagperf`` reproduces that defect (the seed rows); ``fleetperf`` is fleetperf's own
correction, no decay on any LayerNorm parameter.

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
``Device.cast_weights`` and ``Device.optimizer``, with ``LossScaler`` in place of the device's
GradScaler. Every overflowing step is skipped, and the schedule not stepped after it
(trainer_adapter.backward: ``if not (args.fp16 and optimizer.overflow)``); the scale follows
``DynamicLossScaler.update_scale`` with _base.py's arguments (see ``DynamicLossScale``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

LAYERNORM_DECAY = {
    "flagperf": "LayerNorm weights decayed, as FlagPerf's runs (its exemption missed apex's "
    "FusedLayerNorm)",
    "fleetperf": "fleetperf's own: no weight decay on LayerNorm weights (FlagPerf decayed them)",
}


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


def param_groups(
    model: torch.nn.Module, weight_decay: float, layernorm_decay: str = "flagperf"
) -> list[dict[str, Any]]:
    """GLM's two groups: no weight decay on biases, nor on LayerNorm weights under
    ``layernorm_decay`` ``fleetperf`` (``LAYERNORM_DECAY``); decay on every other weight."""
    if layernorm_decay not in LAYERNORM_DECAY:
        raise ValueError(
            f"layernorm_decay {layernorm_decay!r}: expected one of {sorted(LAYERNORM_DECAY)}"
        )
    exempt = torch.nn.LayerNorm if layernorm_decay == "fleetperf" else ()
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (no_decay if isinstance(module, exempt) or name == "bias" else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


@dataclass
class DynamicLossScale:
    """FlagPerf's ``DynamicLossScaler.update_scale`` (optimizers/loss_scaler.py) with
    _base.py's ``loss_scale_window`` 1000, ``min_scale`` 1, ``hysteresis`` 2 (its
    ``delayed_shift``) and the default ``consecutive_hysteresis=False``: an overflow spends
    one unit of hysteresis while any is left above 1, else halves the scale; the hysteresis
    comes back only when the scale grows, after ``window`` steps without an overflow. So
    the first overflow of a run (or after a growth) keeps the scale and every later one
    halves it, however many clean steps lie between. Every overflowing step is skipped."""

    scale: float = 2.0**32
    window: int = 1000
    min_scale: float = 1.0
    delayed_shift: int = 2
    hysteresis: int = 2
    iteration: int = 0
    last_overflow: int = -1

    def update(self, overflow: bool) -> float:
        if overflow:
            if self.delayed_shift == 1 or self.hysteresis == 1:
                self.scale = max(self.scale / 2, self.min_scale)
            else:
                self.hysteresis -= 1
            self.last_overflow = self.iteration
        elif (self.iteration - self.last_overflow) % self.window == 0:
            self.hysteresis = self.delayed_shift
            self.scale *= 2
        self.iteration += 1
        return self.scale


class LossScaler(torch.amp.GradScaler):
    """torch's GradScaler (it unscales, finds inf/NaN, skips the step) whose scale follows
    ``DynamicLossScale``; ``overflow`` tells whether the last step was skipped."""

    def __init__(self, device_type: str) -> None:
        self.rule = DynamicLossScale()
        super().__init__(device_type, init_scale=self.rule.scale)
        self.overflow = False

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        if new_scale is None:
            found = [
                f
                for state in self._per_optimizer_states.values()
                for f in state["found_inf_per_device"].values()
            ]
            self.overflow = any(bool(f.item()) for f in found)
            new_scale = self.rule.update(self.overflow)
        super().update(new_scale)


def glm_optimizer(
    device: Any, model: torch.nn.Module, hp: Any
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over GLM's groups (float32 masters for a float16 model) and its schedule; for
    fp16 the device's scaler becomes FlagPerf's (``LossScaler``)."""
    adamw = partial(torch.optim.AdamW, lr=hp.learning_rate)
    groups = param_groups(model, hp.weight_decay, hp.layernorm_decay)
    optimizer = device.optimizer(adamw, groups)
    if device.scaler is not None:
        device.scaler = LossScaler(device.type)
    return optimizer, annealing_lr(optimizer, hp)


def optimize(
    run: Any, loss: torch.Tensor, optimizer: Any, scheduler: Any, clip_grad: float
) -> bool:
    """``run.optimize``, then the schedule's step unless the loss scaler skipped this
    optimizer step for an overflow; False for a skipped step."""
    run.optimize(loss, optimizer, clip_grad=clip_grad)
    scaler = run.device.scaler
    stepped = scaler is None or not scaler.overflow
    if stepped:
        scheduler.step()
    return stepped
