"""A run's events folded into what its outcome needs (``Tracker``), from its host-side
steps (tui/executors/steps.py, whatever carried them) and from the followers of the hosts'
event files (tui/core/stream.py); a run's directory made before its steps (``prepare``)
and its outcome after (``conclude``)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tui.core import safefile
from tui.core.events import (
    PREFLIGHT_ACTION,
    TAIL_ACTION,
    CaseResult,
    Event,
    HostState,
    WorkloadError,
    as_dict,
    parse_line,
)
from tui.core.stream import Follower, Reach, capped_lines
from tui.executors.base import Launch, Outcome, run_status
from tui.executors.hostfiles import copy_host_files, unpack_host_files
from tui.executors.steps import Step, blame, step_events

# run.yml's first two plays: a host failing in either is out of the play (no later play runs on it).
PREFLIGHT_PLAY = "Preflight"
REFUSAL_PLAY = "Launch nowhere for a run with a refused host"
HAND_BACK = "Hand the host back"  # run.yml's last task on a host: the play is done with it
DRAIN_S = 5.0  # longest wait at a host's end for its follower to hand on the last lines


class Tracker:
    """Folds the event stream into what the outcome needs, and keeps a log of it. Steps
    come from the executor's threads, workload lines from the followers' threads."""

    def __init__(self, launch: Launch, on_event: Callable[[Event], None]) -> None:
        self.run_id = launch.run_id
        log = safefile.create(launch.run_dir / "events.jsonl")  # the run dir is new
        self.log = os.fdopen(log, "w", encoding="utf-8")
        self.on_event = on_event
        self.result: CaseResult | None = None
        self.failures: list[WorkloadError | HostState] = []  # as observed: blame() orders
        self.bad_input: str | None = None
        self.phases = dict.fromkeys(launch.hosts, "preflight")
        self.launched = False  # a workload started on some host
        self.follow = launch.follow
        self.followers: dict[str, Follower] = {}
        self.host_dirs: dict[str, Path] = {}  # run dirs of hosts that share our files
        self.hosts_seen: dict[str, dict[str, Any]] = {}  # what each host's preflight saw
        # A kind's own steps (fold_step) and what it records of the run (Outcome.detail).
        self.fold_step: Callable[[Tracker, Step], None] | None = None
        self.detail: dict[str, Any] | None = None
        self.fetch_dir = launch.run_dir / "hosts"  # HOST/NAME: what the cleanup brings back
        self.refused: dict[str, str] = {}  # a name from a host -> why it was refused
        self.image_ids: dict[str, str] = {}  # host -> the image id its container ran
        self.started_hosts: set[str] = set()  # hosts whose workload was launched
        self.play_failed = False  # a task failed (not ignored) on a host of this run
        self.handed_back: set[str] = set()  # hosts the play is done with (run.yml)
        self.ended = threading.Event()  # the play is done with every host of this run
        self._lock = threading.Lock()

    def step(self, step: Step) -> None:
        """Fold one host-side step's result (from any transport) into the run's state."""
        received = time.time()
        host, action, res = step.host, step.action, step.res
        if step.state == "ok" and action == PREFLIGHT_ACTION:
            self.hosts_seen[host] = {k: res.get(k) for k in ("load_per_cpu", "synthetic_data")}
            # The image id a docker host's preflight checked is the one the launch runs
            # (run.yml); the launch's own result is masked where a no_log env value occurs in it.
            if res.get("image_id"):
                self.image_ids[host] = str(res["image_id"])
        if self.fold_step:  # a kind's own steps (a Slurm job's)
            self.fold_step(self, step)
        if step.state in ("ok", "failed") and host in self.follow:
            # Followed from the preflight on, so the workload's first line is not waited for.
            if step.state == "ok" and action == PREFLIGHT_ACTION and res.get("events"):
                self.start_follower(host, str(res["events"]))
            elif action == TAIL_ACTION and res.get("exit_code") is not None:
                # The host's end comes after every line its workload wrote before it.
                self.drain(host, int(res.get("events_bytes") or 0))
        for ev in step_events(self.run_id, step, received):
            self.emit(ev)
        self._play_part(step)

    def _play_part(self, step: Step) -> None:
        """Whether the steps failed on this run's hosts, and whether they are done with
        them: a host is done after run.yml's last task, after a last poll that says so
        (``done``: the play ends the host there), or once it failed in the preflight play
        (no later play runs on it). A failure not ignored fails the run, as it would fail
        ansible-playbook; an unreachable poll fails the next task anyway."""
        if (step.state == "failed" and not step.ignored) or step.state == "unreachable":
            self.play_failed = True
            if step.play in (PREFLIGHT_PLAY, REFUSAL_PLAY):
                self.handed_back.add(step.host)
        elif step.state == "ok" and (
            step.task == HAND_BACK or (step.action == TAIL_ACTION and step.res.get("done"))
        ):
            self.handed_back.add(step.host)
        if self.handed_back >= self.phases.keys():
            self.ended.set()

    def start_follower(self, host: str, events: str, how: Reach | None = None) -> None:
        """Follow ``events`` (on ``host``, or through ``how``: a Slurm node's file seen
        from its login host); its lines are ``host``'s."""
        how = how or self.follow[host]
        if host in self.followers:
            return
        if how.ssh is None:
            self.host_dirs[host] = Path(events).parent

        def on_line(line: str) -> None:
            if ev := parse_line(self.run_id, host, line):
                self.emit(ev)

        self.followers[host] = Follower(how.argv(events), on_line)

    def drain(self, host: str, size: int) -> None:
        if follower := self.followers.get(host):
            follower.drain(size, DRAIN_S)  # short of it: recover() reads the rest

    def close_followers(self) -> None:
        for follower in self.followers.values():
            follower.close()

    def recover(self, fetch_dir: Path) -> None:
        """Lines a follower missed (its ssh connection dropped and the host came back):
        read from the host's events file brought back by the cleanup, so none is lost."""
        for host, follower in self.followers.items():
            path = fetch_dir / host / "events.jsonl"
            if not path.is_file() or path.stat().st_size <= follower.received:
                continue
            with path.open("rb") as f:
                f.seek(follower.received)
                for head, _, _ in capped_lines(f):  # at most a line's cap held at once
                    line = head.decode("utf-8", "replace").strip()
                    if line and (ev := parse_line(self.run_id, host, line)):
                        self.emit(ev)

    def emit(self, ev: Event) -> None:
        with self._lock:
            if isinstance(ev, HostState):
                ev = self._fold_host(ev)
            else:
                self.log.write(json.dumps(as_dict(ev)) + "\n")
                self.log.flush()
            if isinstance(ev, CaseResult):
                self.result = ev
            elif isinstance(ev, WorkloadError):
                self.failures.append(ev)
            self.on_event(ev)

    def _fold_host(self, ev: HostState) -> HostState:
        failed = ev.phase in ("failed", "unreachable")  # a Slurm job's phases say their own
        if failed and ev.message and not ev.message.startswith(f"host {ev.host}"):
            ev = replace(ev, message=f"host {ev.host}: {ev.phase}: {ev.message}")
        if ev.phase in ("running", "queued"):  # queued: a Slurm job was submitted
            self.launched = True
            self.started_hosts.add(ev.host)
        elif ev.phase in ("failed", "unreachable"):
            # Before any workload started, a failure is the input's or the host's: refused.
            if not self.launched and self.bad_input is None:
                self.bad_input = ev.message
            elif ev.message:
                self.failures.append(ev)
        self.phases[ev.host] = ev.phase
        return ev

    def stopped(self) -> None:
        """Hosts still marked running after the play were stopped by its cleanup."""
        for host, phase in list(self.phases.items()):
            if phase == "running":
                self.emit(HostState(self.run_id, host, "stopped"))


def _synthetic(per_host: list[bool | None]) -> bool | None:
    """Synthetic if any host's data was; real only if every host's data says so."""
    if True in per_host:
        return True
    return False if per_host and all(v is False for v in per_host) else None


def prepare(launch: Launch, on_event: Callable[[Event], None]) -> Tracker:
    """The run's directory with its config.json, and its tracker, its hosts in preflight."""
    safefile.make_dirs(launch.run_dir, exist_ok=False)
    config = json.dumps(launch.config_json(), indent=2) + "\n"
    safefile.write_text(launch.run_dir / "config.json", config)
    tracker = Tracker(launch, on_event)
    for host in launch.hosts:
        tracker.emit(HostState(launch.run_id, host, "preflight"))
    return tracker


def conclude(
    launch: Launch,
    tracker: Tracker,
    *,
    cancelled: bool,
    rc: int,
    runner_status: str,
    nodes: bool = False,
) -> Outcome:
    """After the play is done with the run's hosts: its followers closed, the files of hosts
    that share ours copied (``nodes``: a Slurm login host's archive holds its nodes' files),
    the lines a follower missed recovered; its outcome."""
    try:
        tracker.close_followers()
        copied = copy_host_files(tracker.host_dirs, launch.run_dir / "hosts")
        unpacked = unpack_host_files(launch.run_dir / "hosts", nodes=nodes)
        tracker.recover(launch.run_dir / "hosts")
        tracker.stopped()
    finally:
        tracker.close_followers()
        tracker.log.close()
    seen = tracker.hosts_seen.values()
    loads = [v["load_per_cpu"] for v in seen if v["load_per_cpu"] is not None]
    status, error = run_status(
        cancelled=cancelled,
        bad_input=tracker.bad_input,
        launched=tracker.launched,
        rc=rc,
        runner_status=runner_status,
        result=tracker.result,
        errors=blame(tracker.failures),
    )
    return Outcome(
        status=status,
        error=error,
        result=tracker.result,
        load_per_cpu=max(loads, default=None),
        synthetic_data=_synthetic([v["synthetic_data"] for v in seen]),
        detail=tracker.detail,
        image_ids=tracker.image_ids,
        notes=list(dict.fromkeys([*tracker.refused.values(), *unpacked, *copied])),
    )
