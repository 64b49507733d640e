"""The engine's own run events: each host-side step's result as any transport reports it
(``Step``: an Ansible task's result, translated in tui/executors/ansiblerun.py; a direct
call, tui/executors/direct.py), the typed events a step carries, and which of a run's
failures caused the others (``blame``). The tracker folds steps; nothing here knows how
a step travelled."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.core.events import (
    LAUNCH_ACTION,
    TAIL_ACTION,
    Event,
    HostState,
    WorkloadError,
    parse_line,
)
from tui.core.text import clean

StepState = Literal["ok", "retry", "failed", "unreachable", "skipped"]


@dataclass(frozen=True)
class Step:
    """One host-side step's result: ``action`` the module that ran (playbooks/library's
    names: fleetperf_preflight, fleetperf_launch, fleetperf_tail, ...), keyed on by the
    tracker; ``task`` and ``play`` the names run.yml gives it (the end of a host's part);
    ``ignored``: a failure the play carries on after."""

    host: str
    action: str
    state: StepState
    res: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""
    play: str = ""
    role: str = ""
    ignored: bool = False


def failure_message(res: Mapping[str, Any]) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or "failed"
    if isinstance(res.get("results"), list):  # a loop: the first failed item says why
        failed = [r for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        if failed:
            msg = failed[0].get("msg") or msg
    return " ".join(clean(str(msg)).split())


def step_events(run_id: str, step: Step, received: float | None = None) -> list[Event]:
    """The typed events a step carries (often none): a poll's workload lines and the
    host's end, a launch, a failure."""
    host, res = step.host, step.res
    if step.action == TAIL_ACTION and step.state in ("ok", "retry", "failed"):
        # A last poll that fails the host (the workload ended badly) still carries lines.
        events: list[Event] = [
            ev
            for line in res.get("lines") or []
            if (ev := parse_line(run_id, host, line, received))
        ]
        ended = not (res.get("timed_out") or res.get("stalled"))
        if step.state == "ok" and res.get("finished") and ended and res.get("exit_code") == 0:
            events.append(HostState(run_id, host, "finished"))
        elif step.state == "failed" and not step.ignored:
            events.append(HostState(run_id, host, "failed", failure_message(res)))
        return events
    if step.state == "ok" and step.action == LAUNCH_ACTION:
        return [HostState(run_id, host, "running")]
    if step.state == "unreachable":
        return [HostState(run_id, host, "unreachable", failure_message(res))]
    if step.state == "failed" and not step.ignored:
        return [HostState(run_id, host, "failed", failure_message(res))]
    return []


# Blame: when several hosts fail, which failure caused the others. A workload that died of
# a signal (torchrun: "Signal 9 (SIGKILL) received by PID"; alone: a negative exit code)
# failed on its own; its peers fail as a consequence: their collectives lose the dead rank
# (gloo's "Connection closed by peer", NCCL errors), or the play stops them ("stopped (host
# node2 failed)"). Such consequences often come first: a peer's socket closes at once, while
# torchrun notices its dead child only at its next check.
_SIGNAL = re.compile(r"\bSignal \d+ \(SIG[A-Z]+\)|\bSIG(KILL|SEGV|BUS|ABRT|ILL|FPE)\b|code -\d+")
_CONSEQUENCE = re.compile(
    r"(closed|reset) by peer|Broken pipe|NCCL|gloo|ProcessGroup|DistNetworkError"
    r"|remote process exited|: stopped \(host ",
    re.IGNORECASE,
)


def blame(failures: list[WorkloadError | HostState]) -> list[str]:
    """A run's failures (its workloads' errors, its hosts' failures, in the order they were
    observed) as messages, the root cause first: a workload killed by a signal (not by the
    play's stop), then other failures of a host's own (an error, an exit code, a time-out,
    an unreachable host), then the consequences of another's: a peer gone, a stop. Within
    each, the first observed; of one moment, a workload's own words before its host's."""

    def cause(ev: WorkloadError | HostState) -> int:
        text = _message(ev)
        if _SIGNAL.search(text) and ": stopped (" not in text:
            return 0
        return 2 if _CONSEQUENCE.search(text) else 1

    order = sorted(
        range(len(failures)),
        key=lambda i: (cause(failures[i]), isinstance(failures[i], HostState), i),
    )
    return [_message(failures[i]) for i in order]


def _message(ev: WorkloadError | HostState) -> str:
    return (
        f"host {ev.host} rank {ev.rank}: {ev.message}"
        if isinstance(ev, WorkloadError)
        else ev.message
    )
