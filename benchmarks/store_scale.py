"""10,000 runs in the results store: ``fleetperf results`` and ``fleetperf report`` on
SQLite and on PostgreSQL (issue 31).

Builds N judged synthetic records into a SQLite store with benchmarks/report_scale.py's
builder, moves them into a throwaway PostgreSQL cluster (made as tests/pgcluster.py makes
its own: initdb in a temporary directory, its own port and socket, removed after) with
``fleetperf store export`` and ``store import``, then times each command on each store, a
fresh process each time, the median of --repeat.

    PYTHONPATH=. .venv/bin/python benchmarks/store_scale.py --runs 10000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from report_scale import build_store

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import pgcluster  # noqa: E402 (tests/ is not a package)


@contextmanager
def postgresql() -> Iterator[pgcluster.Cluster]:
    """A cluster of its own, as the tests' fixture makes one; stopped and removed after."""
    bin_dir = pgcluster.pg_bin()
    if bin_dir is None:
        raise SystemExit(f"PostgreSQL is not installed ({pgcluster.PG_ROOT}): scripts/bootstrap")
    base = pgcluster._owned_tempdir("fleetperf-bench-pg-")
    data, sock, log, pwfile = base / "data", base / "sock", base / "log", base / "pw"
    try:
        pwfile.write_text(pgcluster.PASSWORD + "\n")
        sock.mkdir()
        if os.geteuid() == 0:
            for path in (pwfile, sock):
                shutil.chown(path, pgcluster.USER, pgcluster.USER)
        initdb = [bin_dir / "initdb", "-D", data, "-U", pgcluster.USER, "--auth-local=trust"]
        initdb += ["--auth-host=scram-sha-256", f"--pwfile={pwfile}", "--encoding=UTF8"]
        subprocess.run(pgcluster._as_owner(initdb), check=True, capture_output=True)
        cluster = pgcluster._start(bin_dir, data, sock, log)
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def fleetperf(*args: str) -> float:
    """Seconds one ``fleetperf`` command took, in a fresh process."""
    argv = [sys.executable, "-m", "tui.cli", *args]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3, help="times each command is timed")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetperf-store-") as tmp, postgresql() as pg:
        results = Path(tmp)
        t0 = time.perf_counter()
        build_store(results, args.runs)
        print(
            f"SQLite store: {args.runs} runs built and judged in {time.perf_counter() - t0:.1f} s"
        )
        sqlite, dump = str(results / "fleetperf.sqlite"), str(results / "runs.jsonl")
        team = pg.create_database("fleetperf")
        moved = {
            "store export (SQLite)": fleetperf("store", "export", "--store", sqlite, "-o", dump),
            "store import (PostgreSQL)": fleetperf("store", "import", dump, "--store", team),
        }
        print(f"export {Path(dump).stat().st_size / 2**20:.1f} MiB")
        for what, took in moved.items():
            print(f"{what}: {took:.2f} s")
        commands = {
            "results (passed runs, md)": ("results",),
            "results --status all --format json": (
                "results",
                "--status",
                "all",
                "--format",
                "json",
            ),
            "report": ("report", "--results", str(results), "-o", str(results / "page.html")),
        }
        print(f"\n| command ({args.runs:,} runs) | SQLite | PostgreSQL |\n| --- | --- | --- |")
        for name, command in commands.items():
            times = [
                statistics.median(fleetperf(*command, "--store", where) for _ in range(args.repeat))
                for where in (sqlite, team)
            ]
            print(f"| `{name}` | {times[0]:.2f} s | {times[1]:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
