"""The executors by kind (tui/executors/registry.py): one executor for each kind a host's
fleetperf_executor may name, the default written once for the controller and once for the
plays (and the two agree), and a kind no executor serves refused at planning, naming the
host and the variable."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from conftest import REPO, Fleetperf, local_host, write_inventory

from tui.core.errors import InventoryError, UsageError
from tui.engine import inventory
from tui.executors.base import DEFAULT_KIND, Executor
from tui.executors.play import Play
from tui.executors.registry import KINDS, executor_for


def test_each_kind_has_an_executor_with_the_protocols_methods() -> None:
    assert tuple(KINDS) == ("process", "docker", "slurm") and DEFAULT_KIND in KINDS
    wanted = {"run", "outcome", "discard", "stop", "cleanup"}
    for kind in KINDS:
        executor = executor_for(kind)
        assert executor is KINDS[kind].executor
        for name in wanted:
            assert inspect.signature(getattr(executor, name)) == inspect.signature(
                getattr(Executor, name)
            ), (kind, name)
    # Process and docker runs that start together share one play of run.yml.
    assert executor_for("process") is executor_for("docker") is Play


def test_an_unknown_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(UsageError, match="^executor 'k8s': not one of process, docker, slurm$"):
        executor_for("k8s")


def test_the_plays_default_is_the_controllers() -> None:
    """playbooks/group_vars/all.yml gives every host the default kind; an inventory's host
    var still wins, and the controller reads both as the plays do."""
    group_vars = yaml.safe_load((REPO / "playbooks" / "group_vars" / "all.yml").read_text())
    assert group_vars["fleetperf_executor"] == DEFAULT_KIND


def test_an_unknown_kind_in_the_inventory_is_refused_naming_the_host(tmp_path: Path) -> None:
    hosts = {"box1": {}, "box2": {"fleetperf_executor": "k8s"}}
    path = write_inventory(tmp_path / "inv.yml", hosts)
    inv = inventory.load_inventory(path)
    assert inventory.executor_of(inv, "box1") == DEFAULT_KIND
    with pytest.raises(InventoryError) as err:
        inventory.executor_of(inv, "box2")
    assert str(err.value) == (
        f"inventory {path}: host box2: fleetperf_executor 'k8s': not one of process, docker, slurm"
    )


@pytest.mark.slow  # the command line: ansible-inventory, no play
def test_the_command_line_refuses_it_in_one_line(emitter: Fleetperf, tmp_path: Path) -> None:
    host = {**local_host(emitter, "box"), "fleetperf_executor": "Docker"}
    path = write_inventory(tmp_path / "inv.yml", {"box": host})
    out = emitter.batch("emitter", "cpu/CPUx1x1", args=("-i", str(path)))
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()  # one line, no traceback
    assert line.endswith(
        f"inventory {path}: host box: fleetperf_executor 'Docker': not one of process, docker,"
        " slurm"
    )
    assert not (emitter.results / "runs").exists()  # nothing launched
