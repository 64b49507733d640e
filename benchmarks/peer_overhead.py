"""What a run costs the controller: fleetperf against ReFrame and a direct start, side by side.

    .venv/bin/python benchmarks/peer_overhead.py [--rounds 4] [--distilbert-rounds 4]

Two workloads, each run three ways (four with ``--before``) interleaved in rotating order
(round r starts with way r mod n, so the machine's load drifts over every way alike):

- ``direct``: the case's entrypoint started by hand per docs/workload-contract.md, with the
  config.json and environment a fleetperf run resolved (a warm-up fleetperf run, not
  counted, gives them and fills the peak cache);
- ``fleetperf``: ``fleetperf --batch --no-judge`` on the local inventory, into a results
  store that one uncounted run made (each fleetperf way its own);
- ``reframe``: ReFrame 4.10.4 (pip-installed from PyPI into a throwaway venv under /tmp on
  first use) with its generic local system and local scheduler, running a minimal
  RunOnlyRegressionTest whose executable is the direct way's command;
- ``fleetperf-before`` (``--before DIR``): the fleetperf way from another source tree, so
  a change is measured before and after in one run.

The workloads: distilbert-pytorch cpu/CPUx1x1 on synthetic data (50 steps of batch 16, one
evaluation, as benchmarks/observer_effect.py runs it) and the torch-free emitter fixture
(tests/fixtures/cases, 15 steps of 0.1 s).

Per run: ``p_core`` from the workload's own result event; the wall overhead (the command's
wall time minus the workload's e2e_time); the controller's CPU-seconds. Each way's command
starts in a fresh cgroup (v1 cpuacct, or v2 where that is the one mounted writable); a
thread moves the workload's process (the one whose argv[1] is the entrypoint) into a child
cgroup within milliseconds of its exec, so the controller's CPU is the run cgroup's usage
less the child's: the command, ansible and its forks, the polls, the host-side supervisor,
ReFrame's job script, everything but the workload. Needs root (cgroup writes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
REFRAME_VERSION = "4.10.4"
REFRAME_VENV = Path(tempfile.gettempdir()) / f"fleetperf-reframe-{REFRAME_VERSION}"
WAYS = ("direct", "fleetperf", "reframe")


@dataclass(frozen=True)
class Workload:
    case: str
    cases_dir: Path
    sets: tuple[str, ...]


WORKLOADS = {
    "distilbert": Workload(
        "distilbert-pytorch", REPO / "cases", ("max_samples=800", "eval_every_samples=800")
    ),
    "emitter": Workload("emitter", REPO / "tests/fixtures/cases", ("steps=15", "interval_s=0.1")),
}


def uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Cgroup:
    """A fresh CPU-accounting cgroup for one command, with a child cgroup the workload is
    moved into: usage() of each in seconds (the parent's counts the child's)."""

    ROOTS = (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup"))

    def __init__(self, name: str) -> None:
        for root in self.ROOTS:
            if (root / "cpuacct.usage").exists() or (root / "cgroup.controllers").exists():
                break
        else:
            raise SystemExit("no cgroup cpuacct (v1) or v2 hierarchy mounted")
        self.v1 = (root / "cpuacct.usage").exists()
        self.path = root / name
        self.path.mkdir()
        (self.path / "workload").mkdir()

    def usage(self, sub: str = "") -> float:
        path = self.path / sub if sub else self.path
        if self.v1:
            return int((path / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def procs(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def adopt_workload(self, entry: str, done: threading.Event) -> None:
        """Until ``done``: move every process of the run cgroup whose argv[1] ends in
        ``entry`` (the workload, not the supervisor whose argv[1] is -c) into the child."""
        seen: set[int] = set()
        while not done.wait(0.002):
            for pid in self.procs():
                if pid in seen:
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if len(argv) > 1 and argv[1].decode(errors="replace").endswith(entry):
                    seen.add(pid)
                    with contextlib.suppress(OSError):  # gone already
                        (self.path / "workload" / "cgroup.procs").write_text(str(pid))

    def wait_empty(self) -> None:
        deadline = time.monotonic() + 30
        while self.procs() and time.monotonic() < deadline:  # a follower still ending
            time.sleep(0.05)


def measured(argv: list[str], env: dict[str, str], entry: str, name: str, cwd: Path = REPO) -> dict:
    """Run ``argv`` in a fresh cgroup: wall seconds, exit status, controller and workload
    CPU-seconds."""
    cg = Cgroup(name)
    try:
        join = f'echo $$ > {cg.path / "cgroup.procs"} && exec "$@"'
        done = threading.Event()
        mover = threading.Thread(target=cg.adopt_workload, args=(entry, done), daemon=True)
        mover.start()
        t0 = time.monotonic()
        proc = subprocess.run(
            ["sh", "-c", join, "sh", *argv],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        wall = time.monotonic() - t0
        done.set()
        mover.join()
        cg.wait_empty()
        workload = cg.usage("workload")
        return {
            "rc": proc.returncode,
            "output": proc.stdout[-3000:],
            "wall": wall,
            "controller_cpu": cg.usage() - workload,
            "workload_cpu": workload,
        }
    finally:
        for path in (cg.path / "workload", cg.path):
            if path.exists():
                path.rmdir()


def span(values: list[float]) -> str:
    """Median (min-max)."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def result_event(events: Path) -> dict:
    for line in reversed(events.read_text().splitlines()):
        rec = json.loads(line)
        if rec.get("kind") == "result":
            return rec
    raise SystemExit(f"{events}: no result event")


def reframe() -> Path:
    """The reframe command of the throwaway venv, installed on first use."""
    exe = REFRAME_VENV / "bin" / "reframe"
    if not exe.exists():
        subprocess.run(["python3", "-m", "venv", str(REFRAME_VENV)], check=True)
        pip = [str(REFRAME_VENV / "bin" / "pip"), "install", "-q"]
        subprocess.run([*pip, f"reframe-hpc=={REFRAME_VERSION}"], check=True)
    return exe


REFRAME_TEST = '''\
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, sanity_function


@rfm.simple_test
class PeerRun(rfm.RunOnlyRegressionTest):
    """The workload's command as the direct way runs it, on the local scheduler."""

    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    sourcesdir = None
    executable = {executable!r}
    executable_opts = {opts!r}
    env_vars = {env!r}

    @sanity_function
    def has_result(self):
        return sn.assert_found(r'"kind": *"result"', {events!r})
'''


class Bench:
    def __init__(self, tmp: Path, work: Workload, rfm: Path, before: Path | None) -> None:
        self.tmp, self.work, self.rfm, self.before = tmp, work, rfm, before
        self.data = tmp / "data"
        self.entry = yaml.safe_load((work.cases_dir / work.case / "case.yaml").read_text())[
            "entrypoint"
        ]
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "FLEETPERF_CASES_DIR": str(work.cases_dir),
        }
        self.n = 0

    def results(self, way: str) -> Path:
        """The way's results directory, kept over its runs: a run adds to a store that
        exists, as every run after a user's first does (the store's creation and schema
        migration are a first run's cost, not each run's)."""
        return self.tmp / f"results-{way}"

    def fleetperf_argv(self, results: Path) -> list[str]:
        argv = [sys.executable, "-m", "tui.cli", "--batch", "--no-judge", "--case", self.work.case]
        argv += ["--config", "cpu/CPUx1x1", "--results", str(results)]
        argv += ["--data-root", str(self.data)]
        return argv + [a for kv in self.work.sets for a in ("--set", kv)]

    def prepare(self) -> None:
        """Stage the data, then one fleetperf run (not counted): the config.json and the
        config's env that the direct and ReFrame ways start the workload with."""
        argv = [sys.executable, "-m", "tui.cli", "prepare", self.work.case, "--synthetic"]
        argv += ["--data-root", str(self.data)]
        subprocess.run(argv, env=self.env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        results = self.results("fleetperf")
        subprocess.run(
            self.fleetperf_argv(results),
            env=self.env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (run_dir,) = (results / "runs").iterdir()
        if self.before is not None:  # its store made too, by its own code
            before = self.results("fleetperf-before")
            env = {**self.env, "PYTHONPATH": str(self.before)}
            argv = self.fleetperf_argv(before)
            subprocess.run(argv, env=env, cwd=self.before, check=True, stdout=subprocess.DEVNULL)
        self.config = self.tmp / "config.json"
        shutil.copy(run_dir / "config.json", self.config)
        record = json.loads((run_dir / "result.json").read_text())
        data_dir = str(self.data / self.work.case)
        self.workload_env = {
            **{k: v.replace("{data_dir}", data_dir) for k, v in record["config_env"].items()},
            "PYTHONPATH": str(REPO / "cases"),  # as the launch sets it: import harness
            "PYTHONUNBUFFERED": "1",
        }

    def workload_argv(self, run_dir: Path) -> list[str]:
        entry = self.work.cases_dir / self.work.case / self.entry
        return [
            sys.executable,
            str(entry),
            "--config",
            str(self.config),
            "--data-dir",
            str(self.data / self.work.case),
            "--run-dir",
            str(run_dir),
        ]

    def run(self, way: str) -> dict:
        self.n += 1
        name = f"fleetperf-peer-{os.getpid()}-{self.n}"
        entry = f"{self.work.case}/{self.entry}"
        if way.startswith("fleetperf"):
            results = self.results(way)
            earlier = set((results / "runs").iterdir())
            if way == "fleetperf" or self.before is None:
                out = measured(self.fleetperf_argv(results), self.env, entry, name)
            else:  # the same command from the earlier source tree
                env = {**self.env, "PYTHONPATH": str(self.before)}
                out = measured(self.fleetperf_argv(results), env, entry, name, self.before)
            (run_dir,) = set((results / "runs").iterdir()) - earlier
            events = results / "hosts" / "localhost" / run_dir.name / "events.jsonl"
        else:
            run_dir = self.tmp / f"{way}-{self.n}"
            run_dir.mkdir()
            events = run_dir / "events.jsonl"
            argv = self.workload_argv(run_dir)
            env = {**os.environ, **self.workload_env}
            if way == "reframe":
                test = run_dir / "peer_test.py"
                test.write_text(
                    REFRAME_TEST.format(
                        executable=argv[0], opts=argv[1:], env=self.workload_env, events=str(events)
                    )
                )
                argv = [str(self.rfm), "-c", str(test), "-r", "--prefix", str(run_dir / "rfm")]
                # its log file (rfm-*.log, kept after the run) goes with the run's files
                env = {**os.environ, "TMPDIR": str(run_dir)}
                env.pop("PYTHONPATH", None)
            out = measured(argv, env, entry, name)
        if out["rc"] != 0 or not events.exists():
            raise SystemExit(f"{way}: exit {out['rc']}\n{out['output']}")
        metrics = result_event(events)["metrics"]
        return {**out, "p_core": metrics["p_core"], "overhead": out["wall"] - metrics["e2e_time"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="emitter rounds")
    ap.add_argument("--distilbert-rounds", type=int, default=4)
    ap.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="a fourth way, fleetperf-before: fleetperf from this source tree (e.g. `git"
        " archive COMMIT | tar -x -C DIR`), run with this venv, for a before/after in one run",
    )
    args = ap.parse_args()
    ways = WAYS + (("fleetperf-before",) if args.before else ())
    if os.geteuid() != 0:
        raise SystemExit("peer_overhead: needs root for its cgroups")
    rfm = reframe()
    version = subprocess.run([str(rfm), "-V"], capture_output=True, text=True, check=True)
    print(f"reframe {version.stdout.strip()}; load {uptime()}")
    for label, rounds in (("emitter", args.rounds), ("distilbert", args.distilbert_rounds)):
        if rounds < 1:
            continue
        with tempfile.TemporaryDirectory(prefix="fleetperf-peer-") as tmp:
            bench = Bench(Path(tmp), WORKLOADS[label], rfm, args.before)
            bench.prepare()
            print(
                f"\n{label}: {bench.work.case} cpu/CPUx1x1 {' '.join(bench.work.sets)}, "
                f"{rounds} rounds, order rotating"
            )
            print(
                "round  way               p_core   wall s  overhead s  controller CPU s"
                "  workload CPU s  load (1/5/15 min)"
            )
            rows: dict[str, list[dict]] = {w: [] for w in ways}
            for r in range(rounds):
                for way in ways[r % len(ways) :] + ways[: r % len(ways)]:
                    row = bench.run(way)
                    rows[way].append(row)
                    print(
                        f"{r + 1:5}  {way:16}  {row['p_core']:7.2f}  {row['wall']:6.2f}  "
                        f"{row['overhead']:10.2f}  {row['controller_cpu']:16.2f}  "
                        f"{row['workload_cpu']:14.2f}  {uptime()}",
                        flush=True,
                    )
            print(f"{label} medians (min-max):")
            for way in ways:
                p_core, over, ctl, wl = (
                    span([x[key] for x in rows[way]])
                    for key in ("p_core", "overhead", "controller_cpu", "workload_cpu")
                )
                print(
                    f"  {way:16}  p_core {p_core}  overhead {over} s  controller CPU {ctl} s"
                    f"  workload CPU {wl} s"
                )
    print(f"\nload at the end {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
