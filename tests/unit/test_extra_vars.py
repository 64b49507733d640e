"""The extra vars contract (playbooks/vars/extra_vars.yml): the dicts tui/executors/ builds
are what it declares, and the plays refuse extra vars that are not, before they touch a host.
The plays run for real (ansible-runner, the local inventory), with the extra vars tagged
!unsafe as the controller writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tui.catalog import catalog
from tui.core import paths
from tui.executors import ansiblerun
from tui.executors.base import Launch, controller_vars, new_run_id
from tui.executors.extravars import SPEC_FILE, declared, spec
from tui.executors.stop import stop_run

INVENTORY = paths.REPO_ROOT / "inventory" / "local.yml"
CHECK_TASK = "Check the controller's extra vars"
PREFLIGHT_TASK = "Check the host and take its lease"


def launch(tmp_path: Path) -> Launch:
    """A real run spec: the distilbert case on cpu/CPUx1x1, on localhost."""
    case = catalog.load_case("distilbert-pytorch")
    spec_ = catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"))
    return Launch(
        spec=spec_,
        run_id=new_run_id(case.name),
        hosts=["localhost"],
        inventory=INVENTORY,
        results_dir=tmp_path / "results",
        data_root=tmp_path / "data",  # empty: the preflight refuses, nothing is launched
    )


def play(tmp_path: Path, playbook: str, extravars: dict[str, Any]) -> tuple[int, dict[str, str]]:
    """ansible-playbook through the controller's runner; its rc and each failed task's msg.
    run.yml and stop.yml get ``extravars`` as localhost's run (fleetperf_runs)."""
    if playbook != "slurm.yml":
        extravars = {"fleetperf_runs": {"localhost": extravars}}
    failed: dict[str, str] = {}

    def on_event(raw: dict[str, Any]) -> bool:
        if raw.get("event") == "runner_on_failed":
            data = raw["event_data"]
            # A loop's message: its failed items' (run.yml checks each run's vars once).
            items = [r.get("msg", "") for r in data["res"].get("results", []) if r.get("failed")]
            failed[data["task"]] = " ".join(map(str, [data["res"].get("msg", ""), *items]))
        return False

    runner = ansiblerun.ansible_run(
        tmp_path / f"ansible-{Path(playbook).stem}-{len(list(tmp_path.glob('ansible-*')))}",
        INVENTORY,
        forks=5,
        playbook=str(ansiblerun.PLAYBOOKS / playbook),
        extravars=extravars,
        event_handler=on_event,
    )
    return runner.rc, failed


def test_the_run_dict_is_what_the_contract_declares(tmp_path: Path):
    values = launch(tmp_path).extravars()
    options = spec("run")
    assert set(values) <= set(options), "a var the contract lacks"
    assert {k for k, o in options.items() if o.get("required")} <= set(values)
    # stop.yml's vars are run.yml's (the same entries, never written twice).
    assert all(options[k] == o for k, o in spec("stop").items())
    # run.yml and stop.yml take them per host, for several runs at once.
    assert declared("plays", {"fleetperf_runs": {"localhost": values}})
    with pytest.raises(ValueError, match=f"{SPEC_FILE}: plays: fleetperf_runs: a list"):
        declared("plays", {"fleetperf_runs": [values]})


def test_the_controller_refuses_what_the_contract_lacks(tmp_path: Path):
    values = launch(tmp_path).extravars()
    with pytest.raises(ValueError, match=f"{SPEC_FILE}: run: fleetperf_new_var"):
        declared("run", {**values, "fleetperf_new_var": 1})
    with pytest.raises(ValueError, match="fleetperf_nnodes"):
        declared("run", {**values, "fleetperf_nnodes": "two"})
    missing = {k: v for k, v in values.items() if k != "fleetperf_fetch_dir"}
    with pytest.raises(ValueError, match="fleetperf_fetch_dir"):
        declared("stop", missing)


@pytest.mark.slow  # ansible-playbook, three times
def test_run_yml_checks_its_extra_vars_first(tmp_path: Path):
    run = launch(tmp_path)
    run_dir = run.results_dir / "hosts" / "localhost" / run.run_id
    good = run.extravars()

    # Missing, or of another type: the first task fails, naming it; no run dir is made.
    for bad, name in (
        ({k: v for k, v in good.items() if k != "fleetperf_nnodes"}, "fleetperf_nnodes"),
        ({**good, "fleetperf_controller": {"host": "ctl"}}, "pid"),
    ):
        rc, failed = play(tmp_path, "run.yml", bad)
        assert rc != 0 and list(failed) == [CHECK_TASK], failed
        assert name in failed[CHECK_TASK]
        assert not run_dir.exists()

    # As the controller builds them (tagged !unsafe): past the check, to the preflight.
    rc, failed = play(tmp_path, "run.yml", good)
    assert rc != 0 and list(failed) == ["Check the host and take its lease"], failed
    # Without fleetperf_runs (a run's vars as they are): ansible-playbook fails, naming it.
    runner = ansiblerun.ansible_run(
        tmp_path / "ansible-flat",
        INVENTORY,
        forks=5,
        playbook=str(ansiblerun.PLAYBOOKS / "run.yml"),
        extravars=good,
    )
    assert runner.rc != 0 and "fleetperf_runs" in runner.stdout.read()
    assert not run_dir.exists()
    assert (
        "stage it with: fleetperf prepare distilbert" in failed["Check the host and take its lease"]
    )


@pytest.mark.slow  # ansible-playbook, twice
def test_stop_yml_checks_its_extra_vars(tmp_path: Path):
    results, data = tmp_path / "results", tmp_path / "data"
    (results / "hosts" / "localhost").mkdir(parents=True)  # the host's run root
    assert stop_run("never-ran-1", ["localhost"], INVENTORY, results, data)
    values = controller_vars(results, data) | {"fleetperf_run_id": "never-ran-2"}
    rc, failed = play(tmp_path, "stop.yml", {**values, "fleetperf_hosts": ["localhost"]})
    assert rc != 0 and list(failed) == [CHECK_TASK], failed
    assert "fleetperf_fetch_dir" in failed[CHECK_TASK]


@pytest.mark.slow  # ansible-playbook, twice
def test_slurm_yml_checks_its_extra_vars_first(tmp_path: Path):
    good = launch(tmp_path).extravars()
    rc, failed = play(tmp_path, "slurm.yml", {**good, "fleetperf_requires": {"a": 1}})
    assert rc != 0 and list(failed) == [CHECK_TASK], failed
    assert "fleetperf_requires" in failed[CHECK_TASK]
    # Past the check: localhost is no Slurm login host.
    rc, failed = play(tmp_path, "slurm.yml", good)
    assert rc != 0 and list(failed) == ["Check the executor"], failed
