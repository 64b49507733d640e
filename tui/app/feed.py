"""Folds the engine's event stream into what the dashboard shows, off the UI thread.

Engine callbacks run on engine threads and may arrive thousands of times a second; they
only update the latest state per host under a lock. The UI pulls once per refresh tick:
``take()`` returns the hosts that changed since the last tick (one update per host per
tick) and adds one point per run to its chart series, which are bounded. No textual here.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from harness.case import CaseFile

from tui.core import events
from tui.core.eventtext import event_text

SERIES_POINTS = 600  # per run and chart: five minutes at two ticks a second
LOG_LINES = 500
CHARTS = ("throughput", "loss", "memory")


@dataclass(frozen=True, slots=True)
class HostRow:
    """One host of one run as the dashboard's table shows it; None is unknown."""

    host: str
    phase: str = "queued"
    message: str = ""
    step: int | None = None
    samples: int | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    mem_used_gib: float | None = None
    mem_total_gib: float | None = None
    loss: float | None = None
    eta_s: float | None = None
    ttft_p99_ms: float | None = None  # a serving run's, over the last interval


@dataclass
class RunView:
    """One run of a batch: its hosts, progress, series and log."""

    run_id: str
    case: str
    config: str
    hosts: list[str]
    budget: int | None  # the sample budget (hp max_samples), if the case has one
    target: tuple[str, float] | None  # (metric, value) when the case declares a target
    status: str = "queued"
    error: str | None = None
    samples: int = 0
    best_eval: float | None = None
    rows: dict[str, HostRow] = field(default_factory=dict)
    series: dict[str, deque[float]] = field(default_factory=dict)
    log: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    logged: int = 0  # lines logged so far: the next line's number

    def __post_init__(self) -> None:
        self.rows = {h: HostRow(h) for h in self.hosts}
        self.series = {name: deque(maxlen=SERIES_POINTS) for name in CHARTS}

    @property
    def active(self) -> bool:
        return self.status in ("queued", "running")

    def progress(self) -> tuple[float | None, float]:
        """(total, done) for a progress bar: samples against the budget, else the eval
        metric against the target; total None when neither is known."""
        if self.budget:
            return float(self.budget), float(min(self.samples, self.budget))
        if self.target and self.best_eval is not None:
            return self.target[1], min(self.best_eval, self.target[1])
        return None, 0.0


class RunFeed:
    """Thread-safe fold of events for any number of runs; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: dict[str, RunView] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._dirty_runs: set[str] = set()
        self._new_log: dict[str, list[tuple[int, str]]] = {}  # (its number, the line)
        self._last_tokens: dict[tuple[str, str], tuple[float, int]] = {}

    def add_run(
        self,
        run_id: str,
        case: str,
        config: str,
        hosts: list[str],
        hp: dict[str, Any],
        target: tuple[str, float] | None = None,
    ) -> RunView:
        budget = hp.get("max_samples")
        view = RunView(run_id, case, config, list(hosts), budget if budget else None, target)
        with self._lock:
            self.runs[run_id] = view
            self._dirty_runs.add(run_id)
        return view

    def set_status(self, run_id: str, status: str, error: str | None) -> None:
        """The run handle's status, the truth where an event raced the subscription."""
        with self._lock:
            view = self.runs.get(run_id)
            if (
                view is None
                or view.status == status
                or (status, view.status)
                == (
                    "queued",
                    "running",
                )
            ):
                return
            view.status, view.error = status, error or view.error
            self._dirty_runs.add(run_id)

    def push(self, ev: Any) -> None:
        """The engine callback: cheap, never blocks on the UI."""
        with self._lock:
            view = self.runs.get(ev.run_id)
            if view is not None:
                self._fold(view, ev)

    def _fold(self, view: RunView, ev: Any) -> None:
        if isinstance(ev, events.MetricSample):
            self._metric(view, ev)
            return
        if isinstance(ev, events.RunStarted):
            view.status = "running"
        elif isinstance(ev, events.RunFinished):
            view.status, view.error = ev.status, ev.error
            # Hosts still shown as working have stopped with the run (cleanup always runs).
            phase = "finished" if ev.status == "passed" else "stopped"
            for host, row in view.rows.items():
                if row.phase in ("queued", "preflight", "running"):
                    self._set(view, host, phase=phase, eta_s=None)
        elif isinstance(ev, events.HostState):
            done = ev.phase not in ("preflight", "running")
            eta = None if done else view.rows.get(ev.host, HostRow(ev.host)).eta_s
            self._set(view, ev.host, phase=ev.phase, message=ev.message, eta_s=eta)
        elif isinstance(ev, events.WorkloadStarted):
            self._set(view, ev.host, phase="running")
        elif isinstance(ev, events.EvalSample):
            if view.target and ev.name == view.target[0]:
                view.best_eval = max(ev.value, view.best_eval or ev.value)
                self._dirty_runs.add(view.run_id)
        elif isinstance(ev, events.WorkloadError):
            self._set(view, ev.host, phase="failed", message=ev.message, eta_s=None)
        if said := event_text(ev):
            self._log(view, said.text if said.host is None else f"{said.host}: {said.text}")

    def _metric(self, view: RunView, ev: events.MetricSample) -> None:
        key = (view.run_id, ev.host)
        previous = view.rows.get(ev.host) or HostRow(ev.host)
        tokens_per_s = None
        if ev.tokens is not None:
            last = self._last_tokens.get(key)
            if last is not None and ev.t > last[0]:
                tokens_per_s = (ev.tokens - last[1]) / (ev.t - last[0])
            self._last_tokens[key] = (ev.t, ev.tokens)
        eta = None
        if view.budget and ev.throughput:
            eta = max(view.budget - ev.samples, 0) / ev.throughput
        view.samples = max(view.samples, ev.samples)
        self._dirty_runs.add(view.run_id)
        self._set(
            view,
            ev.host,
            phase="running",
            step=ev.step,
            samples=ev.samples,
            samples_per_s=ev.throughput,
            tokens_per_s=tokens_per_s if tokens_per_s is not None else previous.tokens_per_s,
            mem_used_gib=ev.mem_used_gib,
            mem_total_gib=ev.mem_total_gib,
            loss=ev.loss,
            eta_s=eta,
            ttft_p99_ms=ev.ttft_p99_ms,
        )

    def _set(self, view: RunView, host: str, **changes: Any) -> None:
        row = view.rows.get(host)
        if row is None:  # a host the plan did not name: show it rather than drop it
            view.hosts.append(host)
            row = HostRow(host)
        if (
            row.phase in ("failed", "unreachable", "stopped", "finished")
            and changes.get("phase") == "running"
        ):
            changes.pop("phase")  # a late metric line must not hide a failure
        view.rows[host] = replace(row, **changes)
        self._dirty.add((view.run_id, host))

    def _log(self, view: RunView, line: str) -> None:
        view.log.append(line)
        self._new_log.setdefault(view.run_id, []).append((view.logged, line))
        view.logged += 1
        self._dirty_runs.add(view.run_id)

    def take(
        self,
    ) -> tuple[list[tuple[str, HostRow]], set[str], dict[str, list[tuple[int, str]]]]:
        """Once per tick: changed (run_id, row)s, changed run ids, new log lines per run
        (each with its number: a snapshot taken since holds some of them). Adds one chart
        point per running run."""
        with self._lock:
            rows = [(run_id, self.runs[run_id].rows[host]) for run_id, host in self._dirty]
            runs, logs = self._dirty_runs | {r for r, _ in self._dirty}, self._new_log
            self._dirty, self._dirty_runs, self._new_log = set(), set(), {}
            for view in self.runs.values():
                if view.status == "running":
                    _add_points(view)
        return rows, runs, logs

    def snapshot(self, run_id: str) -> RunView:
        """A copy of one run that the UI may read without the lock."""
        with self._lock:
            view = self.runs[run_id]
            out = copy.copy(view)  # not replace(): __post_init__ would reset rows and series
            out.hosts, out.rows = list(view.hosts), dict(view.rows)
            out.series = {k: deque(v, maxlen=SERIES_POINTS) for k, v in view.series.items()}
            out.log = deque(view.log, maxlen=LOG_LINES)
            return out

    def rows(self, run_id: str) -> dict[str, HostRow]:
        """One run's host rows (immutable), without copying its series and log."""
        with self._lock:
            return dict(self.runs[run_id].rows)

    def series(self, run_id: str, name: str, width: int) -> list[float]:
        """One chart's points for a widget ``width`` cells wide."""
        with self._lock:
            points = list(self.runs[run_id].series[name])
        return downsample(points, width)


def run_target(case: CaseFile, hp: dict[str, Any], smoke: bool) -> tuple[str, float] | None:
    """(metric, value) a run is judged by, as the workload resolves it (hp target_<metric>
    over case.yaml's); None without a target or for a smoke run, which has none."""
    value = None if smoke else case.target_value(hp)
    return None if value is None or case.target is None else (case.target.metric, value)


def _add_points(view: RunView) -> None:
    rows = [r for r in view.rows.values() if r.samples is not None]
    if not rows:
        return
    # Every node's rank 0 reports the whole job's throughput: take one, not the sum.
    throughput = [r.samples_per_s for r in rows if r.samples_per_s is not None]
    losses = [r.loss for r in rows if r.loss is not None]
    mem = [r.mem_used_gib for r in rows if r.mem_used_gib is not None]
    if throughput:
        view.series["throughput"].append(max(throughput))
    if losses:
        view.series["loss"].append(sum(losses) / len(losses))
    if mem:
        view.series["memory"].append(max(mem))


def downsample(points: list[float], width: int) -> list[float]:
    """At most ``width`` points: the mean of equal buckets, so a spike still moves its bucket."""
    if width <= 0:
        return []
    if len(points) <= width:
        return points
    out = []
    for i in range(width):
        lo, hi = i * len(points) // width, (i + 1) * len(points) // width
        bucket = points[lo:hi]
        # Rounded: float noise in a flat series would otherwise fill the sparkline's range.
        out.append(float(f"{sum(bucket) / len(bucket):.6g}"))
    return out
