#!/usr/bin/python
"""Make a host ready for one run: check it, create the run dir, take the host lease."""

DOCUMENTATION = r"""
module: fleetperf_preflight
short_description: Check a fleetperf host and take its lease, in one module run
description:
  - Fails with one line naming O(host) when O(python) cannot find a module of O(imports),
    when the case's data is missing, when the run root
    has less than O(min_free_gib) free, when O(master_port) is taken on this host, or when
    another run holds the host lease and does not let go within O(lease_wait_s).
  - Creates O(run_root)/O(run_id), writes O(config) there as C(config.json), and creates
    the empty C(events.jsonl) that it returns as C(events); the controller follows it
    (tui/core/stream.py) from before the launch, and C(tail -F) on a file that does not exist
    yet falls back to polling once a second instead of inotify.
  - The lease is O(run_root)/fleetperf.lease, a JSON file naming the run and its
    controller. It is stale, and taken over, when its run's workload no longer runs (a process
    run runs while there is no C(exit_code) and the supervisor of C(workload.pid) is still
    the process the launch recorded in C(workload.id), same boot and start time, so a pid
    reused or from before a reboot does not hold the host; a docker run, while the engine at
    O(docker_host) says a container labelled with that run and O(host) runs) and either the
    controller process is provably gone (same boot, PID and time namespaces, its pid free or
    started at another time; a controller in a container on the host proves nothing) or the
    run's C(heartbeat)
    (touched by M(fleetperf_tail) while it polls) is older than O(lease_stale_s).
    M(fleetperf_stop) releases it.
  - Every take, take-over and release happens under an exclusive C(flock) of
    O(run_root)/fleetperf.lease.lock (a file never removed), and the lease is written whole
    to a temp file and renamed into place; a lease is never seen half written, and of
    preflights racing for one host exactly one holds it.
options:
  host:
    description: The inventory name, for messages.
    type: str
    required: true
  run_root:
    description: Where run directories live on this host.
    type: path
    required: true
  run_id: {description: The run., type: str, required: true}
  case:
    description: The case, for the hint that stages its data.
    type: str
    required: true
  data_dir: {description: The case's data directory., type: path, required: true}
  requires:
    description: Paths under O(data_dir) that must exist.
    type: list
    elements: str
    default: []
  config:
    description: The resolved config, written as C(config.json).
    type: dict
    required: true
  min_free_gib: {description: Least free space in the run root (GiB)., type: float, default: 1.0}
  master_port:
    description: On the master host, the rendezvous port to check (V(0) picks a free one);
      omitted on the other hosts.
    type: int
  controller:
    description: The controller that takes the lease (host, pid, start, boot_id, pidns,
      timens, machine_id).
    type: dict
    required: true
  lease_wait_s:
    description: Seconds to wait for a lease another run holds (0 refuses at once).
    type: float
    default: 0
  lease_stale_s: {description: Heartbeat age that makes a lease stale., type: float, default: 60}
  data_manifest:
    description: The file in O(data_dir) that C(fleetperf prepare) writes (how the data was
      made). Its C(synthetic) comes back as RV(synthetic_data), null where it is absent.
    type: str
    required: true
  python:
    description: The workload's interpreter (C(fleetperf_python)) on a process host; it must
      find each module of O(imports) (C(importlib.util.find_spec), in this module's
      environment, without importing them).
    type: str
  imports:
    description: Top-level modules the workload imports (tui/catalog/caseimports.py) -> the
      distribution that provides each, for the message. Checked only with O(python).
    type: dict
    default: {}
  executor:
    description: The host's C(fleetperf_executor); this module serves V(process) and
      V(docker) hosts and refuses any other first (a Slurm login host runs slurm.yml).
    type: str
    default: process
  docker_host:
    description: The engine of a V(docker) host (V("") is the local one).
    type: str
    default: ""
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
seealso:
  - module: fleetperf_launch
  - module: fleetperf_stop
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Check the host and take its lease
  fleetperf_preflight:
    host: "{{ inventory_hostname }}"
    run_root: /var/lib/fleetperf/runs
    run_id: distilbert-20250101-120000-ab12
    case: distilbert
    data_dir: /var/lib/fleetperf/data/distilbert
    requires: [train.jsonl, vocab.txt]
    config: {case: distilbert, nnodes: 1, nproc_per_node: 1, hp: {lr: 0.0001}}
    master_port: 0
    controller:
      host: ctl.example.org
      pid: 4242
      start: 81234
      boot_id: 7c1e0b6e-0d7a-4a43-9a52-3a8f1c2b9e10
      pidns: 4026531836
      timens: 4026531834
      machine_id: null
    lease_wait_s: 60
    data_manifest: fleetperf-data.json
    python: /opt/fleetperf/venv/bin/python
    imports: {torch: torch, transformers: transformers, yaml: pyyaml}
  register: ready
"""

RETURN = r"""
master_port:
  description: The rendezvous port found free (O(master_port), or the free one picked for
    V(0)); null where O(master_port) was not given.
  returned: success
  type: int
  sample: 29500
free_gib:
  description: Free space in O(run_root), in GiB.
  returned: success, and on failure for too little of it
  type: float
  sample: 412.37
run_dir:
  description: The run's directory, O(run_root)/O(run_id), now created.
  returned: success
  type: path
  sample: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
events:
  description: The run's C(events.jsonl), created empty for the controller to follow.
  returned: success
  type: path
  sample: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12/events.jsonl
load_per_cpu:
  description: The host's 1-minute load average per CPU as the run starts.
  returned: success
  type: float
  sample: 0.04
synthetic_data:
  description: Whether C(fleetperf prepare --synthetic) made the data (O(data_manifest));
    null when the manifest does not say.
  returned: success
  type: bool
  sample: false
"""

import json
import os
import socket
import subprocess
import time

from ansible.module_utils import fleetperf_docker
from ansible.module_utils import fleetperf_host as files
from ansible.module_utils.basic import AnsibleModule

LEASE = "fleetperf.lease"


def missing_data(data_dir: str, requires: list[str]) -> list[str]:
    paths = [os.path.join(data_dir, p) for p in requires]
    return [p for p in paths if not os.path.exists(p)]


def synthetic_data(data_dir: str, manifest: str) -> bool | None:
    """Whether `fleetperf prepare --synthetic` made the data; None: staged some other way."""
    try:
        with open(os.path.join(data_dir, manifest)) as f:
            value = json.load(f).get("synthetic")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


# Prints the modules of argv that the interpreter cannot find; imports none of them.
FIND = (
    "import importlib.util, sys; "
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


def unimportable(python: str, modules: list[str]) -> tuple[list[str], str | None]:
    """The modules ``python`` cannot find, and why it could not say (None when it could)."""
    try:
        done = subprocess.run(
            [python, "-c", FIND, *modules], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], str(exc)
    if done.returncode != 0:
        return [], (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return done.stdout.split(), None


def load_per_cpu() -> float:
    """This host's 1-minute load average per CPU: other work on it when the run starts."""
    return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)


def free_gib(path: str) -> float:
    """Free space for unprivileged writers where path is, or would be created."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**30


def port_free(port: int) -> int | None:
    """The port if a listener could bind it here (a free one for 0), else None."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the rendezvous store does
        try:
            s.bind(("", port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def container_running(run_dir: str, engine: dict | None) -> bool:
    """A docker run's container still runs (the engine says so, found by its labels);
    False on a process host, or when the engine cannot say (then the heartbeat decides)."""
    if engine is None or fleetperf_docker.require_sdk():
        return False
    try:
        target = fleetperf_docker.target(run_dir, engine["docker_host"], engine["host"])
        return fleetperf_docker.exit_code(target) is None
    except Exception:  # noqa: BLE001 - an engine error: unknown
        return False


def holder_alive(run_root: str, lease: dict, stale_s: float, engine: dict | None) -> bool:
    """Whether the run holding the lease may still use the host."""
    run_dir = os.path.join(run_root, str(lease.get("run_id")))
    if files.running(run_dir) or container_running(run_dir, engine):
        return True
    ctl = lease.get("controller") or {}
    if files.controller_gone(ctl):
        return False  # its controller was on this machine, in this namespace, and is gone
    beat = files.regular_stat(os.path.join(run_dir, "heartbeat"))
    last = beat.st_mtime if beat else float(lease.get("taken", 0))
    return time.time() - last < stale_s


def try_take(run_root: str, mine: dict, stale_s: float, engine: dict | None = None) -> dict | None:
    """Take the lease; None on success, else the live holder's lease. ``engine``: a docker
    host's docker_host and host, where a holder's container may run."""
    path = os.path.join(run_root, LEASE)
    with files.locked(path):  # what holds is what this reads: nobody else writes meanwhile
        held = files.read_lease(path)
        if held is not None and held.get("run_id") == mine["run_id"]:
            return None  # ours already (preflight run again)
        if held is not None and holder_alive(run_root, held, stale_s, engine):
            return held
        files.replace(path, json.dumps(mine))  # none, or stale: ours now
    return None


def holder_text(held: dict) -> str:
    ctl = held.get("controller") or {}
    since = time.strftime("%H:%M:%S", time.gmtime(float(held.get("taken", 0))))
    return (
        f"run {held.get('run_id', '?')} holds it (controller pid {ctl.get('pid', '?')} "
        f"on {ctl.get('host', '?')}, since {since} UTC)"
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "run_root": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "case": {"type": "str", "required": True},
            "data_dir": {"type": "path", "required": True},
            "requires": {"type": "list", "elements": "str", "default": []},
            "config": {"type": "dict", "required": True},
            "min_free_gib": {"type": "float", "default": 1.0},
            "master_port": {"type": "int"},
            "controller": {"type": "dict", "required": True},
            "lease_wait_s": {"type": "float", "default": 0},
            "lease_stale_s": {"type": "float", "default": 60},
            "data_manifest": {"type": "str", "required": True},
            "python": {"type": "str"},
            "imports": {"type": "dict", "default": {}},
            "executor": {"type": "str", "default": "process"},
            "docker_host": {"type": "str", "default": ""},
        },
        supports_check_mode=False,
    )
    p = module.params
    host, run_root = p["host"], p["run_root"]
    if p["executor"] not in ("process", "docker"):
        module.fail_json(
            msg=f"host {host}: executor {p['executor']} is not supported here (process or"
            " docker; slurm runs through slurm.yml)"
        )
    if p["executor"] == "process" and p["python"] == "":
        module.fail_json(
            msg=f"host {host}: fleetperf_python is not set: the inventory names the Python that"
            " runs the workload on a process host (e.g. the repository's .venv/bin/python)"
        )
    if p["python"] and p["imports"]:
        lacking, error = unimportable(p["python"], sorted(p["imports"]))
        if error:
            module.fail_json(msg=f"host {host}: workload python {p['python']}: {error}")
        if lacking:
            dists = sorted({str(p["imports"][m]) for m in lacking})
            module.fail_json(
                msg=f"host {host}: {p['python']} cannot import {', '.join(lacking)}, which "
                f"{p['case']} imports: install {', '.join(dists)} for it (fleetperf_python)"
            )
    missing = missing_data(p["data_dir"], p["requires"])
    if missing:
        module.fail_json(msg=f"host {host}: missing {missing[0]} ({files.staging_hint(p['case'])})")
    free = free_gib(run_root)
    if free < p["min_free_gib"]:
        module.fail_json(
            msg=f"host {host}: only {free:.2f} GiB free in {run_root}, "
            f"the run needs {p['min_free_gib']:g} GiB (fleetperf_min_free_gib)",
            free_gib=free,
        )
    os.makedirs(run_root, exist_ok=True)
    port = None
    if p["master_port"] is not None:
        port = port_free(p["master_port"])
        if port is None:
            module.fail_json(msg=f"host {host}: master port {p['master_port']} is in use")

    mine = {"run_id": p["run_id"], "controller": p["controller"], "taken": time.time()}
    deadline = time.monotonic() + p["lease_wait_s"]
    engine = {"docker_host": p["docker_host"], "host": host} if p["executor"] == "docker" else None
    while (held := try_take(run_root, mine, p["lease_stale_s"], engine)) is not None:
        if time.monotonic() >= deadline:
            wait = p["lease_wait_s"]
            waited = f"waited {wait:g} s" if wait else "use --wait SECONDS"
            module.fail_json(msg=f"host {host}: busy: {holder_text(held)}; {waited}")
        time.sleep(1.0)

    run_dir = os.path.join(run_root, p["run_id"])
    os.makedirs(run_dir, exist_ok=True)
    files.replace(os.path.join(run_dir, "config.json"), json.dumps(p["config"], indent=2) + "\n")
    files.replace(os.path.join(run_dir, "heartbeat"), "")  # proof of life until the first poll
    events = os.path.join(run_dir, "events.jsonl")
    files.create(events, "")
    module.exit_json(
        changed=True,
        master_port=port,
        free_gib=round(free, 2),
        run_dir=run_dir,
        events=events,
        load_per_cpu=load_per_cpu(),
        synthetic_data=synthetic_data(p["data_dir"], p["data_manifest"]),
    )


if __name__ == "__main__":
    main()
