"""What ``fleetperf fleet`` does: ``up N [--slurm]``, ``down``, and the host the test tools
``degrade HOST`` and ``restore HOST`` act on (the command, its arguments and output:
tui/commands/fleet.py). The hosts are tui/localfleet/hosts.py, their inventory inventory.py,
the Slurm cluster slurm.py, the faults degrade.py."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from tui.localfleet import degrade
from tui.localfleet.hosts import STATE, Fleet, Host, available
from tui.localfleet.inventory import INVENTORY, fleet_inventory
from tui.localfleet.slurm import LOGIN, slurm_inventory, start_slurm

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


def fleet_host(workdir: Path, name: str) -> Host:
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
