"""A container cannot escape its stop (issue 26 point 7), on a real docker engine.

The workload, from inside its container, deletes container.json and writes exit_code 0
into its run dir (mounted read-write), then keeps running. The poll (fleetperf_tail) and
the stop (fleetperf_stop) ask the engine for the run's container by the labels the launch
set, so the poll does not call the run ended nor release the host lease while the
container runs, and the stop stops and removes it and only then releases the lease. The
cleanup of a controller that died (``fleetperf cleanup``: playbooks/stop.yml) does the same.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dockerd import Dockerd, missing
from hostmodules import module

from tui.executors.registry import executor_for

BASE = "fleetperf-local/base:bookworm"
IMAGE = "fleetperf-test/python:1"  # the base with "python", which the launch runs

pytestmark = [
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
    pytest.mark.xdist_group("containers"),
    pytest.mark.slow,  # an engine of the test's own, and a base image imported into it
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dockerd]:
    engine = Dockerd(tmp_path_factory.mktemp("engine"))  # short: containerd's socket path
    engine.start()
    try:
        engine.import_base(BASE)
        engine.docker(
            "run", "--name", "with-python", BASE, "ln", "-s", "python3", "/usr/bin/python"
        )
        engine.docker("commit", "with-python", IMAGE)
        engine.docker("rm", "with-python")
        yield engine
    finally:
        engine.remove_containers()
        engine.stop()
        engine.remove_data()


def forger(engine: Dockerd, run_dir: Path) -> None:
    """Launch, as the play does, a workload that deletes container.json and writes its
    exit_code 0 from inside its container, then keeps running; its lease taken."""
    run_dir.mkdir(parents=True)
    (run_dir.parent / "fleetperf.lease").write_text(json.dumps({"run_id": run_dir.name}))
    forge = (
        "import os, time\n"
        f"if os.path.lexists({str(run_dir / 'container.json')!r}):\n"
        f"    os.unlink({str(run_dir / 'container.json')!r})\n"
        f"open({str(run_dir / 'exit_code')!r}, 'w').write('0')\n"
        "time.sleep(600)\n"
    )
    container = {"image": IMAGE, "case": "forger", "network": "none"}
    res, _ = module(
        "fleetperf_launch",
        run_dir.parent,
        run_dir=str(run_dir),
        argv=["python3", "-c", forge],
        chdir=str(run_dir),
        run_id=run_dir.name,
        container=container,
        executor="docker",
        docker_host=engine.host,
        host="h1",
    )
    assert res.get("changed"), res
    deadline = time.monotonic() + 60
    while not (run_dir / "exit_code").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (run_dir / "exit_code").read_text() == "0"  # the container's forgery is in place
    assert not (run_dir / "container.json").exists()
    assert running(engine, run_dir.name) == ["running"]


def test_a_container_that_forges_its_end_is_still_stopped(engine: Dockerd, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run-1"
    lease = run_dir.parent / "fleetperf.lease"
    forger(engine, run_dir)
    ours = {"executor": "docker", "docker_host": engine.host, "host": "h1"}

    poll = {"run_dir": str(run_dir), "lines": False, "wait": 1, "timeout_s": 600, "stall_s": 600}
    res, _ = module("fleetperf_tail", tmp_path, lease=str(lease), **poll, **ours)
    assert not res["finished"] and not res["released"] and res["exit_code"] is None, res
    assert lease.exists()
    assert running(engine, "run-1") == ["running"]

    res, _ = module(
        "fleetperf_stop", tmp_path, run_dir=str(run_dir), grace=1, lease=str(lease), **ours
    )
    assert (res["msg"], res["removed"], res.get("released")) == ("stopped", 1, True), res
    assert running(engine, "run-1") == [] and not lease.exists()


def test_the_cleanup_of_a_dead_controller_stops_it_too(engine: Dockerd, tmp_path: Path) -> None:
    run_root = tmp_path / "hosts" / "h1"
    forger(engine, run_root / "run-2")
    h1 = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,  # has the Docker SDK
        "fleetperf_executor": "docker",
        "fleetperf_docker_host": engine.host,
        "fleetperf_run_root": str(run_root),
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"h1": h1}}}))
    results = tmp_path / "results"
    (results / "runs" / "run-2").mkdir(parents=True)
    cleanup = executor_for("docker").cleanup
    assert cleanup("run-2", ["h1"], inventory, results, tmp_path / "data") == {"h1": "stopped"}
    assert running(engine, "run-2") == [] and not (run_root / "fleetperf.lease").exists()
    # The supervisor's word replaced the forgery: the workload ended by the stop's SIGTERM.
    assert (results / "runs" / "run-2" / "hosts" / "h1" / "exit_code").read_text() == "-15"


def running(engine: Dockerd, run_id: str) -> list[str]:
    """The states of the engine's containers of the run."""
    label = f"label=fleetperf.run_id={run_id}"
    return engine.docker("ps", "-a", "--filter", label, "--format", "{{.State}}").stdout.split()
