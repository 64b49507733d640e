"""``fleetperf fleet``: ``up N [--slurm]``, ``down``, and the test tools ``degrade HOST``
and ``restore HOST`` (their arguments: tui/cli.py). The hosts are tui/localfleet/hosts.py,
their inventory inventory.py, the Slurm cluster slurm.py, the faults degrade.py."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from tui.localfleet import degrade
from tui.localfleet.hosts import STATE, Fleet, Host, available
from tui.localfleet.inventory import INVENTORY, fleet_inventory
from tui.localfleet.slurm import LOGIN, slurm_available, slurm_inventory, start_slurm

DEFAULT_DIR = Path(tempfile.gettempdir()) / "fleetperf-fleet"


def up(count: int, workdir: Path, slurm: bool = False) -> Path:
    """Bring up ``count`` hosts (node1..nodeN) in ``workdir``; returns the inventory path.
    With ``slurm``, a login host too, and a Slurm cluster of them all."""
    if (workdir / STATE).exists():
        raise RuntimeError(f"a fleet is up in {workdir} (fleetperf fleet down --dir {workdir})")
    fleet = Fleet(workdir, prefix="fl")
    try:
        fleet.start()
        login = fleet.add_host(LOGIN) if slurm else None
        nodes = [fleet.add_host(f"node{i}") for i in range(1, count + 1)]
        if login:
            start_slurm(fleet, login, nodes)
    except BaseException:
        fleet.close()
        raise
    inventory = fleet.workdir / INVENTORY
    found = slurm_inventory(fleet, login) if login else fleet_inventory(fleet)
    inventory.write_text(yaml.safe_dump(found, sort_keys=False))
    return inventory


def down(workdir: Path) -> int:
    """Tear down the fleet in ``workdir``; returns how many hosts it had."""
    if not (workdir / STATE).exists():
        raise RuntimeError(f"no fleet is up in {workdir}")
    fleet = Fleet.load(workdir)
    count = len(fleet.hosts)
    fleet.close()
    for name in (INVENTORY, "client_key", "client_key.pub", "known_hosts"):
        (workdir / name).unlink(missing_ok=True)
    shutil.rmtree(workdir / "hosts", ignore_errors=True)
    shutil.rmtree(workdir / "slurm", ignore_errors=True)
    shutil.rmtree(workdir / "runs", ignore_errors=True)
    return count


def main(action: str, workdir: Path, count: int = 0, slurm: bool = False) -> int:
    """``fleetperf fleet up N [--slurm] [--dir DIR]`` and ``fleetperf fleet down [--dir DIR]``
    (their arguments: tui/cli.py)."""
    reason = available()
    if reason:
        print(f"fleetperf fleet: error: {reason}", file=sys.stderr)
        return 2
    try:
        if action == "up":
            if not 1 <= count <= 253:
                print("fleetperf fleet: error: N: 1 to 253 hosts", file=sys.stderr)
                return 2
            if slurm and (reason := slurm_available()):
                print(f"fleetperf fleet: error: {reason}", file=sys.stderr)
                return 2
            print(up(count, workdir, slurm))
        else:
            print(f"fleetperf fleet: {down(workdir)} host(s) down in {workdir}")
    except RuntimeError as exc:
        print(f"fleetperf fleet: error: {exc}", file=sys.stderr)
        return 2
    return 0


def degrade_main(
    action: str, workdir: Path, name: str, cpu: str | None = None, link_rate: str | None = None
) -> int:
    """Test tools: ``fleetperf fleet degrade HOST [--cpu FRACTION] [--link-rate RATE]`` and
    ``fleetperf fleet restore HOST`` (their arguments: tui/cli.py)."""
    try:
        if action == "degrade" and cpu is None and link_rate is None:
            raise degrade.DegradeError(f"degrade {name}: give --cpu FRACTION, --link-rate RATE")
        fraction = None if cpu is None else degrade.parse_fraction(cpu)
        bits = None if link_rate is None else degrade.parse_rate(link_rate)
        host = _host(workdir, name)
        if action == "restore":
            degrade.restore(host)
            print(f"fleetperf fleet: {name}: restored (no CPU quota, no link rate)")
            return 0
        if fraction is not None:
            group, quota, cpus = degrade.limit_cpu(host, fraction)
            print(
                f"fleetperf fleet: {name}: CPU quota {fraction:g} of {cpus} CPU(s)"
                f" ({quota}/{degrade.PERIOD_US} us, cgroup {group})"
            )
        if bits is not None:
            degrade.limit_link(host, bits)
            print(f"fleetperf fleet: {name}: link rate {bits} bit/s both ways (tc tbf)")
    except (degrade.DegradeError, RuntimeError, OSError) as exc:  # OSError: a cgroup file
        print(f"fleetperf fleet: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _host(workdir: Path, name: str) -> Host:
    """The host ``name`` of the fleet up in ``workdir``; DegradeError naming the others."""
    reason = available()
    if reason:
        raise degrade.DegradeError(reason)
    if not (workdir / STATE).exists():
        raise degrade.DegradeError(f"no fleet is up in {workdir}")
    fleet = Fleet.load(workdir)
    if name not in fleet.hosts:
        raise degrade.DegradeError(
            f"no host {name!r} in the fleet in {workdir} (its hosts: {', '.join(fleet.hosts)})"
        )
    return fleet.hosts[name]
