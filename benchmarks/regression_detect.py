"""Does history catch a slowed run, and leave quiet runs alone? (issue 22's target)

Runs distilbert-pytorch cpu/CPUx1x1 on its synthetic data through ``fleetperf --batch``
in a fresh results store: ``--warmup`` quiet runs (the history), then one run with
``--burners`` CPU-bound processes beside it (expected: exit 3, p_core named), then
``--quiet`` more quiet runs (each exit 3 is a false alarm). Prints every run (exit code,
p_core, the host's load per CPU at start, flagged metrics), the quiet runs' noise and
the verdict on the target. Needs a quiet machine: nothing else running.

    PYTHONPATH=. .venv/bin/python benchmarks/regression_detect.py            # 3 + 1 + 10 runs
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE, CONFIG = "distilbert-pytorch", "cpu/CPUx1x1"
BURN = "while True: pass"  # one CPU-bound process


@dataclass(frozen=True)
class Run:
    kind: str  # "warmup", "loaded", "quiet"
    code: int
    p_core: float | None
    load_per_cpu: float | None
    flagged: list[str]  # the metrics flagged


def summarize(runs: list[Run]) -> dict[str, object]:
    """What the runs show: whether the loaded run was caught with p_core named, the false
    alarms among the judged quiet runs, and the quiet runs' p_core noise."""
    loaded = [r for r in runs if r.kind == "loaded"]
    quiet = [r for r in runs if r.kind == "quiet"]
    rates = [r.p_core for r in runs if r.kind != "loaded" and r.p_core is not None]
    median = statistics.median(rates) if rates else None
    mad = statistics.median(abs(v - median) for v in rates) if rates else None
    return {
        "loaded_caught": bool(loaded)
        and all(r.code == 3 and "p_core" in r.flagged for r in loaded),
        "false_alarms": sum(r.code == 3 for r in quiet),
        "quiet_judged": len(quiet),
        "failures": sum(r.code not in (0, 3) for r in runs),
        "p_core_median": median,
        "p_core_mad_pct": None if not median else 100 * mad / median,
        "p_core_range": (min(rates), max(rates)) if rates else None,
        "loaded_p_core": [r.p_core for r in loaded],
    }


def flagged_metrics(stdout: str) -> list[str]:
    """The metric names of --batch's FLAGGED lines (``... run ID: METRIC VALUE ...``)."""
    return [
        line.split(": ", 1)[1].split()[0]
        for line in stdout.splitlines()
        if line.startswith("FLAGGED ") and ": " in line
    ]


class Bench:
    def __init__(self, tmp: Path, sets: list[str]) -> None:
        self.results, self.data, self.sets = tmp / "results", tmp / "data", sets

    def _fleetperf(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "tui.cli", *args]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)

    def prepare(self) -> None:
        done = self._fleetperf("prepare", CASE, "--synthetic", "--data-root", str(self.data))
        if done.returncode:
            raise SystemExit(f"prepare failed: {done.stderr[-2000:]}")

    def run(self, kind: str, burners: int = 0) -> Run:
        procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners)]
        try:
            args = ["--batch", "--case", CASE, "--config", CONFIG, "--results", str(self.results)]
            args += ["--data-root", str(self.data)]
            args += [a for kv in self.sets for a in ("--set", kv)]
            done = self._fleetperf(*args)
        finally:
            for proc in procs:  # ours, by their own handles
                proc.kill()
                proc.wait()
        listed = self._fleetperf("results", "--results", str(self.results), "--format", "json")
        newest = json.loads(listed.stdout or "[]")[-1:] or [{}]
        metrics = newest[0].get("metrics") or {}
        run = Run(
            kind,
            done.returncode,
            metrics.get("p_core"),
            newest[0].get("load_per_cpu"),
            flagged_metrics(done.stdout),
        )
        if done.returncode not in (0, 3):
            print(done.stdout[-1500:], done.stderr[-1500:], file=sys.stderr)
        return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=3, help="quiet runs before the loaded one")
    p.add_argument("--quiet", type=int, default=10, help="quiet runs after it (false alarms)")
    p.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside it")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="fleetperf-regress-") as tmp:
        bench = Bench(Path(tmp), args.set)
        bench.prepare()
        plan = ["warmup"] * args.warmup + ["loaded"] + ["quiet"] * args.quiet
        for i, kind in enumerate(plan, 1):
            run = bench.run(kind, args.burners if kind == "loaded" else 0)
            runs.append(run)
            p_core = "/" if run.p_core is None else f"{run.p_core:.2f}"
            print(
                f"{i:>2} {kind:<7} exit {run.code}  p_core {p_core} samples/s"
                f"  load/CPU {run.load_per_cpu}  flagged {','.join(run.flagged) or '-'}",
                flush=True,
            )
    summary = summarize(runs)
    print(json.dumps(summary, indent=2))
    met = summary["loaded_caught"] and summary["false_alarms"] == 0 and not summary["failures"]
    print("target " + ("met" if met else "NOT met"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
