"""A run's first host-side step, the preflight: the host's checks (free disk, load, port,
data, the interpreter's modules, a docker run's image) and its lease, taken or refused.
playbooks/library's fleetperf_preflight wraps it for run.yml; the controller's direct
executor (tui/executors/direct.py) calls the same function in its own process for a run on
its own machine, without Ansible. No Ansible here: a refusal is ``Refused``
(fleetperf_refused.py), whose text is the module's one-line failure."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from . import fleetperf_docker
from . import fleetperf_host as files
from .fleetperf_refused import Refused

LEASE = "fleetperf.lease"
# The modules' defaults, which the direct executor passes as they are.
LEASE_STALE_S = 60.0  # fleetperf_preflight's lease_stale_s
IMAGE_LABEL = "org.fleetperf.context"  # tui/catalog/images.py LABEL: the image's build context


def image_id(host: str, p: dict) -> str:
    """The id of the image a docker host runs: the tag ``p["image"]`` on the engine at
    ``p["docker_host"]``, built from the context ``p["image_context"]`` (its label). Refused
    naming the host, the tag, what the engine has instead (an older build of the same
    repository is stale; a tag re-pointed at an image built from anything else is refused)
    and ``p["build_command"]``."""
    image = p["image"]
    if not image:
        raise Refused(
            f"host {host}: no fleetperf image exists for this run's vendor (images/); give"
            " the host fleetperf_executor: process"
        )
    why = fleetperf_docker.require_sdk()
    if why:
        raise Refused(f"host {host}: {why}")
    from docker.errors import ImageNotFound

    found, others = None, []
    try:
        with fleetperf_docker.client(p["docker_host"]) as c:
            try:
                found = c.images.get(image)
            except ImageNotFound:
                repository = image.rsplit(":", 1)[0]
                others = sorted(t for i in c.images.list(repository) for t in i.tags)
    except Exception as exc:  # noqa: BLE001 - any engine error is this host's one-line failure
        raise Refused(f"host {host}: docker engine: {str(exc).splitlines()[0]}") from exc
    build = f"build it with: {p['build_command']}"
    if found is None:
        state = f"stale (the engine has {', '.join(others)})" if others else "missing"
        raise Refused(f"host {host}: image {image} {state}; {build}")
    label = (found.labels or {}).get(IMAGE_LABEL)
    if label != p["image_context"]:
        built = f"built from context {label[:12]}" if label else f"without the {IMAGE_LABEL} label"
        raise Refused(
            f"host {host}: image {image} is {found.id}, {built}, not from"
            f" {p['image_context'][:12]}: the tag points at another image; {build}",
            image_id=found.id,
        )
    return found.id


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


def _found_here(python: str, modules: list[str]) -> bool:
    """Whether ``python`` is this process's interpreter (the direct executor's) and finds
    every module here: then nothing needs a second interpreter started (issue 33). One in
    the same bin directory, the same binary, is the same venv's."""
    here, there = os.path.abspath(sys.executable), os.path.abspath(python)
    try:
        return (
            os.path.dirname(here) == os.path.dirname(there)
            and os.path.samefile(here, there)
            and all(importlib.util.find_spec(m) is not None for m in modules)
        )
    except (OSError, ImportError, ValueError):  # no such python, a name find_spec refuses:
        return False  # python itself says


def unimportable(python: str, modules: list[str]) -> tuple[list[str], str | None]:
    """The modules ``python`` cannot find, and why it could not say (None when it could)."""
    if _found_here(python, modules):
        return [], None
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


def preflight(p: dict, gone: Callable[[], bool] = lambda: False) -> dict:
    """Check the host for one run and take its lease (the module's options as ``p``, its
    defaults applied); the module's result, or Refused with the one line that says why.
    ``gone``: nobody waits for the answer any more (a wait for the lease ends)."""
    host, run_root = p["host"], p["run_root"]
    if p["executor"] not in ("process", "docker"):
        raise Refused(
            f"host {host}: executor {p['executor']} is not supported here (process or"
            " docker; slurm runs through slurm.yml)"
        )
    # A docker host's image (what the case imports was checked in it at planning).
    image = image_id(host, p) if p["executor"] == "docker" and p["image"] is not None else None
    if p["executor"] == "process" and p["python"] == "":
        raise Refused(
            f"host {host}: fleetperf_python is not set: the inventory names the Python that"
            " runs the workload on a process host (e.g. the repository's .venv/bin/python)"
        )
    if p["python"] and p["imports"]:
        lacking, error = unimportable(p["python"], sorted(p["imports"]))
        if error:
            raise Refused(f"host {host}: workload python {p['python']}: {error}")
        if lacking:
            dists = sorted({str(p["imports"][m]) for m in lacking})
            raise Refused(
                f"host {host}: {p['python']} cannot import {', '.join(lacking)}, which "
                f"{p['case']} imports: install {', '.join(dists)} for it (fleetperf_python)"
            )
    missing = missing_data(p["data_dir"], p["requires"])
    if missing:
        raise Refused(f"host {host}: missing {missing[0]} ({files.staging_hint(p['case'])})")
    free = free_gib(run_root)
    if free < p["min_free_gib"]:
        raise Refused(
            f"host {host}: only {free:.2f} GiB free in {run_root}, "
            f"the run needs {p['min_free_gib']:g} GiB (fleetperf_min_free_gib)",
            free_gib=free,
        )
    os.makedirs(run_root, exist_ok=True)
    port = None
    if p["master_port"] is not None:
        port = port_free(p["master_port"])
        if port is None:
            raise Refused(f"host {host}: master port {p['master_port']} is in use")

    mine = {"run_id": p["run_id"], "controller": p["controller"], "taken": time.time()}
    deadline = time.monotonic() + p["lease_wait_s"]
    engine = {"docker_host": p["docker_host"], "host": host} if p["executor"] == "docker" else None
    while (held := try_take(run_root, mine, p["lease_stale_s"], engine)) is not None:
        if time.monotonic() >= deadline or gone():
            wait = p["lease_wait_s"]
            waited = f"waited {wait:g} s" if wait else "use --wait SECONDS"
            raise Refused(f"host {host}: busy: {holder_text(held)}; {waited}")
        time.sleep(1.0)

    run_dir = os.path.join(run_root, p["run_id"])
    os.makedirs(run_dir, exist_ok=True)
    files.replace(os.path.join(run_dir, "config.json"), json.dumps(p["config"], indent=2) + "\n")
    files.replace(os.path.join(run_dir, "heartbeat"), "")  # proof of life until the first poll
    events = os.path.join(run_dir, "events.jsonl")
    files.create(events, "")
    return {
        "changed": True,
        "master_port": port,
        "free_gib": round(free, 2),
        "run_dir": run_dir,
        "events": events,
        "load_per_cpu": load_per_cpu(),
        "synthetic_data": synthetic_data(p["data_dir"], p["data_manifest"]),
        **({"image_id": image} if image else {}),
    }
