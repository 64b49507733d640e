"""``fleetperf qualify`` run after run on ``fleet up 4`` (issue 42's "5 runs in a row"):
untouched, one host at 30 % of the machine's CPU, one host's link rate-limited. One line
per qualification (exit status, the FLAGGED lines, verdict counts, seconds) and a summary
per scenario. As tests/fleet/test_qualify_fleet.py, each host's processes sit in a cgroup of
their own at a high cpu.shares, so that the quota is what differs, not the machine's other
load. As root, on a machine where ``fleetperf fleet up`` works.

    .venv/bin/python benchmarks/qualify_repeat.py [--runs 5] [--scenarios untouched,cpu,link]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOSTS = ("node1", "node2", "node3", "node4")
PRIORITY = 65536  # cpu.shares of each host's group
CPU = ["--case", "base-computation/CPUx1x1", "--set", "iterations=200"]
LINK = ["--case", "base-interconnect/CPUx2x1-p2p", "--set", "melements=1", "--budget", "120"]
SCENARIOS = {  # name: (--cpu per host, --link-rate per host, qualify's arguments)
    "untouched": ({}, {}, CPU),
    "cpu": ({"node3": "0.3"}, {}, CPU),
    "link": ({}, {"node2": "64mbit"}, [*CPU, *LINK, "--repeat", "2"]),
}


def fleetperf(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tui.cli", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def prepare(workdir: Path, cpu: dict[str, str], link: dict[str, str]) -> None:
    for host in HOSTS:
        fleetperf("fleet", "restore", host, "--dir", str(workdir))
        args = ["--cpu", cpu.get(host, "1")] + (["--link-rate", link[host]] if host in link else [])
        done = fleetperf("fleet", "degrade", host, *args, "--dir", str(workdir))
        if done.returncode:
            raise SystemExit(done.stderr)
        group = Path(done.stdout.split("cgroup ")[1].split(")")[0])
        (group / "cpu.shares").write_text(f"{PRIORITY}\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="qualify-repeat-") as tmp:
        workdir, results = Path(tmp) / "fleet", Path(tmp) / "results"
        up = fleetperf("fleet", "up", "4", "--dir", str(workdir))
        if up.returncode:
            raise SystemExit(up.stderr)
        try:
            for name in args.scenarios.split(","):
                cpu, link, extra = SCENARIOS[name]
                prepare(workdir, cpu, link)
                codes = []
                for i in range(args.runs):
                    began = time.monotonic()
                    out = fleetperf(
                        "qualify", "-i", str(workdir / "inventory.yml"),
                        "--results", str(results), "--format", "json", *extra,
                    )  # fmt: skip
                    took = time.monotonic() - began
                    codes.append(out.returncode)
                    flagged = [x for x in out.stderr.splitlines() if x.startswith("FLAGGED")]
                    try:
                        rows = json.loads(out.stdout)["verdicts"]
                    except (json.JSONDecodeError, KeyError):
                        rows = []
                    verdicts = Counter(v["verdict"] for v in rows)
                    medians = {v["host"]: round(v["median"], 4) for v in rows if v["median"]}
                    print(
                        f"{name} {i + 1}/{args.runs}: exit {out.returncode} in {took:.0f} s;"
                        f" verdicts {dict(verdicts)}; medians {medians};"
                        f" flagged {flagged or 'none'}",
                        flush=True,
                    )
                    if out.returncode not in (0, 3):
                        print(out.stderr[-2000:], flush=True)
                print(f"{name}: exits {codes}", flush=True)
        finally:
            fleetperf("fleet", "down", "--dir", str(workdir))


if __name__ == "__main__":
    main()
