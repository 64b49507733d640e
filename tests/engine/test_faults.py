"""Faults during a run, each done for real (issue 6 §4): every test asserts the run's
status, its reason, and that no workload process is left.

Two-node faults run the torch-free emitter on two SSH test hosts (tests/testhosts.py);
the others run it on this machine. Every test stops what it started in a fixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import Fleetperf
from process_guard import live_argvs
from test_batch import local_host, write_inventory

pytestmark = pytest.mark.slow  # real runs over SSH test hosts, minutes each

Nodes = tuple[Path, list[testhosts.TestHost]]  # the inventory and its two hosts


def run_processes(run_roots: list[Path]) -> list[int]:
    """Live (not zombie) processes whose command line names a run directory under the
    roots: the supervisors, torchrun and the ranks (which torchrun puts in sessions of
    their own, out of the supervisor's process group)."""
    needles = [str(root).encode() for root in run_roots]
    return [
        pid for pid, argv in live_argvs().items() if any(n in arg for n in needles for arg in argv)
    ]


def kill_all(run_roots: list[Path]) -> None:
    for pid in run_processes(run_roots):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def nothing_left(run_roots: list[Path], seconds: float = 5) -> bool:
    """No process of the runs is left (after a moment for the last ones to exit)."""
    deadline = time.monotonic() + seconds
    while run_processes(run_roots):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def wait_streaming(proc: subprocess.Popen[str], hosts: set[str], timeout: float = 90) -> None:
    """Read the batch printer's lines until every host printed a step."""
    assert proc.stdout is not None
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        host = line.split(" ", 1)[0]
        if " step " in line and host in hosts:
            seen.add(host)
        if seen == hosts:
            return
        assert time.monotonic() < deadline, "the run never streamed from every host"
    raise AssertionError(f"output ended before every host streamed (saw {seen})")


@pytest.fixture
def two_nodes(
    emitter: Fleetperf, tmp_path: Path
) -> Iterator[tuple[Path, list[testhosts.TestHost]]]:
    """An inventory with two SSH test hosts in group cpu; everything torn down after."""
    if testhosts.available() is not None:
        pytest.skip(str(testhosts.available()))
    net = testhosts.TestNetwork(tmp_path / "net")
    try:
        net.start()
        nodes = [net.add_host("node1"), net.add_host("node2")]
        inventory = testhosts.cpu_inventory(net, nodes, emitter.data_root, tmp_path / "fleet.yml")
        yield inventory, nodes
    finally:
        kill_all([tmp_path / "net" / "hosts" / n / "runs" for n in ("node1", "node2")])
        net.close()


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Controllers a test starts; killed (their process groups) if still running after."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def two_node_run(
    emitter: Fleetperf, inventory: Path, started: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    proc = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx2x1",
        "--set", "steps=400", "--set", "interval_s=0.2", "-i", str(inventory),
    )  # fmt: skip
    started.append(proc)
    wait_streaming(proc, {"node1", "node2"})
    return proc


def test_workload_killed_on_one_of_two_nodes(
    emitter: Fleetperf, two_nodes: Nodes, started: list
) -> None:
    inventory, nodes = two_nodes
    proc = two_node_run(emitter, inventory, started)
    rank_pids = [p for p in run_processes([nodes[1].root / "runs"]) if _is_emitter(p)]
    assert rank_pids, "no emitter process on node2"
    t_kill = time.monotonic()
    os.kill(rank_pids[0], signal.SIGKILL)
    assert proc.stdout is not None
    for line in proc.stdout:  # the printer's line for the host's failure event
        if line.startswith("node2") and "FAILED: host node2 rank 1:" in line:
            break
    failed_after = time.monotonic() - t_kill
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, rest
    (rec,) = emitter.records()
    assert rec["status"] == "failed"
    error = rec["error"]
    assert error.startswith("host node2 rank 1: workload exited with code "), error
    assert "stderr: " in error and "SIGKILL" in error, error  # torchrun's own report
    assert failed_after < 10, f"the failure came {failed_after:.1f} s after the kill"
    # The peer was stopped, not left to run its 80 s.
    peer = nodes[0].root / "runs" / rec["run_id"]
    assert (peer / "stop_reason").read_text() == "host node2 failed"
    assert nothing_left([n.root / "runs" for n in nodes])


def _is_emitter(pid: int) -> bool:
    """The rank's own process (python [-u] emitter.py ...), not torchrun or the supervisor."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return False
    return any(arg.endswith("emitter.py") for arg in argv[1:3])


def test_host_unreachable_mid_run(emitter: Fleetperf, two_nodes: Nodes, started: list) -> None:
    inventory, nodes = two_nodes
    proc = two_node_run(emitter, inventory, started)
    # node2's sshd and its sessions go; its workload keeps running, out of reach.
    pids = subprocess.run(
        ["ip", "netns", "pids", nodes[1].netns], capture_output=True, text=True, check=True
    ).stdout.split()
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip().startswith("sshd"):
                os.kill(int(pid), signal.SIGKILL)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, rest
    (rec,) = emitter.records()
    assert rec["status"] == "failed"
    assert rec["error"].startswith("host node2"), rec["error"]
    assert "unreachable" in rec["error"], rec["error"]
    peer = nodes[0].root / "runs" / rec["run_id"]
    assert (peer / "stop_reason").read_text() == "host node2 failed"
    assert nothing_left([nodes[0].root / "runs"])  # node2's own waits for its way back


def test_silent_workload_fails_as_stalled_and_is_stopped(emitter: Fleetperf) -> None:
    case_yaml = emitter.cases_dir / "emitter" / "case.yaml"
    case_yaml.write_text(case_yaml.read_text().replace("stall_s: 30", "stall_s: 3"))
    roots = [emitter.results / "hosts" / "localhost"]
    try:
        out = emitter.batch("emitter", "cpu/CPUx1x1", "hang_at_step=2", timeout=120)
        assert out.returncode == 1, out.stdout + out.stderr
        (rec,) = emitter.records()
        assert rec["status"] == "failed"
        assert rec["error"] == "host localhost rank 0: no event for 3 s (stalled)"
        assert nothing_left(roots)
        assert not (roots[0] / "fleetperf.lease").exists()
    finally:
        kill_all(roots)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_work_and_keeps_an_aborted_record(
    emitter: Fleetperf, started: list, sig: signal.Signals
) -> None:
    roots = [emitter.results / "hosts" / "localhost"]
    try:
        proc = emitter.popen(
            "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--set", "steps=400"
        )
        started.append(proc)
        wait_streaming(proc, {"localhost"})
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=120)
        assert proc.returncode != 0, rest
        (rec,) = emitter.records()
        assert rec["status"] == "aborted" and rec["error"] == "aborted by the operator"
        assert nothing_left(roots)
        assert not (roots[0] / "fleetperf.lease").exists()
    finally:
        kill_all(roots)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs filled up; unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        with (mnt / "filler").open("wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_full_disk_is_refused_in_preflight(
    emitter: Fleetperf, full_disk: Path, tmp_path: Path
) -> None:
    host = {**local_host(emitter, "localhost"), "fleetperf_run_root": str(full_disk / "runs")}
    inventory = write_inventory(tmp_path / "inv.yml", {"localhost": host})
    out = emitter.batch("emitter", "cpu/CPUx1x1", args=("-i", str(inventory)))
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert f"host localhost: only 0.00 GiB free in {full_disk}/runs, the run needs 1 GiB" in line
    assert not list((full_disk / "runs").glob("*/workload.pid"))
    assert json.loads(emitter.run("results", "--format", "json").stdout or "[]") == []


def test_a_run_with_a_refused_host_launches_nowhere_and_hands_back_every_lease(
    emitter: Fleetperf, two_nodes: Nodes
) -> None:
    """run.yml's refusal play: node2's preflight refuses (too little free space), so node1,
    whose preflight passed and took its lease, launches nothing, hands its lease back and
    fails naming node2; the batch is refused (exit 2) and nothing is left on either host."""
    inventory, nodes = two_nodes
    inv = yaml.safe_load(inventory.read_text())
    inv["all"]["children"]["cpu"]["hosts"]["node2"]["fleetperf_min_free_gib"] = 10**9
    inventory.write_text(yaml.safe_dump(inv))
    out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(inventory)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "host node2: only " in out.stderr and "(fleetperf_min_free_gib)" in out.stderr
    runs = [n.root / "runs" for n in nodes]
    assert not [p for root in runs for p in root.glob("fleetperf.lease")]  # node1's handed back
    assert not [p for root in runs for p in root.glob("*/workload.pid")]  # nothing launched
    assert emitter.records() == []


def test_the_record_blames_the_killed_workload_not_its_peer(
    emitter: Fleetperf, two_nodes: Nodes, started: list
) -> None:
    """Issue 18 §13: node2's rank killed with SIGKILL; node1's rank loses its link to it
    at once ("Connection closed by peer", as gloo says) and fails too. The root cause wins."""
    inventory, nodes = two_nodes
    proc = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx2x1", "--set", "steps=400",
        "--set", "interval_s=0.2", "--set", "peer_link=true", "-i", str(inventory),
    )  # fmt: skip
    started.append(proc)
    wait_streaming(proc, {"node1", "node2"})
    (rank,) = [p for p in run_processes([nodes[1].root / "runs"]) if _is_emitter(p)]
    t_kill = time.monotonic()
    os.kill(rank, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=120)
    took = time.monotonic() - t_kill
    assert proc.returncode == 1, rest
    (rec,) = emitter.records()
    assert rec["status"] == "failed"
    error = rec["error"]
    assert error.startswith("host node2 rank 1: workload exited with code "), error
    assert "SIGKILL" in error, error
    # The final line names the same cause, not the peer's.
    assert "host node2 rank 1" in rest.strip().splitlines()[-1] or error in rest, rest
    # The peer did fail as a consequence (else this test proves nothing).
    peer_events = emitter.results / "runs" / rec["run_id"] / "hosts" / "node1" / "events.jsonl"
    assert "Connection closed by peer" in peer_events.read_text()
    assert took < 30, f"the run ended {took:.1f} s after the kill"
    assert nothing_left([n.root / "runs" for n in nodes])
