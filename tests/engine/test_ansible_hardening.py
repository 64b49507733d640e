"""What reaches Ansible from a user or a host stays data, and ansible never outlives or
outwaits its controller (issue 18 §2, 3, 9, 11, 14). Real ansible-runner, real playbooks,
real SSH hosts from tests/testhosts.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testhosts
from conftest import Fleetperf, local_host, write_inventory
from process_guard import live_argvs

from tui.engine import hostcheck
from tui.engine.inventory import load_inventory
from tui.executors import ansiblerun

needs_hosts = pytest.mark.skipif(
    testhosts.available() is not None, reason=str(testhosts.available())
)


def _processes_naming(text: str) -> list[str]:
    """Command lines of live processes that contain ``text``."""
    lines = [b" ".join(argv).decode(errors="replace") for argv in live_argvs().values()]
    return [line for line in lines if text in line]


def _wait_for(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.2)


@pytest.mark.slow  # a real run through ansible-runner, or the direct executor
@pytest.mark.parametrize("way", ["play", "direct"])  # tui/executors/direct.py
def test_a_set_value_is_data_never_a_template(
    emitter: Fleetperf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    monkeypatch.setenv("FLEETPERF_DIRECT", "0" if way == "play" else "1")
    planted = tmp_path / "pwned.txt"
    value = '{{ lookup("pipe", "touch ' + str(planted) + '") }} "123"'
    inventory = write_inventory(tmp_path / "inv.yml", {"box": local_host(emitter, "box")})
    out = emitter.batch(
        "emitter", "cpu/CPUx1x1", f"env_digest='{value}'", args=("-i", str(inventory))
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert not planted.exists(), "a --set value ran as a template on the controller"
    (record,) = emitter.records()
    run_dir = emitter.results / "runs" / str(record["run_id"])
    kept = (run_dir / "config.json").read_bytes()
    assert json.loads(kept)["hp"]["env_digest"] == value
    # The host's config.json, written by the preflight from the extra vars, is the record's.
    assert (run_dir / "hosts" / "box" / "config.json").read_bytes() == kept
    if way == "direct":  # no ansible ran
        assert not (run_dir / "ansible-run").exists()
        return
    # Not on ansible's command line (ps, the command artifact): a file of unsafe text.
    (command,) = run_dir.glob("ansible-run/artifacts/*/command")
    argv = json.loads(command.read_text())["command"]
    assert not any("env_digest" in a for a in argv)


def _ansible_env_seen(inventory: Path, host: str) -> dict[str, str]:
    """The environment the Hosts screen's ansible ran with, as setup's facts on a host
    that is this machine report it (a local module inherits ansible's environment)."""
    (check,) = hostcheck.preflight(load_inventory(inventory), [host]).values()
    assert check.reachable, check.message
    res = hostcheck.adhoc(inventory, [host], "ansible.builtin.setup", "gather_subset=min")
    return res[host]["ansible_facts"]["ansible_env"]


@pytest.mark.slow  # a real preflight play from the Hosts screen
def test_the_hosts_screen_runs_ansible_with_the_allow_listed_env(
    emitter: Fleetperf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETPERF_PLANTED_SECRET", "planted-1")
    monkeypatch.setenv("ANSIBLE_HASHI_VAULT_ROLE_ID", "planted-2")
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
    monkeypatch.setenv("ANSIBLE_CALLBACK_PLUGINS", str(tmp_path / "plugins"))
    inventory = write_inventory(tmp_path / "inv.yml", {"box": local_host(emitter, "box")})
    env = _ansible_env_seen(inventory, "box")
    assert "FLEETPERF_PLANTED_SECRET" not in env
    assert "ANSIBLE_HASHI_VAULT_ROLE_ID" not in env
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert str(tmp_path / "plugins") not in env["ANSIBLE_CALLBACK_PLUGINS"]
    extra = set(env) - set(ansiblerun.ansible_env()) - ansiblerun._RUNNER_KEEP
    # What ansible itself adds for a module (its Python, the locale it forces).
    assert extra <= {"ANSIBLE_CALLBACK_PLUGINS", "PWD", "SHLVL", "_", "LC_ALL", "LANG"}, extra


@needs_hosts
@pytest.mark.slow  # a real run on an ssh host, its controller killed
def test_a_killed_controller_leaves_no_ansible(emitter: Fleetperf, tmp_path: Path) -> None:
    with testhosts.TestNetwork(tmp_path / "net") as net:
        node = net.add_host("node1")
        inventory = testhosts.cpu_inventory(net, [node], emitter.data_root, tmp_path / "fleet.yml")
        proc = emitter.popen(
            *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "-i", str(inventory)),
            *("--set", "steps=100000", "--set", "interval_s=0.2"),
        )
        try:
            _wait_for("workload", lambda: list(node.root.glob("runs/*/workload.pid")), 120)
            (run_dir,) = (emitter.results / "runs").iterdir()
            assert _processes_naming(str(run_dir)), "ansible-playbook was not running"
            proc.kill()
            proc.wait()
            # At once: ansible dies with its controller (it ends at its next write otherwise).
            _wait_for("end of ansible", lambda: not _processes_naming(str(run_dir)), 30)
        finally:
            proc.kill()
            proc.communicate()
            # stops the workload: on the operator's inventory, never the record's (issue 39)
            cleaned = emitter.run("cleanup", "-i", str(inventory))
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr


def test_the_guard_ends_a_worker_ansible_orphaned(tmp_path: Path) -> None:
    """A worker forked as the dying controller's SIGTERM reaches ansible is not in
    ansible's list and outlives it; the guard ends it once ansible has ended. The fake
    ansible dies at SIGTERM without passing it on, as ansible does for such a worker."""
    fake = tmp_path / "bin" / "ansible-playbook"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport os, time\nos.fork()\ntime.sleep(600)\n")
    fake.chmod(0o755)
    command = [str(fake), "-e", f"@{tmp_path}/env/extravars", "run.yml"]
    guard = [sys.executable, str(ansiblerun._GUARD)]
    controller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            "subprocess.Popen([*sys.argv[1:3], str(os.getpid()), *sys.argv[3:]])\n"
            "time.sleep(600)\n",
            *guard,
            *command,
        ]
    )
    try:
        # The controller, the guard, ansible and its worker.
        _wait_for("ansible's worker", lambda: len(_processes_naming(str(fake))) == 4, 10)
        controller.kill()
        controller.wait()
        _wait_for("end of the worker", lambda: not _processes_naming(str(fake)), 10)
    finally:
        controller.kill()
        controller.wait()
        for line in _processes_naming(str(fake)):
            print("left:", line)


def test_cleanup_ends_ansible_left_by_its_run_only(tmp_path: Path) -> None:
    """An ansible-playbook that an interrupted run left (one that lost its controller
    before it could die with it) is found by its extra vars file and ended; another
    run's is left alone."""
    fake = tmp_path / "bin" / "ansible-playbook"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    fake.chmod(0o755)
    procs = {}
    for run in ("r1", "r2"):
        private = tmp_path / "runs" / run / "ansible-run"
        (private / "env").mkdir(parents=True)
        argv = [str(fake), "-e", f"@{private}/env/extravars", "run.yml"]
        procs[run] = subprocess.Popen(argv)
    try:
        _wait_for("fakes", lambda: len(_processes_naming(str(fake))) == 2, 10)
        ansiblerun.kill_leftover_ansible(tmp_path / "runs" / "r1")
        assert procs["r1"].wait(timeout=10) == -signal.SIGTERM
        assert procs["r2"].poll() is None
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


@needs_hosts
@pytest.mark.slow  # an ssh host
def test_a_host_whose_key_changed_is_refused_at_preflight(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    with testhosts.TestNetwork(tmp_path / "net") as net:
        node = net.add_host("node1")
        # An impostor's key where node1's should be (the inventory asks for checking).
        other = tmp_path / "other_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True
        )
        kind, key = Path(f"{other}.pub").read_text().split()[:2]
        net.known_hosts.write_text(f"{node.address} {kind} {key}\n")
        inventory = testhosts.cpu_inventory(net, [node], emitter.data_root, tmp_path / "fleet.yml")
        out = emitter.batch("emitter", "cpu/CPUx1x1", args=("-i", str(inventory)))
        assert out.returncode == 2, out.stdout + out.stderr
        (message,) = [ln for ln in out.stderr.splitlines() if "error" in ln]
        assert message.startswith("fleetperf: error: host node1: the SSH host key of"), message
        assert f"ssh-keygen -R {node.address}; ssh-keyscan {node.address} >>" in message
        assert not list((node.root / "runs").glob("*/workload.pid")), "launched anyway"
        assert emitter.records() == []
        # A key ssh does not know at all: the Hosts screen's check says so, and how to fix.
        net.known_hosts.write_text("")
        (check,) = hostcheck.preflight(load_inventory(inventory), ["node1"]).values()
        assert not check.reachable
        assert check.message.startswith(f"host node1: the SSH host key of {node.address} is not")
        assert f"ssh-keyscan {node.address} >> ~/.ssh/known_hosts" in check.message


@needs_hosts
@pytest.mark.slow  # an ssh host, partitioned mid-run
def test_a_silent_host_fails_the_run_within_a_bound(emitter: Fleetperf, tmp_path: Path) -> None:
    with testhosts.TestNetwork(tmp_path / "net") as net:
        node = net.add_host("node1")
        inventory = testhosts.cpu_inventory(net, [node], emitter.data_root, tmp_path / "fleet.yml")
        proc = emitter.popen(
            *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "-i", str(inventory)),
            *("--set", "steps=100000", "--set", "interval_s=0.2"),
        )
        try:
            _wait_for("workload", lambda: list(node.root.glob("runs/*/workload.pid")), 120)
            time.sleep(2)  # the follower and the poll hold their connections
            # No packet in or out, and no error either: a silent partition.
            subprocess.run(["ip", "link", "set", net.veth(node), "down"], check=True)
            cut = time.monotonic()
            proc.wait(timeout=240)
            took = time.monotonic() - cut
        finally:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode != 0, out + err
    assert took < 150, f"the run took {took:.0f} s to notice"
    (record,) = emitter.records()
    assert record["status"] == "failed"
    assert str(record["error"]).startswith("host node1: unreachable: "), record["error"]
