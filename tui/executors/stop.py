"""playbooks/stop.yml: runs' work stopped on their hosts, whatever their executor (the play
imports each kind's stop tasks), and their files brought back. After a cancel, after an
internal error, and for ``fleetperf cleanup`` of runs a dead controller left."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tui.core.errors import UsageError
from tui.executors.ansiblerun import PLAY_FILE, kill_leftover_ansible, run_playbook
from tui.executors.base import Launch, controller_vars
from tui.executors.extravars import declared, spec
from tui.executors.hostfiles import HOST_ARCHIVE, HOST_FILES, host_file_limits, unpack_host_files
from tui.results.record import is_run_id


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


STOPPED = "stopped"  # a host's cleanup outcome when stop.yml reached it and ran to its end


def stop_run(
    run_id: str,
    hosts: list[str],
    inventory: Path,
    results_dir: Path,
    data_root: Path,
    *,
    nodes: bool = False,
) -> dict[str, str]:
    """playbooks/stop.yml for a run this controller did not launch (cleanup after a
    controller died): each host's outcome, ``STOPPED`` or why not (from the runner's
    per-host stats: a host the play never reached was not stopped, whatever ansible's exit
    status). ``inventory`` is the operator's, never a record's. UsageError, nothing done,
    for a run id or run directory that is not one of this results directory's.
    ``nodes``: a Slurm login host's archive holds its nodes' files; those of a node whose
    name is refused are left out (the record was written before)."""
    run_dir = _run_dir(results_dir, run_id)
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
    stats: dict[str, Any] = {}

    def keep_stats(event: dict[str, Any]) -> bool:
        if event.get("event") == "playbook_on_stats":
            stats.update(event.get("event_data") or {})
        return False  # no job_events kept on disk

    private = run_dir / "ansible-cleanup"
    run_playbook(private, "stop.yml", inventory, extravars, len(hosts), keep_stats)
    unpack_host_files(run_dir / "hosts", nodes=nodes)
    return host_outcomes(stats, hosts, inventory)


def host_outcomes(stats: dict[str, Any], hosts: list[str], inventory: Path) -> dict[str, str]:
    """Each host's outcome from the play's stats (ansible's per-host processed, dark and
    failures): no stats at all (the play did not run) reached no host."""
    outcomes = {}
    for host in hosts:
        if stats.get("dark", {}).get(host):
            outcomes[host] = "unreachable"
        elif stats.get("failures", {}).get(host):
            outcomes[host] = "the stop failed"
        elif host not in stats.get("processed", {}):
            outcomes[host] = f"not reached (not a host of {inventory})"
        else:
            outcomes[host] = STOPPED
    return outcomes


def _run_dir(results_dir: Path, run_id: str) -> Path:
    """``<results>/runs/<run_id>``, checked: a run id, no link on the way, and an
    ``ansible-play`` file (kill_leftover_ansible follows it) that names a play of this
    results directory's runs; UsageError otherwise."""
    if not is_run_id(run_id):
        raise UsageError(f"run_id {run_id[:200]!r} is not a run id")
    runs = Path(os.path.abspath(results_dir)) / "runs"
    run_dir = runs / run_id
    for path in (runs, run_dir):
        if path.is_symlink():
            raise UsageError(f"{path}: a link; cleanup acts only on run directories in place")
    play = run_dir / PLAY_FILE
    if play.is_symlink() or (play.exists() and not play.is_file()):
        raise UsageError(f"{play}: not a plain file")
    if play.is_file():
        named = Path(os.path.abspath(play.read_text(errors="replace").strip()))
        mine = named.parent.parent == runs and is_run_id(named.parent.name)
        if not mine or not named.name.startswith("ansible-"):
            raise UsageError(f"{play}: names {str(named)[:200]!r}, not a play under {runs}")
    return run_dir


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
    ) -> dict[str, str]:
        return stop_run(run_id, hosts, inventory, results_dir, data_root, nodes=cls.NODES)
