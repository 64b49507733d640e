"""The play executor (kinds "process" and "docker"): playbooks/run.yml, once for the runs
that start together, runs each host's workload as a process under the host's Python or in
a container of the vendor's image (playbooks/module_utils/fleetperf_process.py,
fleetperf_docker.py); playbooks/stop.yml stops them."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tui.core import safefile
from tui.core.events import TAIL_ACTION
from tui.executors.ansiblerun import PLAY_FILE, on_steps, run_playbook
from tui.executors.base import Launch, Outcome, Started
from tui.executors.extravars import declared
from tui.executors.hostfiles import keep_polled_archive
from tui.executors.steps import Step
from tui.executors.stop import StoppedByPlaybook, stop_runs
from tui.executors.tracker import Tracker, conclude, prepare

# An internal error's traceback: to stderr where no front end took the logger (logging's
# last resort), to the app's log file in the app (tui/app/__init__.py).
_LOG = logging.getLogger(__name__)
CANCEL_SETTLE_S = 0.3  # a cancel seen this long: the batch's other cancels have come too


@dataclass
class _InPlay:
    """One run of a play: what it needs, and how far its cancel has gone."""

    launch: Launch
    tracker: Tracker
    cancel: threading.Event
    cancel_seen: float | None = None  # monotonic time its cancel was first seen
    stopped: frozenset[str] = frozenset()  # its hosts stop.yml ran on after the cancel


class Play(StoppedByPlaybook):
    """playbooks/run.yml once for the runs that start together (their hosts disjoint): one
    ansible-playbook, its start and its inventory paid once, each host doing its own run's
    work (fleetperf_runs: host -> its run's vars). ansible-runner's events go to the
    tracker of the host's run, as steps. A run ends when the play is done with each of its hosts,
    which may be long before the play ends: ``outcome`` returns then.

    Cancelling one run stops only its hosts (stop.yml on them, again for a host launched
    after that); the play carries on and cleans up after them. Once every run still in the
    play is cancelled (Ctrl-C), ansible-playbook itself is stopped, then one stop.yml
    stops all their hosts."""

    WATCH_S = 0.1  # how often cancels are looked at

    def __init__(self, runs: list[Started]) -> None:
        self._runs = {
            launch.run_id: _InPlay(launch, prepare(launch, on_event), cancel)
            for launch, on_event, cancel in runs
        }
        self._of_host = {h: r.tracker for r in self._runs.values() for h in r.launch.hosts}
        self._kill = threading.Event()  # every run still in the play was cancelled
        self._over = threading.Event()
        # The play's artifacts go in its first run's directory.
        self._holder = runs[0][0].run_id if runs else ""
        self._discard: list[Path] = []  # refused runs' dirs, removed when the play ends
        self._lock = threading.Lock()
        self.rc, self.status = 1, "failed"  # ansible-playbook's, once it ended

    def _step(self, step: Step) -> None:
        if tracker := self._of_host.get(step.host):
            # A host's last poll may bring its files back (run.yml): kept, then out of the step.
            if step.action == TAIL_ACTION and "files_tar" in step.res:
                keep_polled_archive(tracker.fetch_dir, step.host, str(step.res["files_tar"]))
                res = {k: v for k, v in step.res.items() if k != "files_tar"}
                step = replace(step, res=res)
            tracker.step(step)

    def extravars(self) -> dict[str, Any]:
        """run.yml's one extra var: each host -> its run's vars (one dict per run, which
        the extra vars file writes once, YAML aliases for its other hosts)."""
        runs: dict[str, Any] = {}
        for r in self._runs.values():
            values = r.launch.extravars()
            runs.update(dict.fromkeys(r.launch.hosts, values))
        return declared("plays", {"fleetperf_runs": runs})

    def run(self) -> None:
        """Run the play to its end (each run's ``outcome`` may return before)."""
        first, *others = (r.launch for r in self._runs.values())
        private = first.run_dir / "ansible-run"
        for launch in others:  # where leftovers of the play are found (tui/executors/ansiblerun.py)
            safefile.write_text(launch.run_dir / PLAY_FILE, f"{private}\n")
        watcher = threading.Thread(target=self._watch, daemon=True, name="play-cancels")
        watcher.start()
        try:
            try:
                runner = run_playbook(
                    private,
                    "run.yml",
                    first.inventory,
                    self.extravars(),
                    len(self._of_host),
                    event_handler=on_steps(self._step),
                    cancel_callback=self._kill.is_set,
                )
                self.rc, self.status = runner.rc, runner.status
            except Exception as exc:  # a bug: each run fails with it, its work is stopped
                _LOG.exception("internal error")
                self.status = f"with an internal error: {exc!r}"
                self._kill.set()
            if self._kill.is_set():  # ansible-playbook was stopped, maybe before its cleanup
                stop_runs([r.launch for r in self._runs.values() if not r.tracker.ended.is_set()])
        finally:
            self._over.set()
            watcher.join()
            for r in self._runs.values():
                r.tracker.ended.set()
            with self._lock:
                for run_dir in self._discard:
                    shutil.rmtree(run_dir, ignore_errors=True)

    def discard(self, run_id: str) -> None:
        """Remove a refused run's directory: at once, or, where it holds the play's
        artifacts, once ansible-playbook has ended."""
        run_dir = self._runs[run_id].launch.run_dir
        with self._lock:
            if run_id == self._holder and not self._over.is_set():
                self._discard.append(run_dir)
                return
        shutil.rmtree(run_dir, ignore_errors=True)

    def _watch(self) -> None:
        while not self._over.wait(self.WATCH_S):
            now = time.monotonic()
            live = [r for r in self._runs.values() if not r.tracker.ended.is_set()]
            for r in live:
                if r.cancel.is_set() and r.cancel_seen is None:
                    r.cancel_seen = now
            settled = [r for r in live if r.cancel_seen and now - r.cancel_seen >= CANCEL_SETTLE_S]
            if live and len(settled) == len(live):
                self._kill.set()
                return
            # Stop a cancelled run's hosts once launched (a host launched later: again).
            to_stop = [r for r in settled if r.tracker.started_hosts - r.stopped]
            for r in to_stop:
                r.stopped = frozenset(r.tracker.started_hosts)
            if to_stop:
                stop_runs([r.launch for r in to_stop])

    def outcome(self, run_id: str) -> Outcome:
        """Block until the play is done with the run's hosts; the run's outcome."""
        r = self._runs[run_id]
        r.tracker.ended.wait()
        done = r.tracker.handed_back >= set(r.launch.hosts)
        # Handed back without a failure: the play went well for this run, whatever it did
        # on other runs' hosts; a host it never handed back fails the run with the play.
        ok = not r.tracker.play_failed and (done or (self._over.is_set() and self.rc == 0))
        return conclude(
            r.launch,
            r.tracker,
            cancelled=r.cancel.is_set(),
            rc=0 if ok else 1,
            runner_status=self.status if self._over.is_set() else "failed",
        )
