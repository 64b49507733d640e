"""The inventory of a local fleet's SSH hosts (``fleetperf fleet up N`` writes it)."""

from __future__ import annotations

import sys

from tui.core.paths import REPO_ROOT
from tui.localfleet.hosts import Fleet

INVENTORY = "inventory.yml"


def fleet_inventory(fleet: Fleet) -> dict:
    """Group cpu, executor process, this repository and interpreter, a run root per host;
    data comes from the controller's data root, as in inventory/local.yml."""
    hosts = list(fleet.hosts.values())
    host_vars = {
        h.name: {
            "fleetperf_executor": "process",
            "fleetperf_addr": h.address,
            "fleetperf_repo_dir": str(REPO_ROOT),
            "fleetperf_python": sys.executable,
            "fleetperf_data_root": (
                "{{ fleetperf_controller_data_root | default('" + str(REPO_ROOT / "data") + "') }}"
            ),
            "fleetperf_run_root": str(h.root / "runs"),
        }
        for h in hosts
    }
    return fleet.inventory({"cpu": hosts}, host_vars)
