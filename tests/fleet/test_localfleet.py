"""``fleetperf fleet up N`` / ``fleet down``: SSH hosts on this machine, for real.

Two hosts come up with their own addresses and sshd, answer ssh and ansible's ping, run a
case through the engine from the inventory that ``up`` wrote, keep what they write under
/etc to themselves, and ``down`` leaves nothing: no process, namespace, interface, mount
or file of theirs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO, Fleetperf
from testhosts import fleet, leftovers

pytestmark = pytest.mark.skipif(
    testhosts.available() is not None, reason=str(testhosts.available())
)
BIN = Path(sys.executable).parent


@pytest.mark.slow  # runs a case through the engine end to end
def test_fleet_up_two_hosts_and_down(emitter: Fleetperf, tmp_path: Path) -> None:
    workdir = tmp_path / "fleet"
    up = fleet("up", "2", "--dir", str(workdir))
    state = yaml.safe_load((workdir / "fleet.json").read_text()) if up.returncode == 0 else {}
    try:
        assert up.returncode == 0, up.stderr
        inventory = Path(up.stdout.strip())
        assert inventory == workdir / "inventory.yml"
        hosts = yaml.safe_load(inventory.read_text())["all"]["children"]["cpu"]["hosts"]
        assert list(hosts) == ["node1", "node2"]
        addresses = [h["ansible_host"] for h in hosts.values()]
        assert len(set(addresses)) == 2
        assert all(h["fleetperf_executor"] == "process" for h in hosts.values())
        assert hosts["node1"]["fleetperf_run_root"] != hosts["node2"]["fleetperf_run_root"]

        # Each host answers over SSH at its own address, in its own network namespace.
        ssh = [
            "ssh",
            "-i",
            str(workdir / "client_key"),
            "-o",
            f"UserKnownHostsFile={workdir / 'known_hosts'}",
            "-o",
            "BatchMode=yes",
        ]
        for address in addresses:
            seen = subprocess.run(
                [*ssh, f"root@{address}", "ip -4 -o addr show dev eth0"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert seen.returncode == 0, seen.stderr
            assert f" {address}/" in seen.stdout

        # What a host writes under /etc stays on that host.
        probe = "/etc/fleetperf-localfleet-probe"
        wrote = subprocess.run(
            [*ssh, f"root@{addresses[0]}", f"echo node1 > {probe} && cat {probe}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert wrote.stdout == "node1\n", wrote.stderr
        assert not Path(probe).exists()
        other = subprocess.run([*ssh, f"root@{addresses[1]}", f"test -e {probe}"], timeout=60)
        assert other.returncode == 1

        ping = subprocess.run(
            [str(BIN / "ansible"), "-i", str(inventory), "cpu", "-m", "ansible.builtin.ping"],
            cwd=REPO,
            env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert ping.stdout.count('"ping": "pong"') == 2

        # The engine runs a case on the fleet from that inventory.
        out = emitter.batch("emitter", "cpu/CPUx1x1", args=("-i", str(inventory)))
        assert out.returncode == 0, out.stdout + out.stderr
        (record,) = emitter.records()
        assert record["status"] == "passed" and record["hosts"] == ["node1"]
        run_root = Path(hosts["node1"]["fleetperf_run_root"])
        assert (run_root / record["run_id"] / "exit_code").read_text() == "0"

        again = fleet("up", "1", "--dir", str(workdir))
        assert again.returncode == 2 and "a fleet is up in" in again.stderr
    finally:
        down = fleet("down", "--dir", str(workdir))
    assert down.returncode == 0, down.stderr
    assert "2 host(s) down" in down.stdout
    assert leftovers(workdir, state) == []


def test_fleet_needs_root(tmp_path: Path) -> None:
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        + [sys.executable, "-m", "tui.cli", "fleet", "up", "1", "--dir", str(tmp_path / "f")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "fleetperf fleet: error: local hosts need root (network namespaces, mounts)"
    ]
    assert not (tmp_path / "f").exists()


def test_fleet_down_without_a_fleet(tmp_path: Path) -> None:
    done = fleet("down", "--dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == f"fleetperf fleet: error: no fleet is up in {tmp_path}"
