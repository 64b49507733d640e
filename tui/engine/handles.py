"""Run handles: what a front end holds of runs it started (``Batch``, ``RunHandle``) and of
a run another controller runs (tui/engine/following.py ``FollowedRun``), both
``RunHandleLike``; their subscribers; the batch's scheduler (runs that share no host run at
the same time). Callbacks run on engine threads."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tui.catalog import catalog
from tui.core.events import (
    Event,
    MetricSample,
    RunFinished,
    RunStatus,
    SysSample,
)
from tui.executors.base import (
    new_run_id,
)
from tui.results.monitoring import Monitor
from tui.results.record import RunRecord

# How a batch has its runs executed (Session._execute): the runs that start together,
# the batch's id, and what to call as each run ends.
Execute = Callable[[list["RunHandle"], str, Callable[["RunHandle"], None]], None]


Callback = Callable[[Event], None]
# An internal error's traceback: to stderr where no front end took the logger (logging's
# last resort), to the app's log file in the app (tui/app/__init__.py).
_LOG = logging.getLogger(__name__)


@runtime_checkable
class RunHandleLike(Protocol):
    """What the front ends use of a run, started here or followed: its id, status, error
    and record (once it ended), its events, its end."""

    run_id: str
    status: RunStatus
    error: str | None
    record: RunRecord | None

    def subscribe(self, cb: Callback) -> Callable[[], None]: ...

    def cancel(self) -> None: ...

    def wait(self, timeout: float | None = None) -> RunRecord | None: ...

    @property
    def done(self) -> bool: ...


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    spec: catalog.RunSpec
    hosts: list[str]


REPLAY_SAMPLES = 5000  # the newest samples a late subscriber gets back (other events: all)


class Subscribers:
    """Callbacks for a stream of events. A late subscriber first gets the events so far,
    so subscribing just after ``start()`` misses nothing (events emitted during that
    replay may interleave with it). Of the samples, which a long run emits without end,
    only the newest ``REPLAY_SAMPLES`` are kept for that."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callback] = []
        self._seq = itertools.count()
        self._kept: list[tuple[int, Event]] = []
        self._samples: deque[tuple[int, Event]] = deque(maxlen=REPLAY_SAMPLES)

    def subscribe(self, cb: Callback) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(cb)
            past = list(heapq.merge(self._kept, self._samples, key=lambda entry: entry[0]))
        for _, ev in past:
            cb(ev)

        def unsubscribe() -> None:
            with self._lock:
                if cb in self._callbacks:
                    self._callbacks.remove(cb)

        return unsubscribe

    def emit(self, ev: Event) -> None:
        with self._lock:
            entry = (next(self._seq), ev)
            if isinstance(ev, MetricSample | SysSample):
                self._samples.append(entry)
            else:
                self._kept.append(entry)
            callbacks = list(self._callbacks)
        for cb in callbacks:
            cb(ev)


class Ends:
    """Events to subscribe to and an end: what a batch, a run and a followed run share."""

    def __init__(self) -> None:
        self._subscribers = Subscribers()
        self._done = threading.Event()

    def subscribe(self, cb: Callback) -> Callable[[], None]:
        return self._subscribers.subscribe(cb)

    @property
    def done(self) -> bool:
        return self._done.is_set()


class RunEnds(Ends):
    """A run's: ``wait`` gives its record once it ended."""

    record: RunRecord | None

    def wait(self, timeout: float | None = None) -> RunRecord | None:
        self._done.wait(timeout)
        return self.record


class RunHandle(RunEnds):
    """One planned run: its status, its record once it ended, its events."""

    def __init__(self, plan: RunPlan, batch: Batch) -> None:
        super().__init__()
        self.run_id = plan.run_id
        self.plan = plan
        self.status: RunStatus = "queued"
        self.record: RunRecord | None = None
        self.error: str | None = None
        self._batch = batch
        self._cancel = threading.Event()
        # The run's sys samples, folded as they come: the record's energy and monitoring.
        config = plan.spec.config
        self._monitor = Monitor(config.vendor, config.nproc_per_node)

    def cancel(self) -> None:
        """Stop the run (remote work included); a queued run never starts."""
        self._cancel.set()

    def _emit(self, ev: Event) -> None:
        if isinstance(ev, SysSample):
            self._monitor.add(ev)
        self._subscribers.emit(ev)
        self._batch._subscribers.emit(ev)

    def _finish(self, status: RunStatus, error: str | None, record: RunRecord | None) -> None:
        self.status, self.error, self.record = status, error, record
        self._emit(RunFinished(self.run_id, status, error, time.time()))
        self._done.set()


class Batch(Ends):
    """Runs started together; a run waits while another run of the batch holds its hosts."""

    def __init__(self, execute: Execute, plans: list[RunPlan]) -> None:
        super().__init__()
        self.batch_id = new_run_id("batch")
        self.runs = [RunHandle(plan, self) for plan in plans]
        self._execute = execute
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._schedule, name=self.batch_id, daemon=True)

    def cancel(self) -> None:
        """Stop every run: running ones stop their remote work, queued ones never start."""
        self._stop.set()
        for run in self.runs:
            run.cancel()
        with self._wake:
            self._wake.notify_all()

    def wait(self, timeout: float | None = None) -> list[RunRecord]:
        self._done.wait(timeout)
        return [run.record for run in self.runs if run.record is not None]

    def _schedule(self) -> None:
        queue, busy, threads = list(self.runs), set[str](), []
        try:
            while queue:
                with self._wake:
                    if self._stop.is_set():
                        break
                    claimed, starting = set(busy), []
                    for run in list(queue):
                        if run._cancel.is_set():
                            queue.remove(run)
                            run._finish("aborted", "cancelled before it started", None)
                        elif claimed.isdisjoint(run.plan.hosts):
                            queue.remove(run)
                            busy.update(run.plan.hosts)
                            starting.append(run)
                        # Later runs may not overtake an earlier one waiting for its hosts.
                        claimed.update(run.plan.hosts)
                    if starting:
                        thread = threading.Thread(
                            target=self._run,
                            args=(starting, busy),
                            name=starting[0].run_id,
                            daemon=True,
                        )
                        threads.append(thread)
                        thread.start()
                    if queue:
                        self._wake.wait(0.5)
            for run in queue:
                run._finish("aborted", "not started: the batch stopped", None)
            for thread in threads:
                thread.join()
        finally:
            self._done.set()

    def _run(self, runs: list[RunHandle], busy: set[str]) -> None:
        """Runs that start together; each frees its hosts as it ends."""

        def ended(run: RunHandle) -> None:
            with self._wake:
                busy.difference_update(run.plan.hosts)
                if run.status in ("aborted", "bad_input"):
                    self._stop.set()  # as one run is refused or aborted, the batch stops
                self._wake.notify_all()

        try:
            self._execute(runs, self.batch_id, ended)
        except Exception as exc:  # a bug (or a store that stays locked): say so, go on
            _LOG.exception("internal error")
            for run in runs:
                if not run.done:
                    run._finish("failed", f"internal error: {exc!r}", None)
                    ended(run)
