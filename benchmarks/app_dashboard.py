"""The run dashboard under a synthetic event storm: worst event-loop lag and memory growth.

A feeder thread calls the feed the way the engine does (``RunFeed.push`` from an engine
thread) with ``--rate`` MetricSample events per second spread over ``--hosts`` hosts of one
run, for ``--seconds``, while the app (headless, the Runs screen showing that run) refreshes
its table, charts and log every tick. A probe on the app's event loop measures how late a
50 ms sleep wakes up; RSS is sampled every 5 s. Each stall over 50 ms is listed with when
it happened and the garbage collections that ran inside it (timed through ``gc.callbacks``),
so a stall can be told from a collection, a redraw or a wait for the CPU.

``--foreign N`` (issue 39 point 9) first fills the store with N runs that a controller on
another machine has as running, each started in the last minute (what a team store full
of dead controllers' runs, or a hostile writer, looks like): the screen asks the store for
them every 2 s while the storm goes on; the benchmark says how many threads follow them.

    .venv/bin/python benchmarks/app_dashboard.py [--seconds 60] [--rate 5000] [--hosts 64]
                                                 [--foreign 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil

from tui.app.app import AppConfig, FleetperfApp
from tui.core import paths
from tui.core.events import MetricSample, RunStarted
from tui.core.liveness import Lease
from tui.results.record import RunRecord
from tui.results.store import ResultStore

RUN = "bench-run"
PROBE_S = 0.05
STALL_S = 0.05  # a lag above this is listed with its time and the collections inside it


class GcTimer:
    """Times every garbage collection: (start since t0, generation, seconds)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.runs: list[tuple[float, int, float]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._began = now
        else:
            self.runs.append((self._began - self.t0, info["generation"], now - self._began))

    def inside(self, a: float, b: float) -> list[tuple[float, int, float]]:
        return [r for r in self.runs if a <= r[0] <= b]


def feeder(
    app: FleetperfApp, hosts: list[str], rate: int, seconds: float, stop: threading.Event
) -> int:
    """Push ``rate`` events/s in 10 ms batches; returns how many it pushed."""
    per_batch, sent, step = max(rate // 100, 1), 0, 0
    start = time.monotonic()
    while not stop.is_set() and time.monotonic() - start < seconds:
        step += 1
        now = time.time()
        for i in range(per_batch):
            host = hosts[(sent + i) % len(hosts)]
            app.feed.push(
                MetricSample(
                    RUN,
                    host,
                    0,
                    now,
                    now,
                    step,
                    step * 32,
                    step * 4096,
                    1.0 / step,
                    1e-4,
                    320.0 + (step % 50),
                    30.5,
                    80.0,
                )
            )
        sent += per_batch
        # Keep the rate: sleep until this batch's slot ends.
        lag = start + step / 100 - time.monotonic()
        if lag > 0:
            time.sleep(lag)
    return sent


def foreign_runs(results: Path, n: int) -> set[str]:
    """``n`` runs another machine's controller has as running, started in the last minute."""
    owner = Lease(host="far-away", pid=4242).text()
    ids = set()
    with ResultStore(results / "fleetperf.sqlite") as store:
        for i in range(n):
            started = datetime.fromtimestamp(time.time() - 60 + i * 60 / n, UTC)
            run_id = f"{started:%Y%m%d-%H%M%S}-bench-{i:016x}"
            store.add(
                RunRecord(
                    run_id=run_id,
                    case="bench",
                    vendor="cpu",
                    config="CPUx1x1",
                    hosts=["far-node"],
                    status="running",
                    started=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    controller=owner,
                )
            )
            ids.add(run_id)
    return ids


async def bench(seconds: float, rate: int, n_hosts: int, foreign: int = 0) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fleetperf-bench-") as tmp_dir:
        return await _bench(Path(tmp_dir), seconds, rate, n_hosts, foreign)


async def _bench(
    tmp: Path, seconds: float, rate: int, n_hosts: int, foreign: int
) -> dict[str, float]:
    (tmp / "results").mkdir()
    foreign_ids = foreign_runs(tmp / "results", foreign) if foreign else set()
    config = AppConfig(paths.REPO_ROOT / "inventory" / "local.yml", tmp / "results", tmp / "data")
    app = FleetperfApp(config)
    hosts = [f"node-{i:02d}" for i in range(n_hosts)]
    proc = psutil.Process()
    lags: list[float] = []
    rss: list[tuple[float, float]] = []
    async with app.run_test(size=(160, 50)) as pilot:
        app.feed.add_run(RUN, "bench", "cpu/CPUx64x1", hosts, {"max_samples": 10**9})
        app.feed.push(RunStarted(RUN, "bench", "cpu/CPUx64x1", hosts, time.time()))
        await pilot.press("3")
        await pilot.pause(1.0)
        stop = threading.Event()
        result: list[int] = []
        thread = threading.Thread(
            target=lambda: result.append(feeder(app, hosts, rate, seconds, stop)), daemon=True
        )
        start, cpu0 = time.monotonic(), proc.cpu_times()
        load0 = psutil.getloadavg()[0]
        timer = GcTimer(start)
        stalls: list[tuple[float, float]] = []  # (probe start since start, lag)
        followers = 0  # the most threads seen following the foreign runs at once
        gc.callbacks.append(timer)
        thread.start()
        next_rss = start
        try:
            while thread.is_alive():
                t0 = time.monotonic()
                await asyncio.sleep(PROBE_S)
                lags.append(time.monotonic() - t0 - PROBE_S)
                if lags[-1] > STALL_S:
                    stalls.append((t0 - start, lags[-1]))
                if t0 >= next_rss:
                    rss.append((t0 - start, proc.memory_info().rss / 2**20))
                    next_rss += 5.0
                    names = {t.name for t in threading.enumerate()}
                    followers = max(followers, len(names & foreign_ids))
        finally:
            gc.callbacks.remove(timer)
        elapsed = time.monotonic() - start
        cpu1, load1 = proc.cpu_times(), psutil.getloadavg()[0]
        await pilot.pause(1.0)
        table = app.screen.query_one("#host-table")
        shown_rows = table.row_count
    warm = [m for t, m in rss if t >= 5.0] or [rss[-1][1]]
    return {
        "events": result[0],
        "events_per_s": result[0] / elapsed,
        "worst_lag_ms": max(lags) * 1000,
        "p99_lag_ms": statistics.quantiles(lags, n=100, method="inclusive")[98] * 1000,
        "median_lag_ms": statistics.median(lags) * 1000,
        "rss_start_mib": rss[0][1],
        "rss_after_5s_mib": warm[0],
        "rss_end_mib": rss[-1][1],
        "rss_growth_after_5s_mib": rss[-1][1] - warm[0],
        "rows": shown_rows,
        "cpu_share": (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / elapsed,
        "load": (load0, load1),
        "rss_series": rss,
        "stalls": [(t, lag, timer.inside(t, t + PROBE_S + lag)) for t, lag in stalls],
        "gc_runs": timer.runs,
        "foreign": len(foreign_ids),
        "followers": followers,
        "threads_end": threading.active_count(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--foreign", type=int, default=0, help="foreign running runs in the store")
    args = ap.parse_args()
    r = asyncio.run(bench(args.seconds, args.rate, args.hosts, args.foreign))
    print(
        f"events: {r['events']} in {args.seconds:.0f} s ({r['events_per_s']:.0f}/s) "
        f"from {args.hosts} hosts; table rows: {r['rows']}"
    )
    print(
        f"event-loop lag: worst {r['worst_lag_ms']:.1f} ms, p99 {r['p99_lag_ms']:.1f} ms, "
        f"median {r['median_lag_ms']:.1f} ms"
    )
    print(
        f"RSS: {r['rss_start_mib']:.1f} MiB at start, {r['rss_after_5s_mib']:.1f} MiB after 5 s,"
        f" {r['rss_end_mib']:.1f} MiB at the end"
        f" (growth after warm-up {r['rss_growth_after_5s_mib']:+.1f} MiB)"
    )
    print(
        f"process CPU: {r['cpu_share'] * 100:.0f}% of one core (feeder and app together);"
        f" machine load average {r['load'][0]:.1f} at start, {r['load'][1]:.1f} at the end"
    )
    print("RSS every 5 s (s, MiB): " + ", ".join(f"{t:.0f}:{m:.1f}" for t, m in r["rss_series"]))
    for gen in range(3):
        runs = [d for _, g, d in r["gc_runs"] if g == gen]
        if runs:
            print(
                f"gc generation {gen}: {len(runs)} collections, longest {max(runs) * 1000:.1f} ms,"
                f" {sum(runs) * 1000:.0f} ms in all"
            )
    if r["foreign"]:
        print(
            f"foreign running runs in the store: {r['foreign']}; threads following them:"
            f" at most {r['followers']} at once; threads of the process at the end:"
            f" {r['threads_end']}"
        )
    print(f"stalls over {STALL_S * 1000:.0f} ms: {len(r['stalls'])}")
    for t, lag, runs in r["stalls"]:
        inside = ", ".join(f"gen {g} {d * 1000:.0f} ms" for _, g, d in runs) or "no collection"
        print(f"  at {t:6.1f} s: {lag * 1000:.0f} ms ({inside})")


if __name__ == "__main__":
    main()
