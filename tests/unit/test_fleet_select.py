"""The engine's pure decisions: which hosts a run gets, and what its outcome is.

Inventories are in the shape `ansible-inventory --list` gives (tests/engine/test_session.py loads
real ones through ansible); specs come from the real catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.catalog import catalog
from tui.catalog.catalog import RunSpec
from tui.core.errors import InventoryError
from tui.core.events import CaseResult
from tui.engine.inventory import Inventory, select_hosts
from tui.executors.base import new_run_id, run_status
from tui.executors.tracker import _synthetic


def inventory(hosts: dict[str, dict], children: dict[str, list[str]] | None = None) -> Inventory:
    groups: dict = {"nvidia": {"hosts": list(hosts)}}
    for name, members in (children or {}).items():
        groups[name] = {"hosts": members}
        groups["nvidia"].setdefault("children", []).append(name)
    return Inventory(path=Path("inv.yml"), groups=groups, hostvars=hosts)


def spec(ref: str) -> RunSpec:
    case = catalog.load_case("distilbert-pytorch")
    return catalog.resolve(case, catalog.load_config(case, ref))


EIGHT = {"fleetperf_chip": "A100", "fleetperf_devices": 8}


def test_exactly_nnodes_hosts_in_inventory_order() -> None:
    inv = inventory({f"n{i}": EIGHT for i in range(5)})
    assert select_hosts(inv, spec("nvidia/A100x2x8")) == ["n0", "n1"]
    assert select_hosts(inv, spec("nvidia/A100x1x8")) == ["n0"]


def test_the_least_used_hosts_are_chosen_and_the_master_stays_first() -> None:
    inv = inventory({f"n{i}": EIGHT for i in range(4)})
    used = {"n0": 2, "n1": 1, "n2": 0, "n3": 1}
    # n2 (never used) and n1 (first of the once-used): in inventory order, n1 leads
    assert select_hosts(inv, spec("nvidia/A100x2x8"), used) == ["n1", "n2"]
    # a host the count does not mention was never used: the same as a count of 0
    assert select_hosts(inv, spec("nvidia/A100x1x8"), {"n0": 0}) == ["n0"]


def test_chip_and_device_count_decide_and_unset_vars_do_not_exclude() -> None:
    inv = inventory(
        {
            "h100": {"fleetperf_chip": "H100", "fleetperf_devices": 8},
            "lower": {"fleetperf_chip": "a100", "fleetperf_devices": 8},  # case-insensitive
            "seven": {"fleetperf_chip": "A100", "fleetperf_devices": 7},
            "exact": {"fleetperf_chip": "A100", "fleetperf_devices": "8"},  # as YAML may give
            "unset": {},
            "templated": {"fleetperf_chip": "{{ detected_chip }}"},  # only a play renders it
        }
    )
    assert inv.candidates("nvidia", "A100", 8) == ["lower", "exact", "unset", "templated"]
    assert inv.candidates("nvidia", "A100", 1) == ["lower", "seven", "exact", "unset", "templated"]


def test_child_groups_count_once() -> None:
    inv = inventory({"a": EIGHT, "b": EIGHT}, children={"rack1": ["b", "c"], "rack2": ["c", "d"]})
    assert inv.group_hosts("nvidia") == ["a", "b", "c", "d"]
    assert inv.group_hosts("missing") == []


def test_too_few_hosts_says_how_many_and_which() -> None:
    inv = inventory({"n0": EIGHT, "small": {"fleetperf_chip": "A100", "fleetperf_devices": 1}})
    with pytest.raises(InventoryError) as err:
        select_hosts(inv, spec("nvidia/A100x2x8"))
    assert str(err.value) == (
        "inventory inv.yml: group 'nvidia' has 1 host(s) with chip A100 and 8+ devices, "
        "the config needs 2"
    )
    all_fit = inventory({"n0": EIGHT})  # every host fits: nothing to qualify
    needs_two = r"group 'nvidia' has 1 host\(s\), the config needs 2$"
    with pytest.raises(InventoryError, match=needs_two):
        select_hosts(all_fit, spec("nvidia/A100x2x8"))
    bare = inventory({"only": {}})
    with pytest.raises(InventoryError, match=r"has 1 host\(s\), the config needs 2$"):
        select_hosts(bare, spec("nvidia/A100x2x8"))


def _result(status: str, message: str = "") -> CaseResult:
    return CaseResult("r", "h", 0, 1.0, status, status == "passed", {}, [], message, {})


BASE = {
    "cancelled": False,
    "bad_input": None,
    "launched": True,
    "rc": 0,
    "runner_status": "successful",
    "result": _result("passed"),
    "errors": [],
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, ("passed", None)),
        # the workload passed, then the play failed (a stop, a fetch): not a pass
        (
            {"rc": 2, "runner_status": "failed", "errors": ["host h: failed: fetch: no space"]},
            ("failed", "host h: failed: fetch: no space"),
        ),
        ({"rc": 2, "runner_status": "failed"}, ("failed", "ansible-runner ended failed")),
        (
            {"result": None, "errors": ["host a: first", "host b: then"]},
            ("failed", "host a: first"),
        ),
        ({"result": None, "errors": ["host h: rank 1: boom"]}, ("failed", "host h: rank 1: boom")),
        ({"result": None, "runner_status": "timeout"}, ("failed", "ansible-runner ended timeout")),
        (
            {"result": _result("failed", "target acc 0.9 not reached")},
            ("failed", "target acc 0.9 not reached"),
        ),
        ({"result": _result("failed")}, ("failed", "the workload reported failed")),
        ({"cancelled": True}, ("aborted", "aborted by the operator")),
        (
            {"launched": False, "bad_input": "host h: missing /d"},
            ("bad_input", "host h: missing /d"),
        ),
        # once a workload ran, a host failing is the run's failure, not bad input
        (
            {"bad_input": "host h: gone", "result": None, "errors": ["host h: gone"]},
            ("failed", "host h: gone"),
        ),
    ],
)
def test_run_status(change: dict, expected: tuple) -> None:
    assert run_status(**{**BASE, **change}) == expected


def test_synthetic_if_any_host_real_only_if_all_say_so() -> None:
    assert _synthetic([False, True, None]) is True
    assert _synthetic([False, False]) is False
    assert _synthetic([False, None]) is None
    assert _synthetic([]) is None


def test_run_ids_planned_in_one_second_never_repeat() -> None:
    """Four hex digits collide among a 32-run batch's ids 0.8 % of the time (issue 23)."""
    ids = [new_run_id("emitter") for _ in range(3000)]
    assert len(set(ids)) == len(ids)
