"""Submit-to-first-event overhead of the Slurm executor against the process executor,
on the same two hosts of a local Slurm cluster (``fleetperf fleet up 2 --slurm``).

Each run is the torch-free emitter case, ``cpu/CPUx2x1`` with 4 steps, through the
engine (tui/engine/session.py), once per executor in turn: through the login host as a Slurm
job, and started on node1 and node2 directly by the process executor. Measured from
``Session.start`` to the first workload event (the ``start`` record of a node) and to
the run's end, median and range over ``--repeat`` runs of each.

    python benchmarks/slurm_overhead.py --repeat 5          # as root: brings a cluster up
    python benchmarks/slurm_overhead.py --fleet /tmp/fleetperf-fleet   # one that is up
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tui.core.events import Event, RunFinished, WorkloadStarted  # noqa: E402
from tui.engine.session import Session  # noqa: E402
from tui.localfleet import fleet as localfleet  # noqa: E402
from tui.localfleet import slurm  # noqa: E402
from tui.localfleet.hosts import Fleet  # noqa: E402
from tui.localfleet.inventory import INVENTORY, fleet_inventory  # noqa: E402


def process_inventory(workdir: Path) -> Path:
    """The cluster's nodes as process-executor hosts, with run roots of their own."""
    fleet = Fleet.load(workdir)
    nodes = [h for h in fleet.hosts.values() if h.name != slurm.LOGIN]
    found = fleet_inventory(fleet)
    hosts = found["all"]["children"]["cpu"]["hosts"]
    for name in list(hosts):
        if name not in {n.name for n in nodes}:
            del hosts[name]
    path = workdir / "process-inventory.yml"
    path.write_text(yaml.safe_dump(found, sort_keys=False))
    return path


def one_run(inventory: Path, tmp: Path) -> tuple[float, float, str]:
    """Seconds to the first workload event and to the end, and the run's status."""
    session = Session(
        inventory,
        tmp / "results",
        tmp / "data",
        cases_dir=REPO / "tests" / "fixtures" / "cases",
    )
    first, done = threading.Event(), threading.Event()
    marks: dict[str, float] = {}
    status = {}

    def on_event(ev: Event) -> None:
        if isinstance(ev, WorkloadStarted) and not first.is_set():
            marks["first"] = time.monotonic()
            first.set()
        elif isinstance(ev, RunFinished):
            marks["end"] = time.monotonic()
            status["status"] = ev.status
            done.set()

    try:
        plans = session.plan([("emitter", "cpu/CPUx2x1")], {"steps": 4})
        t0 = time.monotonic()
        batch = session.start(plans)
        batch.subscribe(on_event)
        batch.wait()
    finally:
        session.close()
    return marks.get("first", float("nan")) - t0, marks["end"] - t0, status["status"]


def summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):5.2f} s (min {min(values):.2f}, max {max(values):.2f})"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--fleet", type=Path, help="a fleet up with --slurm (default: bring one up)")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fleetperf-slurm-bench-"))
    workdir = args.fleet or tmp / "fleet"
    if args.fleet is None:
        localfleet.up(2, workdir, slurm=True)
    try:
        (tmp / "data" / "emitter").mkdir(parents=True)
        (tmp / "data" / "emitter" / "marker").write_text("staged\n")
        inventories = {
            "slurm": workdir / INVENTORY,
            "process": process_inventory(workdir),
        }
        seen: dict[str, list[tuple[float, float]]] = {k: [] for k in inventories}
        for _ in range(args.repeat):
            for executor, inventory in inventories.items():
                first, end, status = one_run(inventory, tmp)
                if status != "passed":
                    print(f"{executor}: run {status}", file=sys.stderr)
                    return 1
                seen[executor].append((first, end))
        for executor, runs in seen.items():
            print(f"{executor:8} first event: {summary([f for f, _ in runs])}")
            print(f"{executor:8} whole run:   {summary([e for _, e in runs])}")
    finally:
        if args.fleet is None:
            localfleet.down(workdir)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
