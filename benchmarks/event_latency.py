"""Workload -> controller latency of step records, through the real launch path.

Each step record carries the workload's write time ``t``; the controller stamps
``received`` when ansible-runner hands the line over. By default this runs the torch-free
emitter case (tests/fixtures/cases/emitter) through ``fleetperf --batch`` on the local
inventory; ``--run-dir`` reads runs made earlier (e.g. a real distilbert-pytorch run).

    python benchmarks/event_latency.py --steps 200 --interval 0.5
    python benchmarks/event_latency.py --run-dir results/runs/<run_id>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def latencies(run_dir: Path) -> list[float]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    return [r["received"] - r["t"] for r in recs if r["type"] == "MetricSample"]


def emitter_run(steps: int, interval: float) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="fleetperf-latency-"))
    (tmp / "data" / "emitter").mkdir(parents=True)
    (tmp / "data" / "emitter" / "marker").touch()
    env = dict(
        os.environ,
        FLEETPERF_CASES_DIR=str(REPO / "tests" / "fixtures" / "cases"),
        FLEETPERF_DATA=str(tmp / "data"),
        FLEETPERF_RESULTS=str(tmp / "results"),
        PYTHONPATH=str(REPO),
    )
    argv = [
        sys.executable,
        "-m",
        "tui.cli",
        "--batch",
        "--case",
        "emitter",
        "--config",
        "cpu/CPUx1x1",
        "--set",
        f"steps={steps}",
        "--set",
        f"interval_s={interval}",
    ]
    subprocess.run(argv, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    (run_dir,) = (tmp / "results" / "runs").iterdir()
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between step records")
    ap.add_argument("--run-dir", type=Path, action="append", default=[])
    args = ap.parse_args()
    run_dirs = args.run_dir or [emitter_run(args.steps, args.interval)]
    for run_dir in run_dirs:
        lat = sorted(latencies(run_dir))
        if not lat:
            print(f"{run_dir}: no step records")
            continue
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        print(
            f"{run_dir.name}: n={len(lat)} median={statistics.median(lat):.3f}s "
            f"p95={p95:.3f}s max={lat[-1]:.3f}s"
        )


if __name__ == "__main__":
    main()
