"""What the harness's instrumentation costs a training loop.

    PYTHONPATH=cases /work/venv/bin/python benchmarks/harness_overhead.py [--seq-len 128]

Trains the synthetic case's tiny DistilBERT (prepare.tiny_config: dim 64, 2 layers) on CPU
with the same step as cases/distilbert-pytorch/run.py, in two variants:

- plain: fetch batch, forward, backward, AdamW step, loss.item();
- instrumented: the same, plus what run.py adds: PerfTracker step_begin/step_end (device
  sync at both bounds), and every ``--log-every`` steps the all_reduce of the window, a
  memory sample, a ``step`` event and a ``sys`` event (sampled at every log step here,
  stricter than run.py's at most one per 10 s) appended to a real events.jsonl.

The variants alternate in blocks of ``--steps`` steps (ABBA order, ``--reps`` rounds), after
a warm-up of both. Each step is timed from outside (batch fetch to loss.item()), in wall
time and in process CPU time (which a busy host disturbs less). Reported:

- the median step time of each variant over all its steps, and the overhead between them;
- paired within each round: instrumented mean step / plain mean step (wall), which charges
  the log steps' extra work to the average and cancels drift in the host's load; median,
  min and max over rounds;
- the instrumentation alone (same calls, no model) over 2000 steps: its cost per step,
  independent of the host's load.

One intra-op thread by default, so that a busy host's scheduling noise does not swamp a
figure of a few per cent (``--threads 0`` keeps torch's default).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "cases"))
sys.path.insert(0, str(REPO / "cases" / "distilbert-pytorch"))

import harness  # noqa: E402
from prepare import tiny_config  # noqa: E402


def make_batches(n: int, bs: int, seq_len: int, vocab: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    batches = []
    for _ in range(n):
        lengths = [rng.randint(8, min(60, seq_len)) for _ in range(bs)]
        ids = torch.zeros((bs, seq_len), dtype=torch.long)
        mask = torch.zeros((bs, seq_len), dtype=torch.long)
        for i, length in enumerate(lengths):
            ids[i, :length] = torch.randint(5, vocab, (length,))
            mask[i, :length] = 1
        labels = torch.tensor([rng.randint(0, 1) for _ in range(bs)])
        batches.append(
            {
                "input_ids": ids,
                "attention_mask": mask,
                "labels": labels,
                "real_tokens": sum(lengths),
            }
        )
    return batches


class Loop:
    """One model + optimizer; ``run(n, instrumented)`` returns per-step wall seconds."""

    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        from transformers import DistilBertForSequenceClassification

        torch.manual_seed(args.seed)
        vocab = 300
        self.model = DistilBertForSequenceClassification(tiny_config(vocab)).train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.batches = make_batches(8, args.batch_size, args.seq_len, vocab, args.seed)
        self.log_every = args.log_every
        self.device = harness.open_device("cpu", "fp32")
        self.perf = harness.PerfTracker(5, self.device.synchronize, harness.barrier)
        self.events = harness.EventWriter(run_dir / "events.jsonl")
        self.memory = harness.MemoryMonitor(self.device)
        self.sysmon = harness.SysSampler(self.device)
        self.step = 0
        self.tokens = 0

    def _train_step(self, batch: dict) -> torch.Tensor:
        loss = self.model(
            input_ids=batch["input_ids"].to(self.device.torch_device),
            attention_mask=batch["attention_mask"].to(self.device.torch_device),
            labels=batch["labels"].to(self.device.torch_device),
        ).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss

    def run(self, n: int, instrumented: bool) -> list[tuple[float, float]]:
        times = []
        win_loss, win_steps, win_t0 = 0.0, 0, time.perf_counter()
        for _ in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            batch = self.batches[self.step % len(self.batches)]
            if instrumented:
                self.perf.step_begin()
            loss = self._train_step(batch)
            if instrumented:
                bs = len(batch["labels"])
                self.perf.step_end(bs, batch["real_tokens"], batch["input_ids"].numel())
            self.step += 1
            self.tokens += batch["real_tokens"]
            win_loss += loss.item()
            win_steps += 1
            if instrumented and self.step % self.log_every == 0:
                loss_sum, loss_n, tokens = harness.all_reduce([win_loss, win_steps, self.tokens])
                self.memory.sample()
                used, total = self.memory.peak_gib()
                now = time.perf_counter()
                self.events.emit(
                    "step",
                    step=self.step,
                    samples=self.step * bs,
                    tokens=int(tokens),
                    loss=loss_sum / loss_n,
                    lr=self.opt.param_groups[0]["lr"],
                    throughput=win_steps * bs / (now - win_t0),
                    mem_used_gib=used,
                    mem_total_gib=total,
                )
                self.events.emit("sys", **self.sysmon.sample())
                win_loss, win_steps, win_t0 = 0.0, 0, time.perf_counter()
            times.append((time.perf_counter() - t0, time.process_time() - c0))
        return times


def instrumentation_only(run_dir: Path, n: int, log_every: int) -> float:
    """Seconds per step of the instrumentation alone (no model), amortised over log steps."""
    device = harness.open_device("cpu", "fp32")
    perf = harness.PerfTracker(5, device.synchronize, harness.barrier)
    events = harness.EventWriter(run_dir / "bare.jsonl")
    memory = harness.MemoryMonitor(device)
    sysmon = harness.SysSampler(device, min_interval_s=0.0)
    t0 = time.perf_counter()
    for step in range(1, n + 1):
        perf.step_begin()
        perf.step_end(16, 500, 16 * 128)
        if step % log_every == 0:
            loss_sum, loss_n, tokens = harness.all_reduce([1.0, log_every, step * 500])
            memory.sample()
            used, total = memory.peak_gib()
            events.emit(
                "step",
                step=step,
                samples=step * 16,
                tokens=int(tokens),
                loss=loss_sum / loss_n,
                lr=1e-3,
                throughput=123.4,
                mem_used_gib=used,
                mem_total_gib=total,
            )
            if sysmon.due():
                events.emit("sys", **sysmon.sample())
    return (time.perf_counter() - t0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description="harness instrumentation overhead")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    parser.add_argument("--reps", type=int, default=32, help="ABBA rounds")
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)"
    )
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        loop = Loop(args, Path(tmp))
        loop.run(10, False)  # warm-up: allocator, threads, first optimizer state
        loop.run(10, True)
        steps: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        paired = []  # per round: mean instrumented step / mean plain step - 1 (wall clock)
        for _ in range(args.reps):
            total = {False: 0.0, True: 0.0}
            for instrumented in (False, True, True, False):
                t = loop.run(args.steps, instrumented)
                steps[instrumented] += t
                total[instrumented] += sum(wall for wall, _ in t)
            paired.append(total[True] / total[False] - 1)
        n_events = len((Path(tmp) / "events.jsonl").read_text().splitlines())
        bare = statistics.median(
            instrumentation_only(Path(tmp), 2000, args.log_every) for _ in range(5)
        )

    med = {k: statistics.median(wall for wall, _ in v) for k, v in steps.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in steps.items()}
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; batch "
        f"{args.batch_size} x seq {args.seq_len}, log every {args.log_every} steps; "
        f"{args.reps} ABBA rounds of {args.steps} steps per block; {n_events} events written"
    )
    print(f"{'median step':26}{'wall ms':>10}{'CPU ms':>10}")
    print(f"{'plain':26}{med[False] * 1e3:10.3f}{cpu[False] * 1e3:10.3f}")
    print(f"{'instrumented':26}{med[True] * 1e3:10.3f}{cpu[True] * 1e3:10.3f}")
    over, over_cpu = (100 * (d[True] / d[False] - 1) for d in (med, cpu))
    print(f"{'overhead % (medians)':26}{over:10.2f}{over_cpu:10.2f}")
    print(
        f"instrumentation alone: {bare * 1e6:.1f} us per step, "
        f"{bare / med[False] * 100:.3f} % of the plain median step"
    )
    lo, mid, hi = (100 * x for x in (min(paired), statistics.median(paired), max(paired)))
    print(f"overhead per round (mean step, paired): median {mid:.2f} %, min {lo:.2f}, max {hi:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
