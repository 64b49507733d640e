"""Planning with Slurm login hosts: one login host per run, Slurm picks the nodes; a group
that mixes login hosts with other hosts is refused, naming the group."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_inventory

from tui.catalog import catalog
from tui.core.errors import InventoryError
from tui.engine import inventory

LOGIN = {"ansible_host": "login01.example", "fleetperf_executor": "slurm"}


def spec(tmp_path: Path, nnodes: int) -> catalog.RunSpec:
    cases = Path(__file__).parents[1] / "fixtures" / "cases"
    case = catalog.load_case("emitter", cases)
    return catalog.resolve(case, catalog.load_config(case, f"cpu/CPUx{nnodes}x1"), {})


def test_a_slurm_group_gives_one_login_host(tmp_path: Path) -> None:
    path = write_inventory(tmp_path / "inv.yml", {"login01": LOGIN, "login02": LOGIN})
    inv = inventory.load_inventory(path)
    # Two nodes from Slurm, through one login host: the least used one.
    assert inventory.select_hosts(inv, spec(tmp_path, 2)) == ["login01"]
    assert inventory.select_hosts(inv, spec(tmp_path, 2), {"login01": 1}) == ["login02"]
    assert inventory.executor_of(inv, "login01") == "slurm"


def test_a_group_mixing_slurm_and_ssh_hosts_is_refused(tmp_path: Path) -> None:
    hosts = {"login01": LOGIN, "node9": {"ansible_host": "10.0.0.9"}}
    path = write_inventory(tmp_path / "inv.yml", hosts)
    with pytest.raises(InventoryError) as err:
        inventory.select_hosts(inventory.load_inventory(path), spec(tmp_path, 1))
    assert str(err.value) == (
        f"inventory {path}: group 'cpu' mixes Slurm login hosts (login01) with other hosts:"
        " give Slurm a group of its own"
    )
