"""The docker executor of fleetperf's launch, tail and stop modules (Docker SDK for Python).

A workload container runs the same supervisor as a process launch, so stdout.log,
stderr.log and exit_code land in the run directory (mounted read-write at its host path)
either way; what differs is only where it runs and how it is stopped. Containers carry
the labels fleetperf.run_id, fleetperf.run_dir, fleetperf.host (several inventory hosts may
share one engine) and fleetperf.case. Tail, stop and preflight find a run's container by
those labels, asking the engine (the play gives them the engine and the host): nothing in
the run dir, which the container writes, decides whether it runs or where it is.

Never privileged: device access is exactly what the vendor's group_vars list.
"""

from __future__ import annotations

import calendar
import contextlib
import glob
import os
import re
import time
from typing import Any

LABEL_RUN = "fleetperf.run_id"
LABEL_RUN_DIR = "fleetperf.run_dir"
LABEL_CASE = "fleetperf.case"
LABEL_HOST = "fleetperf.host"  # the inventory host: several may share one engine
ALIVE = ("created", "running", "restarting", "paused")  # docker's states of a live container

# The launch module's ``container`` option (argument spec suboptions): the vendor's settings
# (group_vars) and the run's. Paths are the host's, mounted at the same path.
CONTAINER_OPTIONS: dict[str, Any] = {
    "image": {"type": "str", "required": True},  # the expected tag (tui/catalog/images.py)
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


def target(run_dir: str, docker_host: str, host: str) -> dict[str, str]:
    """Where the run's container is and what labels it carries: the engine and inventory
    host from the play, the run id and run dir from the run dir's path."""
    run_dir = os.path.normpath(run_dir)
    return {
        "docker_host": docker_host,
        "run_id": os.path.basename(run_dir),
        "run_dir": run_dir,
        "host": host,
    }


def _mine(t: dict[str, str]) -> dict[str, list[str]]:
    """The label filter for this run's containers on this inventory host."""
    labels = {LABEL_RUN: t["run_id"], LABEL_RUN_DIR: t["run_dir"], LABEL_HOST: t["host"]}
    return {"label": [f"{k}={v}" for k, v in labels.items()]}


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

    ``t`` is the target (``target``): its labels are how tail and stop find the container.
    Paths inside the container are the host's, so the command's arguments mean the same
    in both. Returns the container id, the image tag and id, and whether it started now.
    """
    from docker.types import Mount, Ulimit

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
                        LABEL_RUN_DIR: t["run_dir"],
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


def state(t: dict[str, str]) -> dict[str, Any] | None:
    """What the engine says of this run's container (docker inspect's State); None when
    there is none."""
    with client(t["docker_host"]) as c:
        found = c.containers.list(all=True, filters=_mine(t))
        return found[0].attrs["State"] if found else None


def ended(st: dict[str, Any] | None) -> int | None:
    """The exit code of a container in this state once it has stopped; None while it
    lives. No container at all (removed behind our back) counts as killed: -9."""
    if st is None:
        return -9
    return None if st["Status"] in ALIVE else _exit_code(st)


def exit_code(t: dict[str, str]) -> int | None:
    """The exit code of this run's container once it has stopped; None while it lives."""
    return ended(state(t))


def started_at(st: dict[str, Any] | None) -> float | None:
    """When the engine started the container (epoch seconds); None if it has not said."""
    found = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?", (st or {}).get("StartedAt", ""))
    if not found or found[1].startswith("0001"):  # docker's zero time: never started
        return None
    return calendar.timegm(time.strptime(found[1], "%Y-%m-%dT%H:%M:%S")) + float(found[2] or 0)


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
