"""A run's stop: the workload's process tree signalled, given a grace, then killed (or its
container stopped and removed). playbooks/library's fleetperf_stop wraps it for stop.yml and
run.yml; the controller's direct executor (tui/executors/direct.py) calls the same functions
in its own process for a run on its own machine, without Ansible. The host lease is released
by the module or the executor (fleetperf_host.release), not here."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from . import fleetperf_docker
from . import fleetperf_host as files

STOP_GRACE_S = 10.0  # fleetperf_stop's grace


def processes() -> dict[int, tuple[int, int]]:
    """Live (not zombie) processes from /proc: pid -> (parent pid, process group)."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # Fields after the command (which may hold spaces): state, ppid, pgrp, ...
        state, ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if state != "Z":
            procs[int(name)] = (int(ppid), int(pgrp))
    return procs


def workload_tree(pgid: int) -> set[int]:
    """The workload's process group and every descendant, also those in sessions of their
    own (torchrun starts each rank in a new session)."""
    procs = processes()
    tree = {pid for pid, (_, pgrp) in procs.items() if pgrp == pgid}
    grown = True
    while grown:
        children = {pid for pid, (ppid, _) in procs.items() if ppid in tree} - tree
        tree |= children
        grown = bool(children)
    return tree


def signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait until none of pids lives; those still alive at the deadline."""
    deadline = time.monotonic() + seconds
    while (left := pids & set(processes())) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def stop_process(tree: set[int], grace: float) -> int:
    """SIGTERM the whole tree, SIGKILL what is left after grace; the last signal sent."""
    signal_all(tree, signal.SIGTERM)
    left = wait_gone(tree, grace)
    if not left:
        return signal.SIGTERM
    signal_all(left, signal.SIGKILL)
    wait_gone(left, 5)
    return signal.SIGKILL


def stop_container(run_dir: str, target: dict, grace: float, reason: str | None) -> dict:
    """Docker executor: stop the run's container if it runs, and remove it in any case."""
    try:
        running = fleetperf_docker.exit_code(target) is None  # the engine's word, no file's
        if reason and running:
            files.replace(os.path.join(run_dir, "stop_reason"), reason)
        done = fleetperf_docker.stop(target, grace)
    except Exception as exc:  # noqa: BLE001 - an engine error is this host's one-line failure
        return {"failed": True, "msg": f"docker: {str(exc).splitlines()[0]}"}
    if done["exit_codes"]:
        files.create(os.path.join(run_dir, "exit_code"), str(done["exit_codes"][0]))
    msg = "stopped" if done["stopped"] else "finished" if done["exit_codes"] else "never started"
    return {"changed": bool(done["exit_codes"]), "msg": msg, "removed": len(done["exit_codes"])}


def stop(run_dir: str, grace: float, reason: str | None) -> dict:
    """Stop the run's process workload if anything of it still runs; the module's result."""
    exit_file = os.path.join(run_dir, "exit_code")
    if not os.path.lexists(os.path.join(run_dir, files.PID_FILE)):
        return {"changed": False, "msg": "never started"}
    if os.path.lexists(exit_file):
        return {"changed": False, "msg": "finished"}
    pgid = files.supervisor(run_dir)
    if pgid is None:  # gone; its number, if taken again, is another process's
        return {"changed": False, "msg": "gone"}
    tree = workload_tree(pgid)
    if reason:
        files.replace(os.path.join(run_dir, "stop_reason"), reason)
    sig = stop_process(tree, grace)
    files.create(exit_file, str(-sig))  # unless the supervisor wrote it
    return {"changed": True, "signal": int(sig), "msg": "stopped"}
