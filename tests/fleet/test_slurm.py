"""The Slurm executor on a real local Slurm cluster (``fleetperf fleet up N --slurm``):
slurmctld and munged on a login host, slurmd on two nodes, each in its own network and
mount namespace. A 2-node job passes through ``--batch``; planning refuses what the
partition cannot run; a cancelled job, a time-limit overrun and a killed node end as
they should, leaving no job in Slurm and no process on the nodes; ``fleet down`` leaves
nothing behind.
"""

from __future__ import annotations

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
from conftest import REPO, Fleetperf
from testhosts import fleet, leftovers

from tui.localfleet import hosts, slurm

pytestmark = [
    pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available())),
    pytest.mark.skipif(slurm.slurm_available() is not None, reason=str(slurm.slurm_available())),
    pytest.mark.xdist_group("slurm"),  # one cluster, its tests one after another
    pytest.mark.slow,  # a real Slurm cluster: its start alone takes seconds
]
DAEMONS = {"sshd", "munged", "slurmd", "slurmctld"}


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.inventory = workdir / "inventory.yml"
        self.state = json.loads((workdir / "fleet.json").read_text())
        self.fleet = hosts.Fleet.load(workdir)

    def login(self, *argv: str) -> str:
        return self.fleet.hosts[slurm.LOGIN].ssh(*argv).stdout

    def jobs(self) -> list[str]:
        return self.login("squeue", "-h", "-o", "%i %T").split("\n")[:-1]

    def job_state(self, job: str) -> str:
        out = self.login("scontrol", "show", "job", "-o", job)
        return out.split("JobState=")[1].split()[0]

    def stray(self, node: str) -> list[str]:
        """Processes in a node's namespace other than its daemons (the job's, if any)."""
        ns = self.fleet.hosts[node].netns
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        found = []
        for pid in pids.stdout.split():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except FileNotFoundError:
                continue
            if comm not in DAEMONS:
                found.append(f"{node}: {pid} {comm}")
        return found

    def settled(self, seconds: float = 30) -> tuple[list[str], list[str]]:
        """Jobs in squeue and stray processes on the nodes, once both are gone (or not)."""
        deadline = time.monotonic() + seconds
        while True:
            jobs, procs = self.jobs(), self.stray("node1") + self.stray("node2")
            if (not jobs and not procs) or time.monotonic() > deadline:
                return jobs, procs
            time.sleep(0.5)

    def with_vars(self, path: Path, **login_vars: object) -> Path:
        """A copy of the inventory with the login host's vars changed."""
        inv = yaml.safe_load(self.inventory.read_text())
        inv["all"]["children"]["cpu"]["hosts"]["login"].update(login_vars)
        path.write_text(yaml.safe_dump(inv))
        return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("slurm") / "fleet"
    up = fleet("up", "2", "--slurm", "--dir", str(workdir))
    assert up.returncode == 0, up.stderr
    state = json.loads((workdir / "fleet.json").read_text())
    try:
        yield Cluster(workdir)
    finally:
        down = fleet("down", "--dir", str(workdir))
        assert down.returncode == 0, down.stderr
        assert "3 host(s) down" in down.stdout
        assert leftovers(workdir, state) == []
        assert not [p for p in Path("/proc").glob("[0-9]*") if _daemon_of(p, workdir)]


def _daemon_of(proc: Path, workdir: Path) -> bool:
    """A munged, slurmctld or slurmd that the fleet in ``workdir`` started."""
    try:
        argv = (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(workdir) in argv and any(d in argv for d in ("munged", "slurmd", "slurmctld"))


def test_inventory_uses_the_cluster(cluster: Cluster) -> None:
    inv = yaml.safe_load(cluster.inventory.read_text())
    login = inv["all"]["children"]["cpu"]["hosts"]["login"]
    assert login["fleetperf_executor"] == "slurm"
    assert login["fleetperf_slurm_partition"] == "debug"
    assert "node1" in cluster.login("sinfo", "-h", "-N", "-o", "%N %t")
    # Nothing of the cluster in this machine's /etc: the key and slurm.conf are the fleet's.
    assert not Path("/etc/slurm/slurm.conf").exists()


def test_a_two_node_job_passes(cluster: Cluster, emitter: Fleetperf) -> None:
    out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(cluster.inventory)))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "login        queued: slurm job " in out.stdout
    assert "running on node1, node2" in out.stdout
    assert "node1        started: world size 2" in out.stdout
    assert "node2        step" in out.stdout
    (rec,) = emitter.records()
    assert rec["status"] == "passed" and rec["executor"] == "slurm"
    assert rec["hosts"] == ["login"]
    slurm = rec["executor_detail"]
    assert slurm["partition"] == "debug" and slurm["nodes"] == ["node1", "node2"]
    assert slurm["state"] == "COMPLETED"
    assert cluster.job_state(slurm["job_id"]) == "COMPLETED"
    run = emitter.results / "runs" / rec["run_id"] / "hosts"
    assert (run / "node2" / "exit_code").read_text() == "0"
    assert cluster.settled() == ([], [])


@pytest.mark.slow  # real training on two nodes over gloo: minutes on 2 cores
def test_distilbert_on_two_nodes_passes(cluster: Cluster, tmp_path: Path) -> None:
    fp = Fleetperf(REPO / "cases", tmp_path / "data", tmp_path / "results")
    out = fp.run("prepare", "distilbert-pytorch", "--synthetic")
    assert out.returncode == 0, out.stderr
    out = fp.batch(
        "distilbert-pytorch", "cpu/CPUx2x1", args=("-i", str(cluster.inventory)), timeout=900
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "node1        started: world size 2" in out.stdout
    assert "node2        started: world size 2" in out.stdout
    (rec,) = fp.records()
    assert rec["status"] == "passed" and rec["config"] == "CPUx2x1"
    assert rec["executor_detail"]["nodes"] == ["node1", "node2"] and rec["metrics"]["acc"] >= 0.9
    assert cluster.settled() == ([], [])


@pytest.mark.parametrize(
    ("login_vars", "config", "message"),
    [
        (
            {"fleetperf_slurm_partition": "gpu"},
            "cpu/CPUx1x1",
            "host login: slurm: partition 'gpu': Partition gpu not found"
            " (fleetperf_slurm_partition)",
        ),
        (
            {},
            "cpu/CPUx3x1",
            "host login: slurm: partition debug has 2 usable node(s) with 1+ CPUs (of 2),"
            " the config needs 3",
        ),
        (
            {"fleetperf_slurm_gres": "gpu"},
            "cpu/CPUx1x1",
            "host login: slurm: partition debug has 0 usable node(s) with gpu:1 (of 2),"
            " the config needs 1",
        ),
    ],
)
def test_planning_refuses_what_the_partition_cannot_run(
    cluster: Cluster,
    emitter: Fleetperf,
    tmp_path: Path,
    login_vars: dict,
    config: str,
    message: str,
) -> None:
    if config == "cpu/CPUx3x1":
        configs = emitter.cases_dir / "emitter" / "configs" / "cpu"
        (configs / "CPUx3x1.yaml").write_text((configs / "CPUx2x1.yaml").read_text())
    inventory = cluster.with_vars(tmp_path / "inv.yml", **login_vars)
    out = emitter.batch("emitter", config, args=("-i", str(inventory)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"fleetperf: error: {message} (nothing launched)" in out.stderr
    assert emitter.records() == [] and cluster.jobs() == []


@pytest.mark.slow
def test_a_node_says_what_it_lacks(cluster: Cluster, emitter: Fleetperf, tmp_path: Path) -> None:
    """The system Python (no torch) as the nodes' interpreter: the node names it."""
    inventory = cluster.with_vars(tmp_path / "inv.yml", fleetperf_python="/usr/bin/python3")
    out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(inventory)))
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = emitter.records()
    assert rec["error"].startswith("host login: slurm job "), rec["error"]
    assert "exited with code 3: fleetperf: node node" in rec["error"]
    assert "lacks python /usr/bin/python3 without torch" in rec["error"]
    assert cluster.settled() == ([], [])


def _wait_running(out_path: Path, proc: subprocess.Popen, seconds: float = 60) -> str:
    """The job id once ``--batch``'s output says the job runs on both nodes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        text = out_path.read_text()
        if "node2        step" in text:
            return text.split("slurm job ")[1].split()[0]
        time.sleep(0.2)
    raise AssertionError(f"the job never ran: {out_path.read_text()}")


def _popen(emitter: Fleetperf, inventory: Path, out_path: Path, *sets: str) -> subprocess.Popen:
    set_args = [a for kv in sets for a in ("--set", kv)]
    argv = ["--batch", "--case", "emitter", "--config", "cpu/CPUx2x1", *set_args]
    return subprocess.Popen(
        emitter.argv(*argv, "-i", str(inventory)),
        env=emitter.env(),
        cwd=REPO,
        stdout=out_path.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_sigterm_cancels_the_job_everywhere(
    cluster: Cluster, emitter: Fleetperf, tmp_path: Path
) -> None:
    out_path = tmp_path / "out.txt"
    proc = _popen(emitter, cluster.inventory, out_path, "steps=100000")
    job = _wait_running(out_path, proc)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(120) == 1, out_path.read_text()
    (rec,) = emitter.records()
    assert rec["status"] == "aborted" and rec["executor_detail"]["job_id"] == job
    assert cluster.job_state(job) == "CANCELLED"
    assert cluster.settled() == ([], [])


@pytest.mark.slow
def test_a_cancel_by_someone_else_is_named(
    cluster: Cluster, emitter: Fleetperf, tmp_path: Path
) -> None:
    out_path = tmp_path / "out.txt"
    proc = _popen(emitter, cluster.inventory, out_path, "steps=100000")
    job = _wait_running(out_path, proc)
    cluster.login("scancel", job)
    assert proc.wait(120) == 1, out_path.read_text()
    (rec,) = emitter.records()
    assert rec["status"] == "failed"
    assert rec["error"].startswith(f"host login: slurm job {job} on node1, node2: CANCELLED by")
    assert cluster.settled() == ([], [])


@pytest.mark.slow
def test_a_time_limit_overrun_fails_as_timeout(
    cluster: Cluster, emitter: Fleetperf, tmp_path: Path
) -> None:
    inventory = cluster.with_vars(tmp_path / "inv.yml", fleetperf_slurm_time_limit="1")
    out_path = tmp_path / "out.txt"
    proc = _popen(emitter, inventory, out_path, "steps=100000")
    job = _wait_running(out_path, proc)
    assert proc.wait(240) == 1, out_path.read_text()
    (rec,) = emitter.records()
    assert rec["status"] == "failed", rec
    assert f"slurm job {job} on node1, node2: TIMEOUT: it ran past its time limit" in rec["error"]
    assert rec["executor_detail"]["state"] == "TIMEOUT"
    assert cluster.settled() == ([], [])


@pytest.mark.slow
def test_a_killed_node_fails_as_node_fail(
    cluster: Cluster, emitter: Fleetperf, tmp_path: Path
) -> None:
    """Last: node2 stays down (its slurmd, slurmstepd and workload killed)."""
    out_path = tmp_path / "out.txt"
    proc = _popen(emitter, cluster.inventory, out_path, "steps=100000")
    job = _wait_running(out_path, proc)
    node2 = cluster.fleet.hosts["node2"]
    pids = subprocess.run(["ip", "netns", "pids", node2.netns], capture_output=True, text=True)
    for pid in pids.stdout.split():
        if int(pid) != node2.sshd_pid:  # the node dies; its ssh stays for the test to look
            os.kill(int(pid), signal.SIGKILL)
    assert proc.wait(240) == 1, out_path.read_text()
    (rec,) = emitter.records()
    assert rec["status"] == "failed", rec
    assert f"slurm job {job} on node1, node2: NODE_FAIL: an allocated node failed" in rec["error"]
    assert cluster.settled(60) == ([], [])
