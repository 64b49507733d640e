"""{{name}}: written by `fleetperf new-case` (docs/new-case.md makes it a real case).

    PYTHONPATH=<repo>/cases python cases/{{name}}/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

The case builds its model, data and step; ``harness.Run`` does the rest (docs/harness.md).
Trains until dev accuracy reaches hp target_acc or until max_samples.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import harness
import torch


def read_points(path: Path) -> list[tuple[torch.Tensor, int]]:
    """Rows "x1,...,xD,label" -> [(features, label)]; InputError naming the file."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            *x, y = (float(v) for v in line.split(","))
        except ValueError:
            raise harness.InputError(f"{path}: line {n} is not comma-separated numbers") from None
        rows.append((torch.tensor(x), int(y)))
    return rows


def right(model: torch.nn.Module, device: harness.Device, batch: list) -> tuple[int, int]:
    """(right, counted) for one dev batch: the argmax class against the label."""
    x, y = batch
    logits = model(x.to(device.torch_device))
    return int((logits.argmax(-1).cpu() == y).sum()), len(y)


def main(run: harness.Run) -> None:
    hp, device = run.hp, run.device
    train = read_points(run.data / "points" / "train.csv")
    dev = read_points(run.data / "points" / "dev.csv")
    dim = len(train[0][0])
    model = torch.nn.Sequential(
        torch.nn.Linear(dim, hp.hidden), torch.nn.ReLU(), torch.nn.Linear(hp.hidden, 2)
    ).to(device.torch_device)
    n_params = sum(p.numel() for p in model.parameters())
    flops = harness.ModelFlops(0.0, 6.0 * n_params, f"6N per sample, N={n_params}")
    ddp = run.data_parallel(model)
    loader = run.train_loader(train, hp.train_batch_size, source=run.data / "points/train.csv")
    dev_loader = run.eval_loader(dev, hp.eval_batch_size)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=hp.learning_rate)
    run.say(f"model: MLP {dim}-{hp.hidden}-2, {n_params} parameters; train {len(train)} rows")

    score = partial(right, model, device)  # run.accuracy: eval mode, summed over replicas
    evaluate = lambda: {"acc": run.accuracy(model, dev_loader, score)}  # noqa: E731
    for x, y in run.train(loader, evaluate=evaluate):
        x, y = x.to(device.torch_device), y.to(device.torch_device)  # outside p_core
        with run.step(samples=len(y)) as step:
            with device.autocast():
                step.loss = torch.nn.functional.cross_entropy(ddp(x), y)
            run.optimize(step.loss, optimizer)
    run.finish(flops)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
