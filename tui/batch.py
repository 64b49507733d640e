"""Headless mode: plan every run first, then drive the engine and print its progress."""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import statistics
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tui.catalog import catalog
from tui.catalog.suites import load_suite
from tui.core.errors import InventoryError, UsageError, UserInputError
from tui.core.events import Event, HostState, MetricSample, RunFinished, RunStarted
from tui.core.eventtext import event_text
from tui.core.paths import default_results_dir
from tui.core.term import printable
from tui.engine.handles import Batch
from tui.engine.inventory import Inventory
from tui.engine.session import Session
from tui.results.interrupted import interrupted_line
from tui.results.record import RunRecord
from tui.results.report import fmt_band
from tui.results.tables import monitoring_text, render, short_id
from tui.results.verdict import Check

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
    smoke: bool = False  # --smoke: each case's short run (case.yaml smoke:), not judged
    suite: str | None = None  # --suite: its runs, --config picking its chips (docs/suites.md)
    store: str | None = None  # --store: the results store (default: FLEETPERF_STORE, the file)


def pair_cases(cases: list[str], configs: list[str]) -> list[tuple[str, str]]:
    """``--case A --config x --case B --config y`` pairs by position; one case serves all."""
    if not cases or not configs:
        raise UsageError("--batch needs --suite NAME, or at least one --case and one --config")
    if len(cases) == 1:
        cases = cases * len(configs)
    if len(cases) != len(configs):
        raise UsageError(
            f"--case given {len(cases)} times and --config {len(configs)} times: pair them"
        )
    return list(zip(cases, configs, strict=True))


def batch_pairs(args: BatchArgs) -> list[tuple[str, str]]:
    """The runs asked for: the suite's (on the chips ``--config`` names, or all), or the
    ``--case``/``--config`` pairs."""
    if args.suite is None:
        return pair_cases(args.cases, args.configs)
    if args.cases:
        raise UsageError(f"--suite {args.suite} names its cases: no --case beside it")
    return load_suite(args.suite).pick(args.configs)


# The host phases a batch prints (the others are in the record and the app's log).
_HOST_PHASES_SHOWN = ("failed", "unreachable", "stopped", "queued", "running")


class ProgressPrinter:
    """One line per logging step, eval and host failure; a run's start and end. Host
    names, messages and errors come from the fleet: printed with control codes escaped.

    A run's lines are held until a workload launches on one of its hosts (the tracker's
    ``launched``, tui/executors/tracker.py): a run refused in preflight shows one error line, no
    "started" line and no run id, as it leaves no record."""

    def __init__(self, out: TextIO, err: TextIO, store_options: str = "") -> None:
        self.out, self.err = out, err
        self.store_options = store_options  # in the hints that name `fleetperf results`
        self.latencies: dict[str, list[float]] = {}
        self._held: dict[str, list[str]] = {}  # run id -> its lines before launch
        self._lock = threading.Lock()  # runs on several hosts print from several threads

    def __call__(self, ev: Event) -> None:
        line = self._line(ev)
        with self._lock:
            refused = self._is_error(ev)
            for text in self._unheld(ev, [line] if line else []):
                self._print(printable(text), self.err if refused else self.out)

    def _print(self, text: str, stream: TextIO) -> None:
        """A reader that went away (``--batch | head``) stops the printing, not the runs:
        they go on to their records, whose ids the rest of the output would have named."""
        try:
            print(text, file=stream, flush=True)
        except BrokenPipeError:
            devnull = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the batch
            if stream is self.out:
                self.out = devnull
            else:
                self.err = devnull

    def _unheld(self, ev: Event, lines: list[str]) -> list[str]:
        """The lines to print now: none while the run is held; the held ones once it
        launches; only the error of a run refused before launch."""
        if isinstance(ev, RunStarted):
            self._held[ev.run_id] = lines
            return []
        if ev.run_id not in self._held:
            return lines
        if not self._launches(ev):
            self._held[ev.run_id] += lines
            return []
        held = self._held.pop(ev.run_id)
        return lines if self._is_error(ev) else held + lines

    @staticmethod
    def _launches(ev: Event) -> bool:
        """Whether ``ev`` ends the run's hold: a launch (queued: a Slurm job submitted)
        or its end."""
        return isinstance(ev, RunFinished) or (
            isinstance(ev, HostState) and ev.phase in ("running", "queued")
        )

    @staticmethod
    def _is_error(ev: Event) -> bool:
        return isinstance(ev, RunFinished) and ev.status == "bad_input"

    def _line(self, ev: Event) -> str | None:
        if isinstance(ev, MetricSample):
            self.latencies.setdefault(ev.run_id, []).append(ev.latency)
        if isinstance(ev, RunFinished):
            return self._finished(ev)
        if isinstance(ev, HostState) and ev.phase not in _HOST_PHASES_SHOWN:
            return None
        if isinstance(ev, HostState) and ev.phase in ("queued", "running") and not ev.message:
            return None  # only a Slurm job's life says something there
        said = event_text(ev, self.store_options)
        if said is None:
            return None
        return f"== {said.text}" if said.host is None else f"{said.host:<12} {said.text}"

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
        lines.append(f"== {event_text(ev).text}")
        return "\n".join(lines)


def store_options(store: str | None, results_dir: Path) -> str:
    """What ``fleetperf results`` needs to find this batch's runs: `` --store URL`` (without
    the URL's password: it stays off screens and logs; PGPASSWORD or ~/.pgpass give it),
    `` --results DIR``, or nothing where the default store is theirs."""
    if store:
        from tui.results.storedb import Target  # SQLAlchemy: only where a store is named

        target = Target(store)
        url = target.url._replace(drivername="postgresql", password=None).render_as_string()
        return f" --store {shlex.quote(target.shown if target.sqlite else url)}"
    if results_dir != default_results_dir().resolve():
        return f" --results {shlex.quote(str(results_dir))}"
    return ""


def suite_here(name: str, inventory: Inventory) -> tuple[list[tuple[str, str]], str]:
    """``--suite NAME`` without ``--config``: its runs on the chips the inventory has hosts
    for, and the line naming the chips it skips ('' where none is); InventoryError where
    it has a host for none of them."""
    suite = load_suite(name)
    here = [c for c in suite.chips if inventory.candidates(*c.split("/", 1), devices=0)]
    if not here:
        raise InventoryError(
            f"inventory {inventory.path}: no host for any chip of suite {name}"
            f" ({', '.join(suite.chips)})"
        )
    pairs = suite.pick(here)
    skipped = [c for c in suite.chips if c not in here]
    if not skipped:
        return pairs, ""
    return pairs, (
        f"== suite {name}: skipped {len(suite.pairs) - len(pairs)} run(s) on"
        f" {', '.join(skipped)}: no host for them in {inventory.path}"
    )


def flag_line(record: RunRecord, check: Check) -> str:
    """The line --batch prints for a flagged metric: name, value, band and its source."""
    metric = record.registry().get(check.metric)
    show = metric.show if metric else str
    unit = f" {metric.unit}" if metric and metric.unit and metric.fmt != "pct" else ""
    band = fmt_band(metric, check.low, check.high) if metric else "?"
    return (
        f"FLAGGED {record.case} {record.vendor}/{record.config} run {record.run_id}:"
        f" {check.metric} {show(check.value)}{unit} outside {band} ({check.basis})"
    )


@contextmanager
def signals_set(requested: threading.Event) -> Iterator[None]:
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


def drive(batch: Batch, requested: threading.Event, out: TextIO) -> None:
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
        pairs = batch_pairs(args)
        session = Session(
            args.inventory,
            args.results_dir,
            args.data_root,
            lease_wait_s=args.wait_s,
            judge=args.judge,
            store=args.store,
        )
    except UserInputError as exc:
        print(printable(f"fleetperf: error: {exc}"), file=err)
        return EXIT_BAD_INPUT
    try:
        try:  # an unreachable store: one line, before any launch
            for record in session.open_store():
                print(printable(interrupted_line(record)), file=err)
            skipped = ""
            if args.suite is not None and not args.configs:
                pairs, skipped = suite_here(args.suite, session.read_inventory())
            plans = session.plan(pairs, sets, args.repeat, args.smoke)
        except UserInputError as exc:
            print(printable(f"fleetperf: error: {exc}"), file=err)
            return EXIT_BAD_INPUT
        # json and csv: stdout holds the table alone, for a program; the progress, stderr.
        progress = out if args.fmt == "md" else err
        if skipped:
            print(printable(skipped), file=progress)
        requested = threading.Event()
        with signals_set(requested):
            batch = session.start(plans)
            found_by = store_options(args.store, args.results_dir)
            batch.subscribe(ProgressPrinter(progress, err, found_by))
            drive(batch, requested, progress)
        records = batch.wait()
    finally:
        session.close()
    if records:
        print(file=progress)
        print(printable(render(records, args.fmt)), file=out)
        for record in records:  # json and csv records hold them: the tables go with progress
            title = f"{record.case} {record.vendor}/{record.config} run {short_id(record.run_id)}"
            print(f"\n#### {printable(title)}", file=progress)
            print(printable(monitoring_text(record, brief=True)), file=progress)
    flags = [flag_line(r, c) for r in records if r.verdict for c in r.verdict.flagged]
    for line in flags:
        print(printable(line), file=progress)
    statuses = {run.status for run in batch.runs}
    if "bad_input" in statuses:
        return EXIT_BAD_INPUT
    if statuses != {"passed"}:
        return EXIT_FAILED
    return EXIT_FLAGGED if flags else EXIT_OK


def end_process(rc: int) -> int:
    """End the batch's process with ``rc`` now, without the interpreter's teardown: freeing
    every module and object one by one cost a run 0.1-0.16 CPU-s, and as long in wall time
    after its result (issue 33). The store is closed by then; stdout and stderr are flushed
    and the exit handlers run (logging's flush, temporary files' removal, coverage) as at a
    normal exit. Returns ``rc`` instead where a thread that a normal exit waits for runs, or
    a profiler or tracer (``python -m cProfile``) writes its data once main returns."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if sys.getprofile() or sys.gettrace() or any(not t.daemon for t in others):
        return rc
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError):  # a reader gone (| head): as a normal exit
            stream.flush()
    atexit._run_exitfuncs()  # what Py_Finalize would run first
    os._exit(rc)
