"""The inventory read in this process (tui/engine/inventory.py) is what
``ansible-inventory --list --playbook-dir playbooks`` prints: the groups and every host's
variables merged the same way (the playbooks' group_vars, group_vars and host_vars beside
the inventory, templates left unrendered), for the repository's inventories and a fleet's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tui.core.errors import InventoryError
from tui.core.paths import REPO_ROOT
from tui.engine.inventory import load_inventory
from tui.executors.ansiblerun import PLAYBOOKS, ansible_env
from tui.localfleet.fleet import Fleet, Host, fleet_inventory

INVENTORIES = [
    REPO_ROOT / "inventory" / "local.yml",
    *sorted(REPO_ROOT.glob("inventory/examples/*")),
]


def ansible_inventory_list(path: Path) -> dict:
    """What the ``ansible-inventory`` command prints, its encoder's profile name left out."""
    argv = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(path), "--list"]
    argv += ["--playbook-dir", str(PLAYBOOKS)]
    out = subprocess.run(argv, env=ansible_env(), capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    del data["_meta"]["profile"]
    return data


def read_in_process(path: Path) -> dict:
    inv = load_inventory(path)
    return {**inv.groups, "_meta": {"hostvars": inv.hostvars}}


@pytest.mark.parametrize("path", INVENTORIES, ids=lambda p: p.name)
def test_the_repositorys_inventories_read_as_ansible_inventory_lists_them(path: Path) -> None:
    got = read_in_process(path)
    assert got == ansible_inventory_list(path)
    assert got["_meta"]["hostvars"], "an inventory with hosts: the comparison compares something"


def test_a_fleets_inventory_with_vars_beside_it_reads_as_ansible_inventory_lists_it(
    tmp_path: Path,
) -> None:
    fleet = Fleet(tmp_path / "fleet")  # not started: only its inventory is wanted
    for n in range(3):
        fleet.hosts[f"node{n}"] = Host(
            f"node{n}", f"ns{n}", f"10.9.0.{n + 2}", tmp_path / f"node{n}", 0, fleet
        )
    inventory = fleet_inventory(fleet)
    inventory["all"]["children"]["nvidia"] = {"hosts": {"node2": {"fleetperf_devices": 8}}}
    path = tmp_path / "inv" / "fleet.yml"
    (path.parent / "group_vars").mkdir(parents=True)
    (path.parent / "host_vars").mkdir()
    path.write_text(yaml.safe_dump(inventory))
    # beside the inventory: a group's vars, a host's over them
    (path.parent / "group_vars" / "cpu.yml").write_text("shared: group\n")
    (path.parent / "host_vars" / "node1.yml").write_text("shared: host\n")
    got = read_in_process(path)
    assert got == ansible_inventory_list(path)
    assert got["_meta"]["hostvars"]["node1"]["shared"] == "host"
    assert got["_meta"]["hostvars"]["node0"]["shared"] == "group"
    assert got["nvidia"] == {"hosts": ["node2"]}


def test_an_inventory_no_plugin_parses_reads_as_ansible_inventory_does_and_prints_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.yml"
    path.write_text("all:\n  hosts:\n    a: {x: 1\n")
    got = read_in_process(path)
    assert (
        got
        == ansible_inventory_list(path)
        == {
            "all": {"children": ["ungrouped"]},
            "_meta": {"hostvars": {}},
        }
    )
    capfd.readouterr()
    load_inventory(path)
    assert capfd.readouterr() == ("", "")  # ansible's warnings stay off the terminal


def test_a_missing_inventory_is_one_message(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"inventory .*nowhere\.yml: no such file$"):
        load_inventory(tmp_path / "nowhere.yml")
