"""Following a run another controller runs (``Session.follow``): its events as that
controller logs them in the run's directory (tui/engine/attach.py), then its end as the store
records it."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tui.core import liveness
from tui.core.errors import StoreError, UsageError
from tui.core.events import (
    Dropped,
    RunFinished,
    RunStarted,
    RunStatus,
)
from tui.engine import attach
from tui.engine.handles import RunEnds
from tui.results.interrupted import mark_interrupted
from tui.results.record import RunRecord

if TYPE_CHECKING:
    from tui.results.store import ResultStore


FOLLOW_POLL_S = 0.5  # how often a followed run's log and record are read
CLOSE_S = 2.0  # how long closing a followed run waits for its follower


class FollowedRun(RunEnds):
    """A run another controller runs, followed read-only: the events that controller logs
    in the run's directory (tui/engine/attach.py) as they come, then the run's end as the
    store records it. Subscribed to as a RunHandle is; only its own controller stops it."""

    def __init__(
        self, store: ResultStore, results_dir: Path, record: RunRecord, poll_s: float
    ) -> None:
        super().__init__()
        self.run_id = record.run_id
        self.started = record  # the record as the store had it when following began
        self.owner = owner_text(record.controller)
        self.status: RunStatus = "running"
        self.error: str | None = None
        self.record: RunRecord | None = None  # once it ended; None if its record went
        self._store = store
        self._poll_s = poll_s
        self._log = attach.RunLog(results_dir / "runs" / record.run_id / "events.jsonl")
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=self.run_id, daemon=True)

    def cancel(self) -> None:
        """Refused: UsageError, one line naming the controller that can stop the run."""
        raise UsageError(
            f"run {self.run_id} belongs to controller {self.owner}: read-only here;"
            " cancel it from that controller"
        )

    def close(self) -> None:
        """Stop following (the run goes on), waiting at most ``CLOSE_S`` for the follower:
        a store or file that does not answer must not hold the app's exit (the thread is
        a daemon)."""
        self._closed.set()
        self._thread.join(CLOSE_S)

    def _follow(self) -> None:
        record = self.started
        ref, begun = f"{record.vendor}/{record.config}", _timestamp(record.started)
        self._subscribers.emit(RunStarted(self.run_id, record.case, ref, record.hosts, begun))
        try:
            while True:
                # The record first: once it says the run ended, the log is whole
                # (tui/engine/session.py _conclude), and the lines read next are the last.
                current = self._current(record)
                for line in self._log.lines():
                    ev = attach.logged_event(self.run_id, line)
                    if not isinstance(ev, Dropped):
                        self._subscribers.emit(ev)
                if current is None or current.status != "running":
                    break
                record = current
                if self._closed.wait(self._poll_s):
                    return
        finally:
            self._log.close()
        self.record = current
        # A record gone while it ran: its controller refused the run before any launch.
        self.status = current.status if current else "bad_input"
        self.error = current.error if current else "refused before it started (no record kept)"
        self._subscribers.emit(RunFinished(self.run_id, self.status, self.error, time.time()))
        self._done.set()

    def _current(self, last: RunRecord) -> RunRecord | None:
        """The run's record now; the last one read while the store cannot be read. A run
        whose controller this one can prove gone is marked interrupted first, as at
        start-up (tui/results/store.py mark_interrupted)."""
        try:
            if liveness.proven_dead(liveness.parse(last.controller)):
                mark_interrupted(self._store)
            return self._store.get(self.run_id)
        except StoreError:  # locked or lost for now: read again at the next poll
            return last


def owner_text(controller: str | None) -> str:
    """Who runs a run, from its record's lease: its host and pid."""
    lease = liveness.parse(controller)
    return "unknown" if lease is None else f"{lease.host} pid {lease.pid}"


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return time.time()
