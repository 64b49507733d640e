"""The kinds of host by name: the one list of what a host's ``fleetperf_executor`` may
name, each with its rules and executor (tui/executors/kinds.py, docs/executors.md)."""

from __future__ import annotations

from tui.core.errors import UsageError
from tui.executors.base import Executor, Launch
from tui.executors.kinds import Docker, Kind, Process, SlurmLogin

KINDS: dict[str, Kind] = {kind.name: kind for kind in (Process(), Docker(), SlurmLogin())}


def kind_of(name: str) -> Kind:
    """The kind named ``name``; UsageError for a name none has."""
    if name not in KINDS:
        raise UsageError(f"executor {name!r}: not one of {', '.join(KINDS)}")
    return KINDS[name]


def executor_for(name: str) -> type[Executor]:
    """The executor of the kind named ``name`` (a run's cleanup); UsageError as kind_of."""
    return kind_of(name).executor


def executor_for_launch(launch: Launch) -> type[Executor]:
    """The executor that runs ``launch``: its kind's choice (a process run on this
    machine alone goes direct)."""
    return kind_of(launch.executor).executor_for(launch)
