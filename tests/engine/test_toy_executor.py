"""docs/executors.md says a new kind of host is one module and a registry entry. Here a
temporary copy of the package gains a toy kind that way (tui/executors/toy.py, its import
and its entry in tui/executors/registry.py) and an inventory host names it: a real case runs
through it end to end, and its record is the same as any kind's. Nothing else is edited:
the engine, the inventory and the record know the kind only by what it registers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, write_inventory

# The toy kind: the workload as a plain child of the controller, its event lines handed to
# the tracker as one poll's once it ends. Steps, not any transport's events.
TOY = '''\
"""A toy kind of host: the workload as the controller's child."""

import os
import shutil
import subprocess
import sys

from tui.core.events import LAUNCH_ACTION, PREFLIGHT_ACTION, TAIL_ACTION
from tui.core.paths import REPO_ROOT
from tui.executors.base import Started
from tui.executors.kinds import Kind
from tui.executors.steps import Step
from tui.executors.tracker import HAND_BACK, conclude, prepare


class Toy:
    def __init__(self, runs: list[Started]) -> None:
        self._runs = {l.run_id: (l, prepare(l, on), cancel) for l, on, cancel in runs}

    def run(self) -> None:
        """Nothing shared: each run is its outcome."""

    def outcome(self, run_id):
        launch, tracker, cancel = self._runs[run_id]
        host, case = launch.hosts[0], launch.spec.case
        work = launch.run_dir / "hosts" / host
        work.mkdir(parents=True)
        tracker.step(Step(host, PREFLIGHT_ACTION, "ok", {"synthetic_data": False}))
        argv = [
            sys.executable, str(case.dir / case.entrypoint),
            "--config", str(launch.run_dir / "config.json"),
            "--data-dir", str(launch.data_root / case.name), "--run-dir", str(work),
        ]
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT / "cases")}
        tracker.step(Step(host, LAUNCH_ACTION, "ok"))
        rc = subprocess.run(argv, env=env, check=False).returncode
        lines = (work / "events.jsonl").read_text().splitlines()
        tail = {"lines": lines, "finished": True, "exit_code": rc}
        tracker.step(Step(host, TAIL_ACTION, "ok", tail))
        tracker.step(Step(host, "debug", "ok", task=HAND_BACK))
        return conclude(launch, tracker, cancelled=cancel.is_set(), rc=rc, runner_status="toy")

    def discard(self, run_id: str) -> None:
        shutil.rmtree(self._runs[run_id][0].run_dir, ignore_errors=True)

    @staticmethod
    def stop(launches) -> None:
        """The workload is the controller's child: it ends with outcome."""

    @staticmethod
    def cleanup(run_id, hosts, inventory, results_dir, data_root):
        return dict.fromkeys(hosts, "stopped")


class ToyKind(Kind):
    name = "toy"
    executor = Toy
'''


def _package_with_a_toy_kind(root: Path) -> Path:
    """The repository's tui/ copied under ``root`` with the toy kind added as the docs say;
    the rest of the repository linked (REPO_ROOT is the copy's parent)."""
    shutil.copytree(REPO / "tui", root / "tui", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("cases", "playbooks", "images", "inventory", "ansible.cfg", "pyproject.toml"):
        (root / name).symlink_to(REPO / name)
    (root / "tui" / "executors" / "toy.py").write_text(TOY)
    registry = root / "tui" / "executors" / "registry.py"
    text = registry.read_text()
    kinds = "(Process(), Docker(), SlurmLogin())"
    assert text.count(kinds) == 1, "the registry's one list of kinds"
    text = text.replace(kinds, "(Process(), Docker(), SlurmLogin(), ToyKind())")
    imports = "from tui.executors.kinds import"
    text = text.replace(imports, f"from tui.executors.toy import ToyKind\n{imports}", 1)
    registry.write_text(text)
    return root


@pytest.mark.slow
def test_a_toy_kind_is_one_module_and_a_registry_entry(emitter: Fleetperf, tmp_path: Path) -> None:
    root = _package_with_a_toy_kind(tmp_path / "copy")
    inventory = write_inventory(tmp_path / "inv.yml", {"toybox": {"fleetperf_executor": "toy"}})
    env = {**emitter.env(), "PYTHONPATH": str(root)}
    argv = emitter.argv("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1")
    out = subprocess.run(
        [*argv, "--inventory", str(inventory)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (record,) = emitter.records()
    assert record["status"] == "passed" and record["executor"] == "toy"
    assert record["hosts"] == ["toybox"] and record["metrics"]
    run_dir = emitter.results / "runs" / str(record["run_id"])
    logged = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").open()]
    assert "CaseResult" in logged and "MetricSample" in logged
    # The copy ran, not the repository's package: the repository knows no toy kind.
    bad = emitter.batch("emitter", "cpu/CPUx1x1", args=("--inventory", str(inventory)))
    assert bad.returncode != 0 and "'toy': not one of process, docker, slurm" in bad.stderr
