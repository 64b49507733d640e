"""Runs whose controller stopped: who runs a run, and marking another's dead run
interrupted. Apart from tui/results/store.py, so the engine and the command line load the
store's database libraries only when they open one (``fleetperf --help`` does not).
Controller code: no torch, no textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.core import liveness
from tui.results.record import RunRecord

if TYPE_CHECKING:
    from tui.results.store import ResultStore


def controller_id() -> str:
    """Who runs a run: this controller's lease (tui/core/liveness.py), as records keep it."""
    return liveness.this_controller().text()


def mark_interrupted(store: ResultStore) -> list[RunRecord]:
    """Runs left 'running' by a controller that this one can prove gone -> 'interrupted'.
    (One it cannot judge, in another PID namespace or on another machine, stays running.)"""
    error = "the controller stopped while the run was running"
    marked = []
    for record in store.list(status="running"):
        if liveness.proven_dead(liveness.parse(record.controller)) and store.interrupt(
            record, error
        ):
            marked.append(record.model_copy(update={"status": "interrupted", "error": error}))
    return marked


def interrupted_line(record: RunRecord) -> str:
    """What to tell the operator about a run found interrupted."""
    return (
        f"fleetperf: run {record.run_id} ({record.case} {record.vendor}/{record.config} on"
        f" {', '.join(record.hosts)}) was interrupted: its controller stopped;"
        " `fleetperf cleanup -i INVENTORY` (the inventory it ran on) stops what is left on"
        " its hosts"
    )
