"""The Slurm executor (kind "slurm"): a run is one batch job that the group's login host
submits through playbooks/slurm.yml; Slurm picks the nodes, and the login host's polls
say where the job is (docs/slurm.md). Each run has a play of its own."""

from __future__ import annotations

import shutil

from tui.executors.ansiblerun import run_playbook
from tui.executors.base import Outcome, Started
from tui.executors.stop import StoppedByPlaybook, stop_runs
from tui.executors.tracker import conclude, prepare


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
        try:
            runner = run_playbook(
                launch.run_dir / "ansible-slurm",
                "slurm.yml",
                launch.inventory,
                launch.extravars(),
                len(launch.hosts),
                event_handler=tracker,
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
