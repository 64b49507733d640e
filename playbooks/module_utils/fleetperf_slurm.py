"""The Slurm executor's host side, on the login (submit) host: the job fleetperf submits,
what Slurm says of it, and what its end states mean.

A run is one batch job: ``sbatch`` of JOB_SCRIPT with ``--nodes=NNODES
--ntasks-per-node=1``; the script finds the rendezvous (the first allocated node's
address, a port from the job id) and ``srun`` starts NODE_LAUNCHER once per node, which
runs ``torchrun`` with ``--nnodes=$SLURM_NNODES --node_rank=$SLURM_NODEID`` (one task
per node: torchrun starts the node's processes, as the other executors do). Every node
writes its own directory, RUN_DIR/nodes/NODENAME, on the shared filesystem: events.jsonl,
stdout.log, stderr.log, exit_code, as a host's run dir does.

Slurm's words (states, reasons, node names) come back as data; every command here is an
argv list, never a shell string.
"""

from __future__ import annotations

import os
import re
import subprocess

from ansible.module_utils import fleetperf_host as files

JOB_ID_FILE = "slurm_job_id"
NODES_DIR = "nodes"
CANCEL_REASON = "cancel_reason"
JOB_SCRIPT_FILE = "fleetperf_job.sh"
LAUNCHER_FILE = "fleetperf_node.py"
# Where a node name may go: a path component and an event's host label.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

PENDING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESV_DEL_HOLD")
RUNNING = ("RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING")
# Slurm's end states, as the operator should read them.
END_STATES = {
    "COMPLETED": "completed",
    "FAILED": "failed: a task exited non-zero",
    "TIMEOUT": "TIMEOUT: it ran past its time limit (fleetperf_slurm_time_limit)",
    "NODE_FAIL": "NODE_FAIL: an allocated node failed (stopped answering Slurm) while it ran",
    "PREEMPTED": "PREEMPTED: Slurm took its nodes for a job of higher priority",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY: a task went past its memory limit",
    "CANCELLED": "CANCELLED by someone else (scancel outside fleetperf, or an administrator)",
    "BOOT_FAIL": "BOOT_FAIL: a node failed to boot",
    "DEADLINE": "DEADLINE: it reached its deadline",
    "REVOKED": "REVOKED by a sibling cluster",
    "SPECIAL_EXIT": "SPECIAL_EXIT",
}

# sbatch runs this on the first node. Arguments: the srun command (container options,
# then the launcher and its arguments). It exports the rendezvous for every node.
JOB_SCRIPT = r"""#!/bin/bash
# fleetperf's Slurm job (playbooks/module_utils/fleetperf_slurm.py): one task per node.
set -u
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
addr=$(scontrol show node -o "$first" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
export FLEETPERF_MASTER_ADDR=${addr:-$first}
export FLEETPERF_MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 "$@"
"""

# srun runs this on every node (in the container, where the site uses one). Arguments:
# run_dir, data_dir, nproc_per_node, then the workload's argv ending in --run-dir, to
# which the node's own directory is appended. It says what the node lacks, binds gloo to
# the interface of the node's Slurm address, runs the workload with its output and exit
# code in the node's directory, and passes Slurm's SIGTERM on.
NODE_LAUNCHER = r"""
import os, re, signal, socket, subprocess, sys
run_dir, data_dir, nproc, argv = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
node = os.environ["SLURMD_NODENAME"]
if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", node):
    sys.exit(f"fleetperf: Slurm node name {node!r} is not usable as a directory")
node_dir = os.path.join(run_dir, "nodes", node)
os.makedirs(node_dir, exist_ok=True)
lacks = [p for p in (data_dir, argv[0]) if not os.path.exists(p)]
try:
    import torch  # noqa: F401
except ImportError:
    lacks.append(f"python {sys.executable} without torch")
err = open(os.path.join(node_dir, "stderr.log"), "ab")
if lacks:
    err.write(f"fleetperf: node {node} lacks {', '.join(lacks)}\n".encode())
    err.close()
    code = 3
else:
    nnodes = int(os.environ.get("SLURM_NNODES", "1"))
    env = dict(os.environ)
    addr = os.environ["FLEETPERF_MASTER_ADDR"]
    # gloo and NCCL bind the node's Slurm address, not lo (as fleetperf_launch does for
    # SSH hosts; this runs on the node, where no module code is)
    ifnames = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    if not all(name in env for name in ifnames):
        mine = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True,
                              text=True).stdout
        found = re.search(r"NodeAddr=(\S+)", mine)
        try:  # NodeAddr may be a name: what it resolves to here
            mine = {i[4][0] for i in socket.getaddrinfo(found[1], None)} if found else set()
        except OSError:
            mine = set()
        ip = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True,
                            text=True).stdout
        for line in ip.splitlines():
            words = line.split()
            if len(words) > 3 and words[3].split("/")[0] in mine:
                for name in ifnames:
                    env.setdefault(name, words[1].split("@")[0])
    if nnodes > 1 or nproc > 1:
        argv = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
                f"--node_rank={os.environ['SLURM_NODEID']}", f"--nproc_per_node={nproc}",
                f"--master_addr={addr}", f"--master_port={os.environ['FLEETPERF_MASTER_PORT']}",
                *argv, node_dir]
    else:
        argv = [sys.executable, *argv, node_dir]
    with open(os.path.join(node_dir, "stdout.log"), "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    code = proc.wait()
tmp = os.path.join(node_dir, "exit_code.tmp")
with open(tmp, "w") as f:
    f.write(str(code))
os.replace(tmp, os.path.join(node_dir, "exit_code"))
sys.exit(code)
"""


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def one_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def job_id(run_dir: str) -> str | None:
    """The job this run submitted, from its run dir; None before the submit."""
    text = (files.read_text(os.path.join(run_dir, JOB_ID_FILE)) or "").strip()
    return text if re.fullmatch(r"\d+(_\d+)?", text) else None


def job_info(job: str) -> dict[str, str] | None:
    """What slurmctld says of the job (``scontrol show job -o``), then the accounting
    database (``sacct``, where the site keeps one); None when neither knows it."""
    done = run(["scontrol", "show", "job", "-o", job])
    if done.returncode == 0 and done.stdout.strip():
        return dict(re.findall(r"(\w+)=(\S*)", done.stdout))
    done = run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "State,ExitCode,NodeList,Partition"])
    fields = done.stdout.strip().splitlines()[0].split("|") if done.returncode == 0 else []
    if len(fields) == 4:
        state = fields[0].split()[0] if fields[0] else "UNKNOWN"
        keys = ("JobState", "ExitCode", "NodeList", "Partition")
        return dict(zip(keys, [state, *fields[1:]], strict=True))
    return None


def nodes_of(nodelist: str) -> list[str]:
    """A Slurm hostlist ("node[1-2]") as names, those usable as directories only."""
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    done = run(["scontrol", "show", "hostnames", nodelist])
    return [n for n in done.stdout.split() if NODE_NAME.fullmatch(n)]


def cancel(job: str) -> str:
    """scancel the job; Slurm's complaint, if any."""
    done = run(["scancel", job])
    return "" if done.returncode == 0 else one_line(done.stderr)


def node_dirs(run_dir: str) -> dict[str, str]:
    """The nodes' directories under the run dir: real directories only, never a link."""
    root = os.path.join(run_dir, NODES_DIR)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return {}
    found = {}
    for name in names:
        path = os.path.join(root, name)
        if NODE_NAME.fullmatch(name) and os.path.isdir(path) and not os.path.islink(path):
            found[name] = path
    return found
