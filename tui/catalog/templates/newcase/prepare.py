"""Stage the {{name}} data directory.

    python cases/{{name}}/prepare.py --out DATA_DIR --synthetic
    python cases/{{name}}/prepare.py --out DATA_DIR --from DIR

Both write the layout run.py reads:

    DATA_DIR/points/train.csv, dev.csv   rows "x1,...,xD,label"

--synthetic: offline and seeded, points in D dimensions labelled by the side of a hidden
plane they lie on. --from DIR: DIR/points/train.csv and dev.csv, checked and then linked.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import harness

DIM = 16
SPLITS = ("train.csv", "dev.csv")


def synthetic(out: Path, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    plane = [rng.gauss(0, 1) for _ in range(DIM)]
    (out / "points").mkdir(parents=True, exist_ok=True)
    for name, rows in zip(SPLITS, (args.train_rows, args.dev_rows), strict=True):
        with open(out / "points" / name, "w", encoding="utf-8") as f:
            for _ in range(rows):
                x = [rng.gauss(0, 1) for _ in range(DIM)]
                label = int(sum(a * b for a, b in zip(x, plane, strict=True)) > 0)
                f.write(",".join(f"{v:.5f}" for v in x) + f",{label}\n")


def stage(src: Path, out: Path) -> None:
    """Every split present and numeric, then linked; InputError names the first bad file."""
    for name in SPLITS:
        path = src / "points" / name
        try:
            first = path.read_text(encoding="utf-8").split("\n", 1)[0]
            [float(v) for v in first.split(",")]
        except OSError:
            raise harness.InputError(f"missing data: {path}") from None
        except ValueError:
            raise harness.InputError(f"{path}: line 1 is not comma-separated numbers") from None
    for name in SPLITS:
        harness.link_or_copy(src / "points" / name, out / "points" / name)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train-rows", type=int, default=8000)
    parser.add_argument("--dev-rows", type=int, default=1000)


if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__,
            __doc__,
            synthetic,
            stage=stage,
            options=options,
            real_data="points/train.csv and points/dev.csv",
        )
    )
