"""fleetperf_launch picks the interface gloo and NCCL bind for a multi-node run: the one
holding the address the other nodes reach the host on (issue 19 point 9). Run as Ansible
runs the module (tests/engine/test_modules.py), with a real workload that reports its
environment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_modules import module, wait_for

IFNAMES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
REPORT = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {IFNAMES!r}}}))"


@pytest.fixture
def rundir(tmp_path: Path) -> Path:
    path = tmp_path / "runs" / "run-1"
    path.mkdir(parents=True)
    return path


def launched_env(run_dir: Path, **args: object) -> dict:
    """The socket variables the workload saw (it has ended when this returns)."""
    res, _ = module(
        "fleetperf_launch",
        run_dir.parent,
        run_dir=str(run_dir),
        argv=[sys.executable, "-c", REPORT],
        chdir=str(run_dir),
        **args,
    )
    assert res.get("changed"), res
    wait_for(run_dir / "exit_code")
    return json.loads((run_dir / "stdout.log").read_text())


@pytest.fixture(autouse=True)
def _no_ssh_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module must not find this test's own SSH session, if it runs in one."""
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    for name in IFNAMES:
        monkeypatch.delenv(name, raising=False)


def test_the_interface_holding_the_address_is_bound(rundir: Path) -> None:
    assert launched_env(rundir, bind_addr="127.0.0.1") == dict.fromkeys(IFNAMES, "lo")


def test_a_name_is_resolved_on_the_host(rundir: Path) -> None:
    assert launched_env(rundir, bind_addr="localhost") == dict.fromkeys(IFNAMES, "lo")


def test_what_the_inventory_sets_is_kept(rundir: Path) -> None:
    env = launched_env(rundir, bind_addr="127.0.0.1", env={"GLOO_SOCKET_IFNAME": "eth7"})
    assert env == {"GLOO_SOCKET_IFNAME": "eth7", "NCCL_SOCKET_IFNAME": "lo"}


def test_else_the_address_the_ssh_session_came_in_on(
    rundir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.7 50000 127.0.0.1 22")
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the session's server address is.
    assert launched_env(rundir, bind_addr="192.0.2.1") == dict.fromkeys(IFNAMES, "lo")


def test_no_interface_holds_it_leaves_them_unset(rundir: Path) -> None:
    assert launched_env(rundir, bind_addr="192.0.2.1") == dict.fromkeys(IFNAMES)


def test_a_single_node_run_sets_nothing(
    rundir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.7 50000 127.0.0.1 22")
    assert launched_env(rundir) == dict.fromkeys(IFNAMES)
    assert os.environ["SSH_CONNECTION"]  # it was there to be found, and was not used
