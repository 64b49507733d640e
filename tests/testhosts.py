"""Test hosts reached over SSH: the local fleet of ``tui/localfleet/hosts.py``, for tests.

Each host has its own network namespace, address and sshd, and its own overlays over
/etc, /usr, /var and the other directories software writes: what a test does on a host
(provisioning makes users, writes /etc files) stays on that host. /tmp, the repository
and the venv are shared, so give each host its own paths under ``host.root`` in its
inventory variables. ``host.bin_dir`` comes first on PATH in the host's SSH sessions:
put stand-in hardware commands there with ``host.add_command``.

    with TestNetwork(tmp_path) as net:
        a = net.add_host("gpu1")
        a.add_command("nvidia-smi", "#!/bin/sh\\necho ...\\n")
        inventory = net.inventory({"nvidia": [a]}, {"gpu1": {"fleetperf_data_root": ...}})
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO

from tui.localfleet.hosts import Fleet, Host, available

__all__ = ["TestHost", "TestNetwork", "available", "cpu_inventory", "fleet", "leftovers"]

TestHost = Host


class TestNetwork(Fleet):
    """A ``Fleet`` under the name the tests know it by."""

    __test__ = False  # not a pytest test class


def cpu_inventory(net: TestNetwork, hosts: list[Host], data_root: Path, path: Path) -> Path:
    """An inventory of ``hosts`` in group cpu that run this checkout's code with this
    Python, each host under a run root of its own; written to ``path``."""
    host_vars = {
        h.name: {
            "fleetperf_repo_dir": str(REPO),
            "fleetperf_python": sys.executable,
            "fleetperf_data_root": str(data_root),
            "fleetperf_run_root": str(h.root / "runs"),
            "fleetperf_addr": h.address,
        }
        for h in hosts
    }
    path.write_text(yaml.safe_dump(net.inventory({"cpu": hosts}, host_vars)))
    return path


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    """``fleetperf fleet ARGS`` (up, down), as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "fleet", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _running(pid: int, mark: str) -> bool:
    """Whether ``pid`` is a live process (not a zombie init has yet to reap) with ``mark``
    in its command line (not another process that got the number since)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return False
    return state != "Z" and mark in cmdline


def leftovers(workdir: Path, state: dict) -> list[str]:
    """What of the fleet described by ``state`` (its fleet.json) is still on this machine."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for name, (ns, _address, pid) in state["hosts"].items():
        if ns in netns:
            found.append(f"namespace {ns}")
        if _running(pid, str(workdir)):
            found.append(f"{name}'s sshd (pid {pid})")
    if f" {state['tag']}" in links:
        found.append(f"interfaces {state['tag']}*")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if str(workdir) in line:
            found.append(f"mount {line}")
    found += [str(p) for p in workdir.iterdir()]
    return found
