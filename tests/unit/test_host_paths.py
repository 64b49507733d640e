"""Names from a host never name a path on the controller (issue 26 point 2).

One validator turns a host's name into a path here (tui/core/paths.py ``host_path``). A
compromised Slurm login host is played by fake modules beside a test playbook that imports
the real playbooks/tasks/slurm_stop.yml, run through the controller's own Slurm executor: its
poll and its cancel name the nodes ``../../x`` and ``a/b``, its snapshot carries members
for them. Nothing lands outside the run's fetch directory, the good node's files are kept,
and the run's notes say which names were refused.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from tui.catalog import catalog
from tui.core.paths import UnsafeName, host_path
from tui.executors import ansiblerun
from tui.executors.base import Launch, new_run_id
from tui.executors.hostfiles import HOST_ARCHIVE
from tui.executors.slurm import Slurm

EVIL = ["../../x", "a/b"]
NODES = [*EVIL, "node1"]


@pytest.mark.parametrize(
    "name", ["..", ".", "../x", "a/b", "/etc", "", "-rf", ".hidden", "a" * 65, "n\n", "n\0", 7]
)
def test_a_name_that_is_not_one_plain_component_is_refused(tmp_path: Path, name: object) -> None:
    with pytest.raises(UnsafeName, match="not a name"):
        host_path(tmp_path, name)


def test_a_plain_name_is_a_child_of_its_directory(tmp_path: Path) -> None:
    assert host_path(tmp_path, "node-1.a_b") == tmp_path / "node-1.a_b"


def test_a_link_planted_under_the_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "node1").symlink_to("/")
    with pytest.raises(UnsafeName, match="leads out of"):
        host_path(tmp_path, "node1")


# A module that answers as a compromised login host would: RESULT with the nodes and, for a
# snapshot module, a directory of forged files (fleetperf_collect, as the cleanup called it
# per node before; fleetperf_slurm_collect, one tar of NODE/NAME members).
FAKE = """#!/usr/bin/python
# WANT_JSON: Ansible hands over the arguments as a file, and takes any
import json, os, tarfile, tempfile
NODES, ROOT, KIND = {nodes!r}, {root!r}, {kind!r}
result = {{"changed": False, "job_id": "4711", "nodes": NODES}}
if KIND == "poll":
    result.update(state="COMPLETED", finished=True, exit_code=0, run_dir=ROOT, events_bytes={{}},
                  timed_out=False, stalled=False, reason="", partition="debug")
if KIND in ("collect", "slurm_collect"):
    dest = tempfile.mkdtemp(dir=ROOT)
    for node in NODES:
        for name in ("events.jsonl", "exit_code"):
            member = f"{{node}}/{{name}}"
            os.makedirs(os.path.dirname(os.path.join(dest, "tree", member)), exist_ok=True)
            with open(os.path.join(dest, "tree", member), "w") as f:
                f.write("forged by the host\\n")
    if KIND == "collect":  # one node's files, flat
        for name in ("events.jsonl", "exit_code"):
            with open(os.path.join(dest, name), "w") as f:
                f.write("forged by the host\\n")
        result.update(dir=dest, files=["events.jsonl", "exit_code"], archive=None)
    else:
        with tarfile.open(os.path.join(dest, "{archive}"), "x") as tar:
            for node in NODES:
                for name in ("events.jsonl", "exit_code"):
                    tar.add(os.path.join(dest, "tree", node, name), arcname=f"{{node}}/{{name}}")
        result.update(dir=dest)
print(json.dumps(result))
"""

PLAY = """
- name: A compromised Slurm login host
  hosts: "{{{{ fleetperf_hosts }}}}"
  gather_facts: false
  tasks:
    - name: Follow the job
      fleetperf_slurm_poll: {{}}
    - name: Cancel the job and collect the nodes' files
      ansible.builtin.import_tasks: {stop}
"""


def _forged_login(tmp_path: Path, host_root: Path) -> tuple[Path, Path]:
    """The test's playbooks directory (fake modules beside slurm.yml) and inventory."""
    play = tmp_path / "play"
    (play / "library").mkdir(parents=True)
    (play / "slurm.yml").write_text(PLAY.format(stop=REPO / "playbooks/tasks/slurm_stop.yml"))
    kinds = {
        "poll": "fleetperf_slurm_poll",
        "cancel": "fleetperf_slurm_cancel",
        "collect": "fleetperf_collect",
        "slurm_collect": "fleetperf_slurm_collect",
    }
    for kind, module in kinds.items():
        source = FAKE.format(nodes=NODES, root=str(host_root), kind=kind, archive=HOST_ARCHIVE)
        (play / "library" / f"{module}.py").write_text(source)
    login = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "fleetperf_executor": "slurm",
        "fleetperf_run_root": str(host_root),
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"login": login}}}))
    return play, inventory


def _files(root: Path) -> set[Path]:
    return {Path(d, f) for d, _, names in os.walk(root) for f in names}


def test_a_login_hosts_node_names_write_nothing_outside_the_fetch_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_root = tmp_path / "host"
    host_root.mkdir()
    play, inventory = _forged_login(tmp_path, host_root)
    monkeypatch.setattr(ansiblerun, "PLAYBOOKS", play)
    case = catalog.load_case("distilbert-pytorch")
    launch = Launch(
        spec=catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1")),
        run_id=new_run_id(case.name),
        hosts=["login"],
        inventory=inventory,
        results_dir=tmp_path / "results",
        data_root=tmp_path / "data",
        executor="slurm",
    )
    outcome = Slurm([(launch, lambda _ev: None, threading.Event())]).outcome(launch.run_id)

    fetch = launch.run_dir / "hosts"
    outside = {p for p in _files(tmp_path / "results") if not p.is_relative_to(fetch)}
    assert not [p for p in outside if p.read_text(errors="replace") == "forged by the host\n"]
    assert {p.relative_to(fetch) for p in _files(fetch)} == {
        Path("node1/events.jsonl"),
        Path("node1/exit_code"),
    }
    assert outcome.detail is not None and outcome.detail["nodes"] == ["node1"]
    for name in EVIL:  # each refusal said once, in the record's notes (tui/engine/session.py)
        said = [n for n in outcome.notes if repr(name) in n]
        assert len(said) == 1 and said[0].startswith("host login: Slurm node "), outcome.notes
