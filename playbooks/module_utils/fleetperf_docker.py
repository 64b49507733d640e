"""The docker executor of fleetperf's launch, tail and stop modules (Docker SDK for Python).

A workload container runs the same supervisor as a process launch, so stdout.log,
stderr.log and exit_code land in the run directory (mounted read-write at its host path)
either way; what differs is only where it runs and how it is stopped. Containers carry
the labels fleetperf.run_id, fleetperf.case and fleetperf.host (several inventory hosts may
share one engine): stop and cleanup find them by run id, through container.json in the run
dir, which the launch writes before it starts anything.

Never privileged: device access is exactly what the vendor's group_vars list.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from typing import Any

from ansible.module_utils.fleetperf_host import read_text, replace

LABEL_RUN = "fleetperf.run_id"
LABEL_CASE = "fleetperf.case"
LABEL_HOST = "fleetperf.host"  # the inventory host: several may share one engine

TARGET = "container.json"  # in the run dir: which engine and labels hold the run's container

# The launch module's ``container`` option (argument spec suboptions): the vendor's settings
# (group_vars) and the run's. Paths are the host's, mounted at the same path.
CONTAINER_OPTIONS: dict[str, Any] = {
    "image": {"type": "str", "required": True},  # the expected tag (tui/images.py)
    "case": {"type": "str", "required": True},
    "mounts_ro": {"type": "list", "elements": "path", "default": []},  # data, case code
    "host_network": {"type": "bool", "default": False},  # multi-node runs only
    "network": {"type": "str", "default": ""},  # single node: "" = the engine's default
    "gpus": {"type": "str", "default": ""},  # docker --gpus: all, a count, ids "0,1"
    "devices": {"type": "list", "elements": "str", "default": []},  # globs
    "cap_add": {"type": "list", "elements": "str", "default": []},
    "ulimits": {"type": "dict", "default": {}},  # name -> value, -1 = unlimited
    "shm_size": {"type": "str", "default": ""},
}


def require_sdk() -> str | None:
    """Why the docker executor cannot run on this host, or None."""
    try:
        import docker  # noqa: F401 - imported late: process runs (and their polls) never load it
    except ImportError:
        return "the docker executor needs the Docker SDK for Python (pip package docker)"
    return None


def client(docker_host: str) -> contextlib.closing:
    """A client of the engine at ``docker_host`` ("" = DOCKER_HOST or the local socket)."""
    import docker

    c = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
    return contextlib.closing(c)


def target(run_dir: str) -> dict[str, str] | None:
    """The run's container target (docker_host, run_id, host), or None for a process run.

    The container can write this file (its run dir is mounted): a regular file only, and
    one naming another run (whose containers stop would then remove) is refused.
    """
    path = os.path.join(run_dir, TARGET)
    text = read_text(path)
    if text is None:
        return None
    try:
        t = json.loads(text)
    except ValueError:
        t = None
    keys = ("docker_host", "run_id", "host")
    if not (isinstance(t, dict) and all(isinstance(t.get(k), str) for k in keys)):
        raise ValueError(f"{path}: not a container target")
    if t["run_id"] != os.path.basename(os.path.normpath(run_dir)):
        raise ValueError(f"{path}: names run {t['run_id']!r}, not this run dir's")
    return {k: t[k] for k in keys}


def _mine(t: dict[str, str]) -> dict[str, list[str]]:
    """The label filter for this run's containers on this inventory host."""
    return {"label": [f"{LABEL_RUN}={t['run_id']}", f"{LABEL_HOST}={t['host']}"]}


def _exit_code(state: dict[str, Any]) -> int:
    """As the process executor says it: -N for a death by signal N (docker says 128+N)."""
    code = int(state["ExitCode"])
    return -(code - 128) if code > 128 else code


def _devices(patterns: list[str]) -> list[str]:
    """Host devices for the container: globs expanded; paths this host lacks are left out
    (an InfiniBand-less node still runs)."""
    found: list[str] = []
    for pattern in patterns:
        found += [p for p in sorted(glob.glob(pattern)) if p not in found]
    return [f"{p}:{p}:rwm" for p in found]


def _gpus(gpus: str) -> list[Any]:
    """``docker run --gpus``: "all", a count, or device ids ("0,1")."""
    from docker.types import DeviceRequest

    if not gpus:
        return []
    if gpus == "all" or gpus.isdigit():
        count = -1 if gpus == "all" else int(gpus)
        return [DeviceRequest(count=count, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


def launch(
    run_dir: str, t: dict[str, str], container: dict[str, Any], command: list[str], env: dict
) -> dict[str, Any]:
    """Start ``command`` in a detached container, unless this run's is already there.

    ``t`` is the target (docker_host, run_id, host), written to the run dir first so that
    stop finds the container whatever happens next. Paths inside the container are the
    host's, so the command's arguments mean the same in both. Returns the container id,
    the image tag and id, and whether it started now.
    """
    from docker.types import Mount, Ulimit

    replace(os.path.join(run_dir, TARGET), json.dumps(t))
    mounts = [Mount(run_dir, run_dir, type="bind", read_only=False)]
    mounts += [Mount(m, m, type="bind", read_only=True) for m in container["mounts_ro"]]
    network = "host" if container["host_network"] else (container["network"] or None)
    ulimits = [Ulimit(name=k, soft=int(v), hard=int(v)) for k, v in container["ulimits"].items()]
    with client(t["docker_host"]) as c:
        image = c.images.get(container["image"])
        found = c.containers.list(all=True, filters=_mine(t))
        if not found:
            found = [
                c.containers.run(
                    image.id,
                    command,
                    name=re.sub(r"[^a-zA-Z0-9_.-]", "_", f"fleetperf-{t['run_id']}-{t['host']}"),
                    labels={
                        LABEL_RUN: t["run_id"],
                        LABEL_HOST: t["host"],
                        LABEL_CASE: container["case"],
                    },
                    detach=True,
                    init=True,  # reaps orphans, forwards SIGTERM to the supervisor
                    user=f"{os.getuid()}:{os.getgid()}",  # the run's files are the operator's
                    environment=env,
                    working_dir=run_dir,
                    mounts=mounts,
                    network_mode=network,
                    device_requests=_gpus(container["gpus"]),
                    devices=_devices(container["devices"]),
                    cap_add=container["cap_add"] or None,
                    ulimits=ulimits or None,
                    shm_size=container["shm_size"] or None,
                    security_opt=["no-new-privileges"],
                    privileged=False,
                )
            ]
            started = True
        else:
            started = False
        return {
            "container": found[0].id,
            "image": container["image"],
            "image_id": image.id,
            "started": started,
        }


def exit_code(t: dict[str, str]) -> int | None:
    """The exit code of this run's container once it has stopped; None while it runs.

    No container at all (removed behind our back) counts as killed: -9.
    """
    with client(t["docker_host"]) as c:
        found = c.containers.list(all=True, filters=_mine(t))
        if not found:
            return -9
        state = found[0].attrs["State"]
        alive = state["Status"] in ("created", "running", "restarting", "paused")
        return None if alive else _exit_code(state)


def stop(t: dict[str, str], grace: float) -> dict[str, Any]:
    """Stop (SIGTERM, SIGKILL after ``grace`` s) and remove this run's containers.

    Returns the names stopped and the exit code of each container removed.
    """
    stopped: list[str] = []
    codes: list[int] = []
    with client(t["docker_host"]) as c:
        for container in c.containers.list(all=True, filters=_mine(t)):
            if container.status in ("running", "restarting", "paused"):
                container.stop(timeout=max(1, round(grace)))
                stopped.append(container.name)
            container.reload()
            codes.append(_exit_code(container.attrs["State"]))
            container.remove(force=True)
    return {"stopped": stopped, "exit_codes": codes}
