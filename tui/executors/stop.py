"""playbooks/stop.yml: runs' work stopped on their hosts, whatever their executor (the play
imports each kind's stop tasks), and their files brought back. After a cancel, after an
internal error, and for ``fleetperf cleanup`` of runs a dead controller left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.executors.ansiblerun import kill_leftover_ansible, run_playbook
from tui.executors.base import Launch, controller_vars
from tui.executors.extravars import declared, spec
from tui.executors.hostfiles import HOST_ARCHIVE, HOST_FILES, host_file_limits, unpack_host_files


def _stop_vars(values: dict[str, Any]) -> dict[str, Any]:
    """A run's vars as stop.yml takes them (the "stop" entry's)."""
    return declared("stop", {k: v for k, v in values.items() if k in spec("stop")})


def stop_runs(launches: list[Launch]) -> None:
    """Stop these runs' workloads on all their hosts, in one play of playbooks/stop.yml."""
    runs: dict[str, Any] = {}
    for launch in launches:
        runs.update(dict.fromkeys(launch.hosts, _stop_vars(launch.extravars())))
    if runs:
        extravars = declared("plays", {"fleetperf_runs": runs})
        first = launches[0]
        private = first.run_dir / "ansible-stop"
        run_playbook(private, "stop.yml", first.inventory, extravars, len(runs))


def stop_run(
    run_id: str,
    hosts: list[str],
    inventory: Path,
    results_dir: Path,
    data_root: Path,
    *,
    nodes: bool = False,
) -> bool:
    """playbooks/stop.yml for a run this controller did not launch (cleanup after a
    controller died); True if it ran to the end. ``nodes``: a Slurm login host's archive
    holds its nodes' files; those of a node whose name is refused are left out (the record
    was written before)."""
    run_dir = results_dir / "runs" / run_id
    kill_leftover_ansible(run_dir)
    values = _stop_vars(
        {
            "fleetperf_run_id": run_id,
            "fleetperf_hosts": hosts,
            "fleetperf_fetch_dir": str(run_dir / "hosts"),
            "fleetperf_host_files": list(HOST_FILES),
            "fleetperf_host_archive": HOST_ARCHIVE,
            "fleetperf_host_file_limits": host_file_limits(),
            **controller_vars(results_dir, data_root),
        }
    )
    extravars = declared("plays", {"fleetperf_runs": dict.fromkeys(hosts, values)})
    private = run_dir / "ansible-cleanup"
    runner = run_playbook(private, "stop.yml", inventory, extravars, len(hosts))
    unpack_host_files(run_dir / "hosts", nodes=nodes)
    return runner.rc == 0


class StoppedByPlaybook:
    """Stop and cleanup through stop.yml, for an executor whose hosts' stop tasks it imports
    (process, docker, Slurm). ``NODES``: a run's host files come back per Slurm node."""

    NODES = False

    @staticmethod
    def stop(launches: list[Launch]) -> None:
        stop_runs(launches)

    @classmethod
    def cleanup(
        cls, run_id: str, hosts: list[str], inventory: Path, results_dir: Path, data_root: Path
    ) -> bool:
        return stop_run(run_id, hosts, inventory, results_dir, data_root, nodes=cls.NODES)
