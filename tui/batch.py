"""Headless mode: plan every run first, then drive the engine and print its progress."""

from __future__ import annotations

import signal
import statistics
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tui import catalog
from tui.events import (
    CaseResult,
    EvalSample,
    Event,
    HostState,
    MetricSample,
    RunFinished,
    RunStarted,
    WorkloadError,
    WorkloadStarted,
)
from tui.references import flag_line
from tui.session import Batch, Session
from tui.store import interrupted_line
from tui.tables import render
from tui.term import printable

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_FLAGGED = 3  # every run passed, but a metric is outside its band (docs/references.md)


@dataclass
class BatchArgs:
    cases: list[str]
    configs: list[str]
    sets: list[str]
    inventory: Path
    repeat: int
    results_dir: Path
    data_root: Path
    fmt: str
    wait_s: float = 0.0
    judge: bool = True  # --no-judge: no verdicts, no exit 3


def pair_cases(cases: list[str], configs: list[str]) -> list[tuple[str, str]]:
    """``--case A --config x --case B --config y`` pairs by position; one case serves all."""
    if not cases or not configs:
        raise catalog.CatalogError("--batch needs at least one --case and one --config")
    if len(cases) == 1:
        cases = cases * len(configs)
    if len(cases) != len(configs):
        raise catalog.CatalogError(
            f"--case given {len(cases)} times and --config {len(configs)} times: pair them"
        )
    return list(zip(cases, configs, strict=True))


class ProgressPrinter:
    """One line per logging step, eval and host failure; a run's start and end. Host
    names, messages and errors come from the fleet: printed with control codes escaped."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.latencies: dict[str, list[float]] = {}
        self._lock = threading.Lock()  # runs on several hosts print from several threads

    def __call__(self, ev: Event) -> None:
        line = self._line(ev)
        if line:
            with self._lock:
                print(
                    printable(line), file=self.err if self._is_error(ev) else self.out, flush=True
                )

    @staticmethod
    def _is_error(ev: Event) -> bool:
        return isinstance(ev, RunFinished) and ev.status == "bad_input"

    def _line(self, ev: Event) -> str | None:
        if isinstance(ev, MetricSample):
            self.latencies.setdefault(ev.run_id, []).append(ev.latency)
            parts = [f"{ev.host:<12} step {ev.step:>6}", f"samples {ev.samples:>8}"]
            if ev.throughput is not None:
                parts.append(f"{ev.throughput:9.1f} samples/s")
            if ev.loss is not None:
                parts.append(f"loss {ev.loss:.4f}")
            if ev.mem_used_gib is not None and ev.mem_total_gib is not None:
                parts.append(f"mem {ev.mem_used_gib:.2f}/{ev.mem_total_gib:.1f} GiB")
            return "  ".join(parts)
        if isinstance(ev, RunStarted):
            return f"== {ev.case} {ev.config} on {', '.join(ev.hosts)} (run {ev.run_id})"
        if isinstance(ev, RunFinished):
            return self._finished(ev)
        if isinstance(ev, WorkloadStarted):
            return f"{ev.host:<12} started: world size {ev.world_size}"
        if isinstance(ev, EvalSample):
            return f"{ev.host:<12} eval {ev.name}={ev.value:.4f} after {ev.samples} samples"
        if isinstance(ev, HostState) and ev.phase in ("failed", "unreachable"):
            return f"{ev.host:<12} {ev.phase.upper()}: {ev.message}"
        if isinstance(ev, HostState) and ev.phase in ("queued", "running") and ev.message:
            return f"{ev.host:<12} {ev.phase}: {ev.message}"  # a Slurm job's life
        if isinstance(ev, HostState) and ev.phase == "stopped":
            return f"{ev.host:<12} stopped: the workload no longer runs there"
        if isinstance(ev, WorkloadError):
            return f"{ev.host:<12} rank {ev.rank} error: {ev.message}"
        if isinstance(ev, CaseResult) and ev.notes:
            # The notes themselves are in the record and the run directory.
            return (
                f"{ev.host:<12} {len(ev.notes)} workload note(s) kept in the record"
                f" (fleetperf results {ev.run_id} --format json)"
            )
        return None

    def _finished(self, ev: RunFinished) -> str:
        if ev.status == "bad_input":
            return f"fleetperf: error: {ev.error} (nothing launched)"
        lines = []
        latencies = self.latencies.pop(ev.run_id, [])
        if latencies:
            lines.append(
                f"== event latency: median {statistics.median(latencies):.2f} s"
                f" over {len(latencies)} step records"
            )
        lines.append(f"== {ev.status}" + (f": {ev.error}" if ev.error else ""))
        return "\n".join(lines)


@contextmanager
def _signals_set(requested: threading.Event) -> Iterator[None]:
    """While the batch runs, Ctrl-C and SIGTERM only set ``requested``: the main loop
    then cancels the batch (remote work stopped) instead of a KeyboardInterrupt tearing
    through it. Installed before the batch starts, so no moment of a run escapes it."""
    previous = {
        sig: signal.signal(sig, lambda *_: requested.set())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _drive(batch: Batch, requested: threading.Event, out: TextIO) -> None:
    """Wait for the batch in the main thread; cancel it once a stop is requested."""
    cancelled = False
    while not batch.done:
        if requested.is_set() and not cancelled:
            print("== stopping: cancelling the runs and stopping their remote work ...", file=out)
            out.flush()
            batch.cancel()
            cancelled = True
        batch.wait(0.2)


def run_batch(args: BatchArgs, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        sets = catalog.parse_sets(args.sets)
        pairs = pair_cases(args.cases, args.configs)
        session = Session(
            args.inventory,
            args.results_dir,
            args.data_root,
            lease_wait_s=args.wait_s,
            judge=args.judge,
        )
    except catalog.CatalogError as exc:
        print(printable(f"fleetperf: error: {exc}"), file=err)
        return EXIT_BAD_INPUT
    try:
        for record in session.interrupted:
            print(printable(interrupted_line(record)), file=err)
        try:
            plans = session.plan(pairs, sets, args.repeat)
        except catalog.CatalogError as exc:
            print(printable(f"fleetperf: error: {exc}"), file=err)
            return EXIT_BAD_INPUT
        requested = threading.Event()
        with _signals_set(requested):
            batch = session.start(plans)
            batch.subscribe(ProgressPrinter(out, err))
            _drive(batch, requested, out)
        records = batch.wait()
    finally:
        session.close()
    if records:
        print(file=out)
        print(printable(render(records, args.fmt)), file=out)
    flags = [flag_line(r, c) for r in records if r.verdict for c in r.verdict.flagged]
    for line in flags:
        print(printable(line), file=out)
    statuses = {run.status for run in batch.runs}
    if "bad_input" in statuses:
        return EXIT_BAD_INPUT
    if statuses != {"passed"}:
        return EXIT_FAILED
    return EXIT_FLAGGED if flags else EXIT_OK
