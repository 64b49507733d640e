"""A local Slurm cluster on a fleet's hosts (``fleetperf fleet up N --slurm``): munge,
slurmctld on the login host, slurmd on each node, their files in the hosts' overlays."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tui.core.paths import REPO_ROOT
from tui.localfleet.hosts import SYSTEM_PATH, Fleet, Host

SLURM_DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
LOGIN = "login"  # the host that runs slurmctld and that jobs are submitted from
# Under an overlaid directory: the same path on every host, each host's own file. Slurm's
# clients find munge's socket through slurm.conf (AuthInfo), which all hosts share.
HOST_SLURM_DIR = "/var/lib/fleetperf-slurm"
MUNGE_SOCKET = f"{HOST_SLURM_DIR}/munge.socket"


def slurm_available() -> str | None:
    """None when a local Slurm cluster can be made here, else the reason it cannot."""
    for daemon in SLURM_DAEMONS:
        if not Path(daemon).is_file():
            return f"a local Slurm cluster needs {daemon} (scripts/bootstrap installs it)"
    return None


def slurm_conf(fleet: Fleet, login: Host, nodes: list[Host]) -> str:
    """slurm.conf of the fleet's cluster: daemons run as root, files in the fleet's
    directory (per node: %n), no cgroups (the hosts share this machine's), no accounting
    database; a node that stops answering is down after 10 s and its job ends NODE_FAIL."""
    state = fleet.workdir / "slurm"
    hosts = fleet.workdir / "hosts"
    # slurmctld checks that it runs on SlurmctldHost: the hosts share this machine's name.
    lines = [
        "ClusterName=fleetperf",
        f"SlurmctldHost={os.uname().nodename.split('.')[0]}({login.address})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={MUNGE_SOCKET}",
        f"StateSaveLocation={state / 'state'}",
        f"SlurmctldPidFile={state / 'slurmctld.pid'}",
        f"SlurmctldLogFile={state / 'slurmctld.log'}",
        f"SlurmdSpoolDir={hosts}/%n/slurmd",
        f"SlurmdPidFile={hosts}/%n/slurmd.pid",
        f"SlurmdLogFile={hosts}/%n/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "ReturnToService=2",
        "SlurmdTimeout=10",
        "MessageTimeout=5",
        "KillWait=5",
        "MinJobAge=3600",
        "JobRequeue=0",
        "InactiveLimit=0",
        "SchedulerType=sched/backfill",
        f"NodeName=DEFAULT CPUs={os.cpu_count() or 1} State=UNKNOWN",
        *(f"NodeName={n.name} NodeAddr={n.address}" for n in nodes),
        f"PartitionName=debug Nodes={','.join(n.name for n in nodes)} Default=YES"
        " MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def _in_host(host: Host, *argv: str) -> None:
    """Run argv on this machine in the host's namespaces (its overlays, its network)."""
    done = subprocess.run(
        host.exec_argv(list(argv)), env={"PATH": SYSTEM_PATH}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"local host {host.name}: {argv[0]}: {done.stderr.strip()}")


def start_slurm(fleet: Fleet, login: Host, nodes: list[Host]) -> None:
    """munged on every host, slurmctld on ``login``, slurmd on ``nodes``; waits until
    every node is idle. Their configuration and key live in the fleet's directory and in
    the hosts' overlays (/etc/slurm, HOST_SLURM_DIR), never in this machine's /etc; the
    daemons run in the hosts' namespaces, so closing the fleet ends them."""
    state = fleet.workdir / "slurm"
    (state / "state").mkdir(parents=True, exist_ok=True)
    key = state / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    conf = state / "slurm.conf"
    conf.write_text(slurm_conf(fleet, login, nodes))
    for host in (login, *nodes):
        _in_host(host, "mkdir", "-p", "-m", "0700", HOST_SLURM_DIR, "/etc/slurm")
        _in_host(host, "cp", str(conf), "/etc/slurm/slurm.conf")  # into the host's overlay
        (host.root / "slurmd").mkdir(exist_ok=True)
        _in_host(
            host,
            "/usr/sbin/munged",
            "--force",
            f"--key-file={key}",
            f"--socket={MUNGE_SOCKET}",
            f"--pid-file={host.root / 'munged.pid'}",
            f"--log-file={host.root / 'munged.log'}",
            f"--seed-file={host.root / 'munged.seed'}",
        )
    _in_host(login, "/usr/sbin/slurmctld", "-f", "/etc/slurm/slurm.conf")
    for node in nodes:
        _in_host(node, "/usr/sbin/slurmd", "-f", "/etc/slurm/slurm.conf", "-N", node.name)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = login.ssh("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
        if len(seen) == 2 * len(nodes) and all(s == "idle" for s in seen[1::2]):
            return
        time.sleep(0.5)
    raise RuntimeError(f"local Slurm cluster: nodes not idle after 60 s (see {state})")


def slurm_inventory(fleet: Fleet, login: Host) -> dict:
    """Group cpu with one host, the login node, that submits to the fleet's cluster;
    the run root on the shared filesystem (this machine's /tmp, seen by every host)."""
    host_vars = {
        LOGIN: {
            "fleetperf_executor": "slurm",
            "fleetperf_repo_dir": str(REPO_ROOT),
            "fleetperf_python": sys.executable,
            "fleetperf_data_root": (
                "{{ fleetperf_controller_data_root | default('" + str(REPO_ROOT / "data") + "') }}"
            ),
            "fleetperf_run_root": str(fleet.workdir / "runs"),
            "fleetperf_slurm_partition": "debug",
            "fleetperf_slurm_time_limit": "00:30:00",
        }
    }
    return fleet.inventory({"cpu": [login]}, host_vars)
