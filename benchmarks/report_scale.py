"""``fleetperf report`` on a big store: time to write the page, and its size.

Builds a results store of N synthetic run records (seeded noise around the seeds' figures
on their A100 configs, and CPU figures on the CPU configs, with a few slow runs), each
judged as the engine judges it (tui/results/references.py), the newest run of each case with an
events.jsonl; then times ``fleetperf report`` on it (the real command, a fresh process).
Target (issue 22): 1,000 runs in under 5 s, a page under 5 MB.

    PYTHONPATH=. .venv/bin/python benchmarks/report_scale.py --runs 1000
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tui.catalog import catalog
from tui.results.record import RunRecord, utc_iso
from tui.results.references import verdict_for
from tui.results.store import ResultStore

REPO = Path(__file__).resolve().parents[1]
A100 = "NVIDIA A100-SXM4-40GB"
CPU = "AMD EPYC 7B13"
# (case, vendor/config, accelerator, synthetic, typical metrics)
SERIES = (
    (
        "distilbert-pytorch",
        "nvidia/A100x1x1",
        A100,
        False,
        {
            "e2e_time": 720.8,
            "p_whole": 283.7,
            "p_train": 286.1,
            "p_core": 287.9,
            "acc": 0.912,
            "mem_used_gib": 32.7,
        },
    ),
    (
        "distilbert-pytorch",
        "nvidia/A100x1x8",
        A100,
        False,
        {
            "p_whole": 1764.0,
            "p_train": 1861.9,
            "p_core": 1942.6,
            "acc": 0.915,
            "mem_used_gib": 13.9,
        },
    ),
    (
        "distilbert-pytorch",
        "cpu/CPUx1x1",
        CPU,
        True,
        {
            "e2e_time": 120.0,
            "p_whole": 27.0,
            "p_train": 28.0,
            "p_core": 30.0,
            "acc": 0.98,
            "mem_used_gib": 0.76,
        },
    ),
    (
        "llama2_7b_finetune-pytorch",
        "nvidia/A100x1x1",
        A100,
        False,
        {
            "e2e_time": 900.0,
            "tokens_per_s_per_device": 2788.0,
            "loss": 1.64,
            "mem_used_gib": 37.3,
            "acc": 0.38,
        },
    ),
    (
        "llama2_7b_finetune-pytorch",
        "cpu/CPUx1x1",
        CPU,
        True,
        {"e2e_time": 60.0, "tokens_per_s_per_device": 610.0, "loss": 4.1, "mem_used_gib": 1.2},
    ),
    (
        "aquila_33b-inference",
        "nvidia/A100x1x8",
        A100,
        False,
        {
            "e2e_time": 2479.9,
            "p_infer_whole": 8711.0,
            "p_infer_core": 8724.0,
            "mfu": 0.238,
            "loss": 3.0075,
        },
    ),
)
NOISE = 0.03  # relative standard deviation of a quiet run
SLOW_EVERY = 25  # one run in this many is 40 % slower (what the flags should catch)


def _record(
    rng: random.Random, i: int, series: tuple, started: datetime, spec: catalog.RunSpec
) -> RunRecord:
    case, ref, accelerator, synthetic, typical = series
    slow = i % SLOW_EVERY == SLOW_EVERY - 1
    metrics = {}
    for name, value in typical.items():
        # Accuracy and loss scatter less than rates and times on a quiet host.
        v = value * (1 + rng.gauss(0, NOISE / 5 if name in ("acc", "loss") else NOISE))
        if slow and name.startswith(("p_", "tokens", "mfu")):
            v *= 0.6
        metrics[name] = v
    return RunRecord(
        run_id=f"{started:%Y%m%d-%H%M%S}-{case}-{i:04x}",
        case=case,
        vendor=spec.config.vendor,
        config=spec.config.name,
        hosts=["host-a"],
        status="passed",
        started=utc_iso(started),
        finished=utc_iso(started + timedelta(minutes=10)),
        precision=spec.precision,
        fix_hp=spec.seed_fix_hp,
        hp=spec.hp,
        metrics=metrics,
        environment={"accelerator": accelerator, "hostname": "host-a"},
        synthetic_data=synthetic,
        load_per_cpu=0.1,
        case_metrics=spec.case.metrics,
        columns=spec.case.report,
        short_names=spec.case.short_names,
    )


def _events(run_dir: Path, run_id: str, rng: random.Random, steps: int = 2000) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "events.jsonl").open("w", encoding="utf-8") as f:
        for step in range(10, steps + 1, 10):
            loss = 4.0 * (step / 10) ** -0.3 + rng.gauss(0, 0.02)
            line = {"type": "MetricSample", "run_id": run_id, "host": "host-a", "rank": 0}
            f.write(json.dumps({**line, "step": step, "samples": step * 16, "loss": loss}) + "\n")


def build_store(results_dir: Path, runs: int, seed: int = 22) -> list[RunRecord]:
    """``runs`` judged synthetic records in ``results_dir/fleetperf.sqlite`` (round robin
    over SERIES, one a day per series), events.jsonl for each case's newest run."""
    rng = random.Random(seed)
    specs = []
    for case_name, ref, *_ in SERIES:
        case = catalog.load_case(case_name)
        specs.append(catalog.resolve(case, catalog.load_config(case, ref)))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    done: dict[str, list[RunRecord]] = {}
    newest: dict[str, RunRecord] = {}
    with ResultStore(results_dir / "fleetperf.sqlite") as store:
        for i in range(runs):
            k = i % len(SERIES)
            started = start + timedelta(hours=i)
            record = _record(rng, i // len(SERIES), SERIES[k], started, specs[k])
            earlier = done.setdefault(record.case, [])
            verdict = verdict_for(record, specs[k], earlier)
            record = record.model_copy(update={"verdict": verdict})
            store.add(record)
            earlier.append(record)
            newest[record.case] = record
    for record in newest.values():
        _events(results_dir / "runs" / record.run_id, record.run_id, rng)
    return [r for rs in done.values() for r in rs]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--keep", type=Path, help="build the store here and keep it")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetperf-report-") as tmp:
        results = args.keep or Path(tmp)
        t0 = time.perf_counter()
        records = build_store(results, args.runs)
        built = time.perf_counter() - t0
        flagged = sum(1 for r in records if r.verdict and r.verdict.flagged)
        out = results / "report.html"
        argv = [
            sys.executable,
            "-m",
            "tui.cli",
            "report",
            "--results",
            str(results),
            "-o",
            str(out),
        ]
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - t0
        size = out.stat().st_size
        text = out.read_text(encoding="utf-8")
        print(f"store: {args.runs} runs built and judged in {built:.1f} s ({flagged} flagged)")
        print(
            f"fleetperf report: {took:.2f} s (target < 5 s), page {size / 2**20:.2f} MiB"
            f" (target < 5 MB), {text.count('<svg')} charts"
        )
        return 0 if took < 5 and size < 5_000_000 else 1


if __name__ == "__main__":
    sys.exit(main())
