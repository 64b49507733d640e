"""The executors by kind: the one list of what a host's ``fleetperf_executor`` may name
(docs/executors.md). Process and docker runs that start together share one play."""

from __future__ import annotations

from tui.core.errors import UsageError
from tui.executors.base import DEFAULT_KIND, DOCKER, SLURM, Executor, Launch
from tui.executors.play import Play
from tui.executors.slurm import Slurm

EXECUTORS: dict[str, type[Executor]] = {DEFAULT_KIND: Play, DOCKER: Play, SLURM: Slurm}
KINDS = tuple(EXECUTORS)


def executor_for(kind: str) -> type[Executor]:
    """The executor of ``kind``; UsageError for a kind none serves."""
    if kind not in EXECUTORS:
        raise UsageError(f"executor {kind!r}: not one of {', '.join(KINDS)}")
    return EXECUTORS[kind]


def executor_for_launch(launch: Launch) -> type[Executor]:
    """The executor that runs ``launch``: the direct one for a run on this machine alone
    (``launch.local``, tui/executors/direct.py), else its kind's."""
    from tui.executors.direct import Direct  # and jinja2: not imported until a run starts

    return Direct if launch.local is not None else executor_for(launch.executor)
