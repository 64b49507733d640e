"""The Slurm executor (kind "slurm"): a run is one batch job that the group's login host
submits through playbooks/slurm.yml; Slurm picks the nodes, and the login host's polls
say where the job is (docs/slurm.md). Each run has a play of its own. The job as Slurm ran
it (job_id, partition, nodes, state) is the record's ``executor_detail``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tui.core.events import HostState
from tui.core.paths import UnsafeName, host_path
from tui.executors.ansiblerun import on_steps, run_playbook
from tui.executors.base import Outcome, Started
from tui.executors.steps import Step
from tui.executors.stop import StoppedByPlaybook, stop_runs
from tui.executors.tracker import Tracker, conclude, prepare

# playbooks/slurm.yml's modules whose results say where the job is.
CHECK, SUBMIT, POLL = "fleetperf_slurm_check", "fleetperf_slurm_submit", "fleetperf_slurm_poll"


class Slurm(StoppedByPlaybook):
    """Nothing shared between runs: each run's play runs on its own thread, in ``outcome``."""

    NODES = True

    def __init__(self, runs: list[Started]) -> None:
        self._runs = {run[0].run_id: run for run in runs}

    def run(self) -> None:
        """Nothing: each run's play is its ``outcome``."""

    def outcome(self, run_id: str) -> Outcome:
        """Run the case as a Slurm job (playbooks/slurm.yml); blocks until it ends, is
        cancelled, or fails."""
        launch, on_event, cancel = self._runs[run_id]
        tracker = prepare(launch, on_event)
        tracker.fold_step = JobSteps().fold
        try:
            runner = run_playbook(
                launch.run_dir / "ansible-slurm",
                "slurm.yml",
                launch.inventory,
                launch.extravars(),
                len(launch.hosts),
                event_handler=on_steps(tracker.step),
                cancel_callback=cancel.is_set,
            )
            if cancel.is_set():  # Ctrl-C may also have stopped ansible-playbook before its cleanup
                stop_runs([launch])
        except BaseException:
            tracker.close_followers()
            tracker.log.close()
            raise
        return conclude(
            launch,
            tracker,
            cancelled=cancel.is_set(),
            rc=runner.rc,
            runner_status=runner.status,
            nodes=True,
        )

    def discard(self, run_id: str) -> None:
        shutil.rmtree(self._runs[run_id][0].run_dir, ignore_errors=True)


class JobSteps:
    """A Slurm job's life, from the login host's steps, as the login host's phases: queued
    (with Slurm's pending reason), running (on the nodes named), finished; each node's
    events file followed from the login host once the job runs there."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None  # the last poll's (state, reason, nodes)

    def fold(self, tracker: Tracker, step: Step) -> None:
        login, res = step.host, step.res
        if step.state == "ok" and step.action == CHECK:
            tracker.hosts_seen[login] = {k: res.get(k) for k in ("load_per_cpu", "synthetic_data")}
        if step.state not in ("ok", "retry") or step.action not in (SUBMIT, POLL):
            return
        job = str(res.get("job_id") or "")
        if step.action == SUBMIT:
            tracker.detail = {"job_id": job, "partition": res.get("partition") or None, "nodes": []}
            tracker.emit(HostState(tracker.run_id, login, "queued", f"slurm job {job} submitted"))
            return
        state, reason = res.get("state"), res.get("reason") or ""
        nodes = _node_names(tracker, login, res.get("nodes"))
        last = dict(tracker.detail or {})
        tracker.detail = {
            **last,
            "job_id": job,
            "partition": res.get("partition") or last.get("partition"),
            "nodes": nodes or last.get("nodes", []),
            "state": state,
        }
        if (state, reason, nodes) == self._seen:
            return
        self._seen = (state, reason, nodes)
        if state == "PENDING":
            why = f" ({reason})" if reason else ""
            msg = f"slurm job {job} pending{why}"
            tracker.emit(HostState(tracker.run_id, login, "queued", msg))
        elif state == "RUNNING" and nodes:
            msg = f"slurm job {job} running on {', '.join(nodes)}"
            tracker.emit(HostState(tracker.run_id, login, "running", msg))
        run_dir = Path(str(res.get("run_dir") or ""))
        if login in tracker.follow and res.get("run_dir"):
            for node in nodes:
                events = run_dir / "nodes" / node / "events.jsonl"
                tracker.start_follower(node, str(events), tracker.follow[login])
        if res.get("finished"):
            for node, size in (res.get("events_bytes") or {}).items():
                tracker.drain(node, int(size or 0))
            if res.get("exit_code") == 0:
                tracker.emit(HostState(tracker.run_id, login, "finished"))


def _node_names(tracker: Tracker, login: str, names: Any) -> list[str]:
    """The node names of a Slurm poll that may name a path here (each node's files, its
    follower); the others refused, noted once each."""
    usable = []
    for name in names if isinstance(names, list) else []:
        try:
            host_path(tracker.fetch_dir, name)
        except UnsafeName as exc:
            tracker.refused.setdefault(ascii(name)[:80], f"host {login}: Slurm node {exc}")
            continue
        usable.append(name)
    return usable
