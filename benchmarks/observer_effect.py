"""What measuring through fleetperf costs the measured run: fleetperf against a direct start.

    .venv/bin/python benchmarks/observer_effect.py [--rounds 5] [--set max_samples=800 ...]

The same case and config (default: distilbert-pytorch cpu/CPUx1x1 on synthetic data, 50
steps of batch 16 at seq 64, one torch thread as the config's env says), run interleaved
A B A B ...:

- A: ``fleetperf --batch`` on the local inventory (preflight, launch, polling, cleanup);
- B: the case's entrypoint started directly, with the config.json that A's run resolved,
  the same environment variables the launch module sets (the config's env included, as
  A's record keeps it), and no controller.

Per round it prints both p_core rates and their ratio (A / B); then the median ratio, the
fixed cost of A (command start to exit minus the workload's own e2e_time), the CPU-seconds
of A's controller side (the fleetperf command and its children, the polls excluded; the
workload is detached, so its CPU is not in there; "-" for a run the direct executor ran,
whose workload is the controller's grandchild: benchmarks/peer_overhead.py measures that
with cgroups) and of the poller on the host (the sum
of the poll modules' own CPU time, which fleetperf_tail keeps in the run's poll_cpu_s),
and the event latency of A's step records (controller receipt minus the workload's write).
The load average is read before and after each run: the figures mean little on a busy host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 1)[0]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the process and its waited-for children, exit status."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - t0, usage.ru_utime + usage.ru_stime, proc.returncode


def result_event(events: Path) -> dict:
    """The workload's own result record (kind 'result') from an events.jsonl."""
    for line in reversed(events.read_text().splitlines()):
        rec = json.loads(line)
        if rec.get("kind") == "result":
            return rec
    raise SystemExit(f"{events}: no result event")


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.data = tmp / "data"
        self.env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.env.pop("FLEETPERF_CASES_DIR", None)

    def prepare(self) -> None:
        argv = [sys.executable, "-m", "tui.cli", "prepare", self.args.case, "--synthetic"]
        argv += ["--data-root", str(self.data)]
        subprocess.run(argv, env=self.env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)

    def through_fleetperf(self, n: int) -> dict:
        results = self.tmp / f"results-{n}"
        argv = [sys.executable, "-m", "tui.cli", "--batch", "--case", self.args.case]
        argv += ["--config", self.args.config, "--results", str(results)]
        argv += ["--data-root", str(self.data)]
        argv += [a for kv in self.args.set for a in ("--set", kv)]
        load = loadavg()
        wall, cpu, rc = timed(argv, self.env, REPO)
        (run_dir,) = (results / "runs").iterdir()
        (host_dir,) = (results / "hosts" / "localhost").glob(f"{run_dir.name}")
        result = result_event(host_dir / "events.jsonl")
        poll_cpu = float((host_dir / "poll_cpu_s").read_text())
        log = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
        latency = [r["received"] - r["t"] for r in log if r.get("type") == "MetricSample"]
        record = json.loads((run_dir / "result.json").read_text())
        data_dir = str(self.data / self.args.case)
        config_env = {k: v.replace("{data_dir}", data_dir) for k, v in record["config_env"].items()}
        return {
            "rc": rc,
            "p_core": result["metrics"]["p_core"],
            "fixed_s": wall - result["metrics"]["e2e_time"],
            # The direct executor (tui/executors/direct.py) reaps the workload's supervisor:
            # wait4 counts the workload there (benchmarks/peer_overhead.py splits it off).
            "controller_cpu_s": cpu - poll_cpu if (run_dir / "ansible-run").is_dir() else None,
            "poll_cpu_s": poll_cpu,
            "latency": latency,
            "config": run_dir / "config.json",
            "config_env": config_env,
            "load": f"{load}->{loadavg()}",
        }

    def direct(self, n: int, config: Path, config_env: dict[str, str]) -> dict:
        run_dir = self.tmp / f"direct-{n}"
        run_dir.mkdir()
        case_dir = REPO / "cases" / self.args.case
        entry = yaml.safe_load((case_dir / "case.yaml").read_text())["entrypoint"]
        argv = [sys.executable, str(case_dir / entry), "--config", str(config)]
        argv += ["--data-dir", str(self.data / self.args.case), "--run-dir", str(run_dir)]
        # the config's env too (OMP_NUM_THREADS...), as the launch gives the workload
        env = {
            **os.environ,
            **config_env,
            "PYTHONPATH": str(REPO / "cases"),
            "PYTHONUNBUFFERED": "1",
        }
        load = loadavg()
        _, _, rc = timed(argv, env, REPO)
        result = result_event(run_dir / "events.jsonl")
        return {"rc": rc, "p_core": result["metrics"]["p_core"], "load": f"{load}->{loadavg()}"}


def _cpu(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="distilbert-pytorch")
    ap.add_argument("--config", default="cpu/CPUx1x1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--set",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="hyperparameters for both arms (default: 50 steps, one evaluation)",
    )
    args = ap.parse_args()
    args.set = args.set or ["max_samples=800", "eval_every_samples=800"]
    with tempfile.TemporaryDirectory(prefix="fleetperf-observer-") as tmp:
        bench = Bench(args, Path(tmp))
        bench.prepare()
        print(f"{args.case} {args.config} {' '.join(args.set)}; {args.rounds} rounds, A B A B")
        print("round  A p_core  B p_core  A/B    A fixed s  A ctl CPU s  A poll CPU s  load A | B")
        rows = []
        for n in range(args.rounds):
            a = bench.through_fleetperf(n)
            b = bench.direct(n, a["config"], a["config_env"])
            ratio = a["p_core"] / b["p_core"]
            rows.append((a, b, ratio))
            status = f"  (exit A {a['rc']}, B {b['rc']})" if a["rc"] or b["rc"] else ""
            print(
                f"{n + 1:5}  {a['p_core']:8.2f}  {b['p_core']:8.2f}  {ratio:5.3f}  "
                f"{a['fixed_s']:9.2f}  {_cpu(a['controller_cpu_s']):>11}  {a['poll_cpu_s']:12.2f}  "
                f"{a['load']} | {b['load']}{status}"
            )
        med = statistics.median
        latency = sorted(x for a, _, _ in rows for x in a["latency"])
        print(
            f"median: A p_core {med(a['p_core'] for a, _, _ in rows):.2f}, "
            f"B p_core {med(b['p_core'] for _, b, _ in rows):.2f}, "
            f"A/B {med(r for _, _, r in rows):.3f}; "
            f"A fixed cost {med(a['fixed_s'] for a, _, _ in rows):.2f} s, "
            f"controller CPU {_cpu(_median([a['controller_cpu_s'] for a, _, _ in rows]))} s, "
            f"poller CPU {med(a['poll_cpu_s'] for a, _, _ in rows):.2f} s per run"
        )
        if latency:
            print(
                f"event latency over {len(latency)} step records: median "
                f"{med(latency):.3f} s, max {latency[-1]:.3f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
