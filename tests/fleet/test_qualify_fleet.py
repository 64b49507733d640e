"""``fleetperf qualify`` on ``fleet up 4``, for real: untouched, no host is flagged; one
host held to 30 % of the machine's CPU is the one host named (exit 3); one host's link
rate-limited names that host's links and not its CPU metrics.

The four hosts share this machine, so qualify runs them one at a time (it says so). Each
host's processes sit in a cgroup of their own with a high ``cpu.shares`` while it runs
(as tests/fleet/test_fleet_degrade.py does): the quota is then what differs between the
hosts, not what else this shared machine runs. Small cases and --repeat keep it short;
benchmarks/qualify_repeat.py runs each scenario five times in a row (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import testhosts
from conftest import REPO
from testhosts import fleet

pytestmark = [
    pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available())),
    pytest.mark.slow,  # a qualification of four SSH hosts: minutes
    pytest.mark.xdist_group("qualify_fleet"),  # one fleet for the module
    # A qualification judges what other processes used during each run (busy: inconclusive,
    # never flagged). Beside the suite's other worker every sample is busy, so these run
    # where nothing else does: FLEETPERF_QUIET_MACHINE=1 (docs/qualify.md).
    pytest.mark.skipif(
        os.environ.get("FLEETPERF_QUIET_MACHINE") != "1",
        reason="needs a quiet machine: FLEETPERF_QUIET_MACHINE=1",
    ),
]
PRIORITY = 65536  # cpu.shares of each host's group: 64 times a process group's
CPU = ("--case", "base-computation/CPUx1x1", "--set", "iterations=200")
LINK = ("--case", "base-interconnect/CPUx2x1-p2p", "--set", "melements=1")


@pytest.fixture(scope="module")
def fleet4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Four hosts up; the fleet's directory (its inventory: inventory.yml)."""
    workdir = tmp_path_factory.mktemp("qualify") / "fleet"
    up = fleet("up", "4", "--dir", str(workdir))
    try:
        assert up.returncode == 0, up.stderr
        yield workdir
    finally:
        down = fleet("down", "--dir", str(workdir))
        assert down.returncode == 0, down.stderr


def _hosts(workdir: Path, cpu: dict[str, str], link: dict[str, str] | None = None) -> None:
    """Every host in a cgroup of its own (``--cpu`` from ``cpu``, else the whole machine) at
    a high cpu.shares; ``link``: a host's --link-rate."""
    for host in ("node1", "node2", "node3", "node4"):
        fleet("restore", host, "--dir", str(workdir))
        args = ["--cpu", cpu.get(host, "1")]
        if link and host in link:
            args += ["--link-rate", link[host]]
        done = fleet("degrade", host, *args, "--dir", str(workdir))
        assert done.returncode == 0, done.stderr
        group = Path(done.stdout.split("cgroup ")[1].split(")")[0])
        (group / "cpu.shares").write_text(f"{PRIORITY}\n")


def _qualify(workdir: Path, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tui.cli", "qualify", "-i", str(workdir / "inventory.yml")]
    return subprocess.run(
        [*argv, "--results", str(results), "--format", "json", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=1500,
    )


def _flagged(out: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.startswith("FLAGGED ")]


def test_untouched_then_one_slow_cpu(fleet4: Path, tmp_path: Path) -> None:
    _hosts(fleet4, {})
    out = _qualify(fleet4, tmp_path / "r", *CPU)
    print(out.stderr)
    assert out.returncode == 0, out.stderr
    assert "share one machine (one boot id): one at a time" in out.stderr
    assert _flagged(out) == []
    verdicts = json.loads(out.stdout)["verdicts"]
    assert len(verdicts) == 4
    assert all(v["reason"] for v in verdicts if v["verdict"] == "inconclusive")

    _hosts(fleet4, {"node3": "0.3"})
    out = _qualify(fleet4, tmp_path / "r", *CPU)
    print(out.stderr)
    assert out.returncode == 3, out.stderr
    (line,) = _flagged(out)
    assert line.startswith("FLAGGED host node3: base-computation CPUx1x1 gemm_tflops 0.")

    history = _qualify(fleet4, tmp_path / "r", "--history", "node3")
    assert history.returncode == 0, history.stderr
    assert [q["verdict"] for q in json.loads(history.stdout)["qualifications"]] == [
        "ok",
        "flagged",
    ]


def test_a_slow_link_names_that_hosts_links_not_its_cpu(fleet4: Path, tmp_path: Path) -> None:
    _hosts(fleet4, {}, link={"node2": "64mbit"})
    out = _qualify(fleet4, tmp_path / "r", *CPU, *LINK, "--repeat", "2", "--budget", "120")
    print(out.stderr)
    assert out.returncode == 3, out.stderr
    flagged = _flagged(out)
    assert flagged and all("node2" in line and "link" in line for line in flagged), flagged
    assert not [line for line in flagged if "FLAGGED host" in line]
