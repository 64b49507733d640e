"""``fleetperf fleet degrade HOST --cpu FRACTION | --link-rate RATE`` and ``fleet restore
HOST`` (issue 42: a fleet to prove qualification on), on a real ``fleet up 2``: a CPU quota
over a host's sshd and what it starts, a token bucket on its veth, both removed by restore
and by ``fleet down``."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import testhosts
import yaml
from testhosts import fleet, leftovers

from tui.localfleet import degrade
from tui.localfleet.hosts import Fleet

pytestmark = pytest.mark.skipif(
    testhosts.available() is not None, reason=str(testhosts.available())
)

# Fixed CPU work per worker, twice as many workers as CPUs: a host takes all the CPU it gets.
WORK = (
    "for i in $(seq {workers}); do python3 -c 'import time\n"
    "t = time.process_time()\nwhile time.process_time() - t < 0.5: pass' & done; wait"
)
PRIORITY = 65536  # cpu.shares: 64 times a process group's (1024) for the measurement
RECEIVE = (
    "import sys, time\nsys.stdin.buffer.read(1)\nt = time.monotonic()\n"
    "n = 1 + len(sys.stdin.buffer.read())\nprint(n / (time.monotonic() - t))"
)
SIZE = 3_000_000  # bytes through the link each way
RATE_BITS = 8_000_000  # --link-rate 8mbit: 1 MB/s


def _ssh(workdir: Path, address: str, command: str) -> list[str]:
    return [
        "ssh",
        "-i",
        str(workdir / "client_key"),
        "-o",
        f"UserKnownHostsFile={workdir / 'known_hosts'}",
        "-o",
        "BatchMode=yes",
        f"root@{address}",
        command,
    ]


def _run(workdir: Path, address: str, command: str) -> str:
    done = subprocess.run(
        _ssh(workdir, address, command), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _timed(workdir: Path, address: str, command: str) -> float:
    start = time.monotonic()
    _run(workdir, address, command)
    return time.monotonic() - start


def _rates(workdir: Path, address: str) -> tuple[float, float]:
    """Bytes/s from the host (read here) and to it (read there), from the first byte on:
    SSH's handshake is not in them."""
    down = subprocess.Popen(
        _ssh(workdir, address, f"head -c {SIZE} /dev/zero"), stdout=subprocess.PIPE
    )
    assert down.stdout is not None
    down.stdout.read(1)
    start = time.monotonic()
    got = 1 + len(down.stdout.read())
    from_host = got / (time.monotonic() - start)
    assert down.wait(60) == 0 and got == SIZE
    up = subprocess.run(
        _ssh(workdir, address, f"python3 -c {shlex.quote(RECEIVE)}"),
        input=b"\0" * SIZE,
        capture_output=True,
        timeout=300,
    )
    assert up.returncode == 0, up.stderr
    return from_host, float(up.stdout)


def _cpu_stat(group: Path) -> dict[str, int]:
    pairs = (line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return {key: int(value) for key, value in pairs}


def _procs(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


def _qdiscs(fl: Fleet, name: str) -> str:
    host = fl.hosts[name]
    here = subprocess.run(
        ["tc", "qdisc", "show", "dev", fl.veth(host)], capture_output=True, text=True
    )
    there = subprocess.run(
        ["tc", "-n", host.netns, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True
    )
    return here.stdout + there.stdout


@pytest.mark.slow  # a fleet of two, a CPU-bound command and transfers over SSH
def test_degrade_and_restore_a_hosts_cpu_and_link(tmp_path: Path) -> None:
    workdir = tmp_path / "fleet"
    up = fleet("up", "2", "--dir", str(workdir))
    state = yaml.safe_load((workdir / "fleet.json").read_text()) if up.returncode == 0 else {}
    groups = []
    try:
        assert up.returncode == 0, up.stderr
        fl = Fleet.load(workdir)
        slow, peer = fl.hosts["node1"].address, fl.hosts["node2"].address
        where = ("--dir", str(workdir))

        # Bad input: one line, exit 2, nothing changed.
        for args, said in (
            (("node9", "--cpu", "0.3"), "no host 'node9' in the fleet in"),
            (("node1", "--cpu", "0"), "--cpu 0: expected a fraction in (0, 1]"),
            (("node1", "--cpu", "1.5"), "--cpu 1.5: expected a fraction in (0, 1]"),
            (("node1", "--link-rate", "fast"), "--link-rate fast: expected a rate such as"),
            (("node1",), "degrade node1: give --cpu FRACTION, --link-rate RATE"),
        ):
            bad = fleet("degrade", *args, *where)
            assert bad.returncode == 2 and bad.stdout == "", args
            (line,) = bad.stderr.splitlines()
            assert line.startswith("fleetperf fleet: error: ") and said in line, line
        assert fleet("restore", "node9", *where).returncode == 2
        assert not (fl.hosts["node1"].root / degrade.STATE).exists()

        # CPU: 30 % of this machine's CPUs over node1's sshd and what it starts.
        cut = fleet("degrade", "node1", "--cpu", "0.3", *where)
        assert cut.returncode == 0, cut.stderr
        group = Path(cut.stdout.split("cgroup ")[1].rstrip(")\n"))
        groups.append(group)
        cpus = len(os.sched_getaffinity(0))
        assert (group / "cpu.cfs_quota_us").read_text() == f"{round(0.3 * cpus * 100_000)}\n"
        assert fl.hosts["node1"].sshd_pid in _procs(group)
        # An SSH session, a child of the sshd, starts in the group; node2's does not.
        relative = "/" + str(group.relative_to(degrade.CPU_ROOT))
        session = _run(workdir, slow, "grep -E '^[0-9]+:cpu:' /proc/self/cgroup")
        assert session.strip().endswith(f":cpu:{relative}"), session
        assert f":cpu:{relative}" not in _run(workdir, peer, "cat /proc/self/cgroup")

        # The peer in a group of its own with every CPU (--cpu 1): the same mechanism, no
        # cap. Both groups weigh far more than this shared machine's other work while they
        # run, one at a time, so the quota is what differs, not what else the machine does.
        control = fleet("degrade", "node2", "--cpu", "1", *where)
        assert control.returncode == 0, control.stderr
        groups.append(Path(control.stdout.split("cgroup ")[1].rstrip(")\n")))
        for g in groups:
            (g / "cpu.shares").write_text(f"{PRIORITY}\n")
        before = _cpu_stat(group)
        work = WORK.format(workers=2 * cpus)
        peer_s, slow_s = (_timed(workdir, address, work) for address in (peer, slow))
        throttled = _cpu_stat(group)["nr_throttled"] - before["nr_throttled"]
        print(f"CPU-bound command: node1 (--cpu 0.3) {slow_s:.2f} s, node2 {peer_s:.2f} s")
        assert slow_s > 2 * peer_s, (slow_s, peer_s)
        assert throttled > 0  # the quota held node1 back
        assert fleet("restore", "node2", *where).returncode == 0
        # Degraded again: the same group, a new quota.
        more = fleet("degrade", "node1", "--cpu", "0.5", *where)
        assert more.returncode == 0 and f"cgroup {group})" in more.stdout, more.stderr
        assert (group / "cpu.cfs_quota_us").read_text() == f"{round(0.5 * cpus * 100_000)}\n"

        # Link: a token bucket of 8 Mbit/s (1 MB/s) both ways on node1's veth.
        rate = fleet("degrade", "node1", "--link-rate", "8mbit", *where)
        assert rate.returncode == 0, rate.stderr
        assert _qdiscs(fl, "node1").count("qdisc tbf") == 2
        capped, free = _rates(workdir, slow), _rates(workdir, peer)
        print(f"bytes/s from, to: node1 (--link-rate 8mbit) {capped}, node2 {free}")
        assert all(r < 1.25 * RATE_BITS / 8 for r in capped), capped
        assert all(r > 3 * RATE_BITS / 8 for r in free), free

        # Restore: the processes back where they were, the group and qdiscs gone.
        back = fleet("restore", "node1", *where)
        assert back.returncode == 0, back.stderr
        assert not group.exists()
        assert fl.hosts["node1"].sshd_pid in _procs(group.parent)
        assert f":cpu:{relative}" not in _run(workdir, slow, "cat /proc/self/cgroup")
        assert "tbf" not in _qdiscs(fl, "node1")
        assert all(r > 3 * RATE_BITS / 8 for r in _rates(workdir, slow))

        # Degraded again, then fleet down: nothing of it is left.
        again = fleet("degrade", "node2", "--cpu", "0.5", "--link-rate", "1gbit", *where)
        assert again.returncode == 0, again.stderr
        groups.append(Path(again.stdout.split("cgroup ")[1].split(")")[0]))
    finally:
        down = fleet("down", "--dir", str(workdir))
    assert down.returncode == 0, down.stderr
    assert [g for g in groups if g.exists()] == []
    assert leftovers(workdir, state) == []  # the veths (and their qdiscs) with them


def test_degrade_without_a_fleet_is_one_line(tmp_path: Path) -> None:
    out = fleet("degrade", "node1", "--cpu", "0.3", "--dir", str(tmp_path))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"fleetperf fleet: error: no fleet is up in {tmp_path}\n"
