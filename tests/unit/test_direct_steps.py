"""The direct executor runs run.yml's tasks without ansible-playbook: its list of them
(tui/executors/direct.py RUN_STEPS) is the playbook's, task for task and in order, so a
change to the playbook cannot pass without saying what the direct path does for it."""

from __future__ import annotations

from typing import Any

import yaml
from conftest import REPO

from tui.executors.direct import RUN_STEPS


def _task_names(tasks: list[dict[str, Any]]) -> list[str]:
    """Every task's name in the order a host meets them: a block's own tasks, then its
    rescue, then its always."""
    names = []
    for task in tasks:
        if "block" in task:
            for part in ("block", "rescue", "always"):
                names += _task_names(task.get(part) or [])
        else:
            names.append(task["name"])
    return names


def test_the_direct_path_lists_run_ymls_tasks_in_order() -> None:
    plays = yaml.safe_load((REPO / "playbooks" / "run.yml").read_text())
    tasks = [name for play in plays for name in _task_names(play["tasks"])]
    assert [name for name, _ in RUN_STEPS] == tasks


def test_the_check_fails_on_a_changed_playbook() -> None:
    """The comparison sees a task added inside a block."""
    plays = yaml.safe_load((REPO / "playbooks" / "run.yml").read_text())
    (run,) = [play for play in plays if play["name"] == "Run"]
    inner = run["tasks"][0]["block"][0]["block"]
    inner.insert(1, {"name": "Copy a file", "ansible.builtin.copy": {}})
    tasks = [name for play in plays for name in _task_names(play["tasks"])]
    assert [name for name, _ in RUN_STEPS] != tasks and "Copy a file" in tasks
