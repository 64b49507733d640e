"""The case SDK: ``Run``, what a case's ``run.py`` is handed, and ``run_case``, its entry point.

A case builds its model, its data and its step; the run owns everything that turns that into
numbers (docs/harness.md): config.json and hp (checked once against case.yaml), the device
and precision (autocast, gradient scaler), the process group, seeds, the instruments (timers,
memory, sys samples), step logging, evaluation cadence and convergence, sample and token
accounting under data, tensor and pipeline parallelism (``harness.layout``), and the result::

    def main(run: harness.Run) -> None:
        model = ...                                   # the case's own
        loader = run.train_loader(rows, run.hp.train_batch_size, collate)
        for batch in run.train(loader, evaluate=lambda: {"acc": score(model)}):
            with run.step(samples=n, tokens=real, padded_tokens=padded) as step:
                with run.device.autocast():
                    step.loss = model(**batch).loss
                run.optimize(step.loss, optimizer)
        run.finish(flops)

    if __name__ == "__main__":
        sys.exit(harness.run_case(__file__, main))
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from harness.case import CaseFile, Hyper, load_case_file
from harness.device import grads_to_masters, open_device
from harness.dist import (
    DistEnv,
    all_reduce,
    barrier,
    init_distributed,
    reduce_memory,
    reduce_totals,
    sum_counted,
)
from harness.energy import open_meter
from harness.errors import InputError
from harness.events import EventWriter
from harness.layout import Layout
from harness.memory import MemoryMonitor
from harness.peak_cache import cache_path
from harness.perf import PerfTotals, PerfTracker, token_rates
from harness.procwindow import run_root
from harness.result import ModelFlops, build_result
from harness.sysmon import SysMonitor, SysSampler
from harness.workload import guarded, load_config, require_paths

if TYPE_CHECKING:
    import torch

    from harness.device import Device

SYS_EVERY_S = 5.0  # a sys record this often, from a thread, for the whole run
Evaluation = Callable[[], Mapping[str, float]]
Score = Callable[[Any], tuple[int, int]]  # a batch -> (right, counted)


@dataclass
class Step:
    """What the case tells the run about one step: its loss (a tensor or a float; None for
    a forward-only step). The run reads it once the step's clock has stopped."""

    loss: Any = None


class Run:
    """One process's view of a run. Built by ``run_case``; see the module docstring."""

    def __init__(
        self, case: CaseFile, args: argparse.Namespace, env: DistEnv, events: EventWriter
    ) -> None:
        self.case = case
        self.env = env
        self.events = events
        self.data = Path(args.data_dir)
        self.run_dir = Path(args.run_dir)
        self.config_path = Path(args.config)  # for messages that name the file
        self.config = load_config(self.config_path)
        self.hp: Hyper = case.check_hp(self.config["hp"], self.config_path)
        for field in ("vendor", "precision"):
            if not isinstance(self.config.get(field), str) or not self.config[field]:
                raise InputError(f"{self.config_path}: no {field!r}")
        self.precision: str = self.config["precision"]
        # --smoke (config.json "smoke"): a short run of the whole pipeline with no target;
        # it passes on a finite loss (docs/record.md).
        self.smoke = self.config.get("smoke", False)
        if not isinstance(self.smoke, bool):
            raise InputError(f"{self.config_path}: 'smoke': expected true or false")
        require_paths(self.data, case.requires)
        self.device: Device = open_device(self.config["vendor"], self.precision, env.local_rank)
        init_distributed(env, self.device)
        self.layout = Layout(env.rank, env.world_size)
        events.emit("start", world_size=env.world_size, case=case.name, precision=self.precision)
        self.say(
            f"{case.name}: world size {env.world_size}, device {self.device.name}, "
            f"precision {self.precision}"
        )
        seed = self.hp.get("seed")
        if seed is not None:
            import torch

            random.seed(seed)
            torch.manual_seed(seed)

        self.perf = self.tracker()
        self.energy = open_meter(self.device, env.local_rank)  # over run.perf's window
        self.memory = MemoryMonitor(self.device)
        self.sysmon = (  # local rank 0 writes the node's sys records (every device's)
            SysMonitor(
                SysSampler(self.device, env.local_world_size, root=run_root(args.run_dir)),
                events,
                SYS_EVERY_S,
            )
            if events.allowed("sys")
            else None
        )
        self.steps = 0
        self.samples = 0  # over all data-parallel replicas, as every rank counts them
        self.tokens = 0  # the same, real tokens
        self.loss: float | None = None  # the last logged window's mean loss
        self.evals: dict[str, float] = {}  # the latest evaluation's values
        self.converged = False
        self._local_tokens = 0  # this rank's, for the step records' exact count
        self._window: list[float] = [0.0, 0.0, 0.0]  # loss sum, loss count, samples
        self._window_t0 = 0.0
        self._training = False
        self._optimizer: Any = None
        self._lr: Callable[[], float] | None = None
        every = self.hp.get("eval_every_samples")
        self._next_eval = int(every) if every else None

    # -- set-up -------------------------------------------------------------------------------
    def say(self, *parts: Any) -> None:
        """Print on global rank 0 (the run's stdout log), flushed."""
        if self.env.is_global_zero:
            print(*parts, flush=True)

    def parallel(self, tp: int = 1, pp: int = 1) -> Layout:
        """Declare tensor- and pipeline-parallel degrees (before ``train_loader``); the rest
        of the world is data parallel. A world that does not split is bad input."""
        try:
            self.layout = Layout(self.env.rank, self.env.world_size, tp, pp)
        except ValueError as e:
            raise InputError(str(e)) from None
        return self.layout

    def data_parallel(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` wrapped in DistributedDataParallel when there is more than one replica."""
        if self.layout.dp == 1:
            return model
        if self.layout.world != self.layout.dp:
            raise NotImplementedError("DDP over a data-parallel subgroup: build its group")
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=self.device.ddp_device_ids)

    def train_loader(
        self,
        rows: Sequence[Any],
        batch_size: int,
        collate_fn: Callable | None = None,
        *,
        source: str | Path = "the training data",
        sampler: Any = None,
        drop_last: bool = True,
    ) -> Any:
        """Shuffled (seed hp ``seed``), split over the data-parallel replicas, whole batches
        only; InputError naming ``source`` if that leaves no batch. ``sampler`` replaces
        that shuffle (e.g. ``harness.order.epoch_sampler``); ``drop_last=False`` keeps each
        epoch's last, partial batch (pass a sampler that keeps every row too)."""
        from torch.utils.data import DataLoader, DistributedSampler

        if sampler is None:
            sampler = DistributedSampler(
                rows,
                num_replicas=self.layout.dp,
                rank=self.layout.dp_rank,
                shuffle=True,
                seed=int(self.hp.get("seed", 0)),
                drop_last=True,
            )
        loading = self._loading(collate_fn)
        loader = DataLoader(
            rows, batch_size=batch_size, sampler=sampler, drop_last=drop_last, **loading
        )
        if len(loader) == 0:
            raise InputError(
                f"{source}: {len(rows)} rows, fewer than one global batch "
                f"({batch_size} x {self.layout.dp} replicas)"
            )
        return loader

    def eval_loader(
        self, rows: Sequence[Any], batch_size: int, collate_fn: Callable | None = None
    ) -> Any:
        """This replica's share of ``rows`` (every dp-th, no padding: each row scored once
        over the replicas), in order. Sum the counts with ``sum_replicas``."""
        from torch.utils.data import DataLoader

        share = list(rows)[self.layout.dp_rank :: self.layout.dp]
        return DataLoader(share, batch_size=batch_size, **self._loading(collate_fn))

    def _loading(self, collate_fn: Callable | None) -> dict[str, Any]:
        return {
            "collate_fn": collate_fn,
            "num_workers": int(self.hp.get("num_workers", 0)),
            "pin_memory": self.device.pin_memory,
        }

    def sum_replicas(self, values: Sequence[float]) -> list[float]:
        """``values`` summed over the data-parallel replicas (each tensor/pipeline group
        once): an evaluation's counts. Every rank must call it."""
        return sum_counted(values, self.layout.counts)

    def accuracy(self, model: torch.nn.Module, batches: Iterable[Any], score: Score) -> float:
        """The fraction right over an evaluation set split by ``eval_loader``: ``score(batch)``
        gives (right, counted) for one batch. Runs with ``model`` in eval mode, no gradients,
        under the device's autocast, and puts the model back in training mode; the counts are
        summed over the replicas (every rank calls it)."""
        import torch

        model.eval()
        right = counted = 0
        with torch.no_grad(), self.device.autocast():
            for batch in batches:
                r, n = score(batch)
                right, counted = right + r, counted + n
        model.train()
        right, counted = self.sum_replicas([right, counted])
        if not counted:
            raise InputError(f"{self.case.name}: the evaluation set has no rows")
        return right / counted

    def tracker(self) -> PerfTracker:
        """A new set of timers (warm-up hp ``warmup_steps``), as ``run.perf`` is: for a second
        timed pass (an inference case's validation); ``totals`` reduces it."""
        warmup = int(self.hp.get("warmup_steps", 0))
        return PerfTracker(warmup, self.device.synchronize, barrier)

    # -- the training loop ---------------------------------------------------------------------
    def train(
        self,
        batches: Iterable[Any],
        *,
        evaluate: Evaluation | None = None,
        lr: Callable[[], float] | None = None,
        epochs: int | None = None,
        epoch_end: Callable[[], None] | None = None,
    ) -> Iterator[Any]:
        """The batches of epoch after epoch (``set_epoch`` on a distributed sampler), until
        the budget (hp ``max_samples`` or ``max_tokens``) is spent, the target is reached, or
        after ``epochs``. ``evaluate`` runs every hp ``eval_every_samples`` and once the
        budget is spent; ``lr`` reads the learning rate for the step records (default: the
        optimizer given to ``optimize``); ``epoch_end`` runs after each epoch."""
        self._lr = lr
        self._begin()
        sampler = getattr(batches, "sampler", None)
        epoch = 0
        while not self.done and (epochs is None or epoch < epochs):
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            empty = True
            for batch in batches:
                empty = False
                yield batch
                if evaluate is not None and self._eval_due():
                    self.evaluate(evaluate)
                if self.done:
                    return
            if empty:
                raise InputError(f"{self.case.name}: the training data gives no batch")
            if epoch_end is not None:
                epoch_end()
            epoch += 1

    @contextmanager
    def step(self, samples: int, tokens: int = 0, padded_tokens: int = 0) -> Iterator[Step]:
        """Time one step's compute (device synchronised, ranks at a barrier before it starts)
        and count it: ``samples`` and ``tokens`` (real, non-pad) and ``padded_tokens`` (what
        the device computed on, for MFU) of this rank's batch. Logs every hp
        ``log_every_steps``."""
        self._begin()
        step = Step()
        self.perf.step_begin()
        yield step
        self.perf.step_end(samples, tokens, padded_tokens)
        self.energy.follow(self.perf)
        self.steps += 1
        self.samples += samples * self.layout.dp
        self.tokens += tokens * self.layout.dp
        self._local_tokens += tokens
        if step.loss is not None:
            loss = step.loss.item() if hasattr(step.loss, "item") else step.loss
            self._window[0] += float(loss)
            self._window[1] += 1
        self._window[2] += samples * self.layout.dp
        every = self.hp.get("log_every_steps")
        if (every and self.steps % int(every) == 0) or self.budget_spent:
            self.log()

    def optimize(self, loss: torch.Tensor, optimizer: Any, clip_grad: float | None = None) -> None:
        """Backward, optional gradient clipping, optimizer step and zero_grad, through the
        device's gradient scaler where the precision has one (fp16, amp)."""
        import torch

        self._optimizer = optimizer
        scaler = self.device.scaler
        (scaler.scale(loss) if scaler is not None else loss).backward()
        grads_to_masters(optimizer)  # a float16 model's gradients (Device.optimizer)
        if clip_grad is not None:
            if scaler is not None:
                scaler.unscale_(optimizer)
            params = [p for g in optimizer.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, clip_grad)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    @property
    def budget_spent(self) -> bool:
        max_samples, max_tokens = self.hp.get("max_samples"), self.hp.get("max_tokens")
        return bool(
            (max_samples and self.samples >= max_samples)
            or (max_tokens and self.tokens >= max_tokens)
        )

    @property
    def done(self) -> bool:
        return self.converged or self.budget_spent

    def _eval_due(self) -> bool:
        return self.budget_spent or (
            self._next_eval is not None and self.samples >= self._next_eval
        )

    def evaluate(self, evaluation: Evaluation) -> dict[str, float]:
        """Run ``evaluation`` (its time left out of p_train and p_core), emit each value, and
        check the case's target (case.yaml ``target``; hp ``target_<metric>`` overrides)."""
        with self.perf.evaluating(), self.energy.paused():
            values = dict(evaluation())
        for name, value in values.items():
            self.events.emit("eval", name=name, value=value, samples=self.samples)
            self.say(f"eval samples {self.samples} {name} {value:.4f}")
        self.evals.update(values)
        if self._next_eval is not None:
            every = int(self.hp["eval_every_samples"])
            while self._next_eval <= self.samples:
                self._next_eval += every
        target = self.target
        if target is not None and self.case.target and self.case.target[0] in values:
            self.converged = values[self.case.target[0]] >= target
        return values

    # -- step records ----------------------------------------------------------------------------
    def _begin(self) -> None:
        if not self._training:
            self._training = True
            self.perf.train_begin()
            self.energy.follow(self.perf)
            self._window_t0 = self.perf.clock()

    def log(self, loss: float | None = None) -> None:
        """A ``step`` record for the window since the last (every rank calls it: it reduces):
        mean loss over the counting ranks (or ``loss`` where the steps had none), tokens,
        throughput, memory."""
        loss_sum, loss_n, tokens = sum_counted(
            [*self._window[:2], self._local_tokens], self.layout.counts
        )
        if loss_n:
            self.loss = loss_sum / loss_n
        elif loss is not None:
            self.loss = loss
        now = self.perf.clock()
        self.memory.sample()
        used, total = self.memory.peak_gib()
        throughput = self._window[2] / (now - self._window_t0) if now > self._window_t0 else 0.0
        lr = (
            self._lr()
            if self._lr
            else (self._optimizer.param_groups[0]["lr"] if self._optimizer else 0.0)
        )
        self.events.emit(
            "step",
            step=self.steps,
            samples=self.samples,
            tokens=int(tokens),
            loss=self.loss,
            lr=lr,
            throughput=throughput,
            mem_used_gib=used,
            mem_total_gib=total,
        )
        shown = f"loss {self.loss:.4f} " if self.loss is not None else ""
        self.say(f"step {self.steps} samples {self.samples} {shown}{throughput:.1f} samples/s")
        self._window = [0.0, 0.0, 0.0]
        self._window_t0 = self.perf.clock()

    # -- the result ------------------------------------------------------------------------------
    def totals(self, tracker: PerfTracker | None = None) -> PerfTotals:
        """``tracker``'s totals (default ``run.perf``) over all ranks, each group's batch
        counted once. A collective: every rank calls it."""
        return reduce_totals((tracker or self.perf).totals(), self.layout.counts)

    def finish(
        self,
        flops: ModelFlops,
        metrics: Mapping[str, float | None] | None = None,
        notes: Iterable[str] = (),
        *,
        converged: bool | None = None,
        message: str | None = None,
        passed: bool | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Close the window, reduce over the ranks, and on global rank 0 emit the ``result``.

        Metrics: the latest evaluation's values and the last window's loss (null where not
        finite); for ``kind: inference``, p_infer_whole and p_infer_core (positions computed,
        padding included, per second of run.perf's window and of its forwards: FlagPerf's
        count), p_infer_real_* (real tokens) and tokens_per_s_per_device; then
        ``metrics`` over them. Converged, unless given: the target reached
        where case.yaml has one, else a finite loss; ``passed``: the status where it is not
        ``converged`` (build_result). ``extra``: fields beyond the contract's.
        """
        if self._training:
            self.perf.train_end()
            self.energy.end()
            if self._window[1] or self._window[2]:
                self.log()
        if self.sysmon:
            self.sysmon.stop()
        totals = self.totals()
        energy = self.energy.total(all_reduce)
        memory = reduce_memory(*self.memory.peak_gib())
        allocator = reduce_memory(self.memory.allocator_gib(), None)[0]
        # The process group stays up until run_case's os._exit. Destroyed here, it would be
        # freed with the last DDP reducer holding it, when main() returns: that joins gloo's
        # threads under the GIL while one waits for the GIL to free a tensor, and the rank
        # hangs after its result (seen under load on 2 cores: tests/unit/test_harness_sdk.py).
        if not self.env.is_global_zero:
            return
        finite = self.loss is not None and math.isfinite(self.loss)
        out: dict[str, float | None] = {**self.evals, "mem_allocator_gib": allocator}
        if self.steps and self.case.kind == "training":
            out["loss"] = self.loss if finite else None
        if self.case.kind == "inference":  # run.perf's window is the inference window
            out["p_infer_whole"], out["p_infer_core"] = token_rates(totals, padded=True)
            out["p_infer_real_whole"], out["p_infer_real_core"] = token_rates(totals)
        out.update(metrics or {})
        if converged is None:
            converged, message = self._verdict(finite)
        result = build_result(
            totals=totals,
            world_size=self.env.world_size,
            device=self.device,
            chip=self.config.get("chip"),
            flops=flops,
            memory=memory,
            metrics=out,
            converged=converged,
            passed=passed,
            message=message,
            notes=[*self._layout_notes(), self.memory.source, *notes],
            training=self.case.kind == "training",
            model=self.case.kind != "base",
            peak_cache=cache_path(self.data.parent),
            registry=self.case.registry,
            energy=energy,
        )
        result.update(extra or {})
        self.events.emit("result", **result)
        shown = ", ".join(f"{k}={v:.4g}" for k, v in result["metrics"].items() if v is not None)
        self.say(f"result {result['status']}: {shown}")

    @property
    def target(self) -> float | None:
        """The target the run stops at and is judged by; None for a smoke run."""
        return None if self.smoke else self.case.target_value(self.hp)

    def _verdict(self, finite: bool) -> tuple[bool, str | None]:
        target = self.target
        if target is not None and self.case.target:
            if self.converged:
                return True, None
            budget = self.hp.get("max_samples") or self.hp.get("max_tokens")
            return False, f"target {self.case.target[0]} {target} not reached in {budget} samples"
        return finite, None if finite else f"training loss is {self.loss}"

    def _layout_notes(self) -> list[str]:
        if self.layout.tp == self.layout.pp == 1:
            return []
        return [
            f"{self.layout.describe()}: each tensor/pipeline group counts its batch once; "
            "per-device rates divide the groups' rate by all devices"
        ]


def run_case(file: str, main: Callable[[Run], None]) -> NoReturn:
    """A case's entry point: ``sys.exit(harness.run_case(__file__, main))``. Parses the
    contract's arguments (docs/workload-contract.md: --config, --data-dir, --run-dir), opens
    the rank's event writer, builds the ``Run`` from the case.yaml beside ``file`` and calls
    ``main(run)`` under ``guarded``: failures become an ``error`` event and exit code 2 (bad
    input) or 1."""
    case_dir = Path(file).resolve().parent
    parser = argparse.ArgumentParser(description=f"{case_dir.name} workload")
    parser.add_argument("--config", required=True, type=Path, help="RUN_DIR/config.json")
    parser.add_argument("--data-dir", required=True, type=Path, help="the case's data directory")
    parser.add_argument("--run-dir", required=True, type=Path, help="where events.jsonl goes")
    args = parser.parse_args()
    env = DistEnv.from_env()
    events = EventWriter(args.run_dir / "events.jsonl", env.rank, env.local_rank)
    code = guarded(events, lambda: main(Run(load_case_file(case_dir), args, env, events)))
    # Every event is written and flushed by now. Leave without the interpreter's teardown:
    # its collections walk every object torch made (about a second on 2 cores), and the
    # destructors of torch's and deepspeed's C++ threads can abort a rank after a passed
    # result ("terminate called without an active exception"), failing the run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
