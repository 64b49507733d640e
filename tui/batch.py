"""Headless mode: resolve every case first, then run them one by one, printing progress."""

from __future__ import annotations

import json
import signal
import statistics
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tui import catalog, fleet
from tui.events import (
    CaseResult,
    EvalSample,
    Event,
    HostState,
    MetricSample,
    WorkloadError,
    WorkloadStarted,
)
from tui.results import METRIC_KEYS, ResultStore, RunRecord, render

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


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
    """One line per logging step, eval and host failure; remembers the latencies."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.latencies: list[float] = []

    def __call__(self, ev: Event) -> None:
        line = self._line(ev)
        if line:
            print(line, file=self.out, flush=True)

    def _line(self, ev: Event) -> str | None:
        if isinstance(ev, MetricSample):
            self.latencies.append(ev.latency)
            parts = [f"{ev.host:<12} step {ev.step:>6}", f"samples {ev.samples:>8}"]
            if ev.throughput is not None:
                parts.append(f"{ev.throughput:9.1f} samples/s")
            if ev.loss is not None:
                parts.append(f"loss {ev.loss:.4f}")
            if ev.mem_used_gib is not None and ev.mem_total_gib is not None:
                parts.append(f"mem {ev.mem_used_gib:.2f}/{ev.mem_total_gib:.1f} GiB")
            return "  ".join(parts)
        if isinstance(ev, WorkloadStarted):
            return f"{ev.host:<12} started: world size {ev.world_size}"
        if isinstance(ev, EvalSample):
            return f"{ev.host:<12} eval {ev.name}={ev.value:.4f} after {ev.samples} samples"
        if isinstance(ev, HostState) and ev.phase in ("failed", "unreachable"):
            return f"{ev.host:<12} {ev.phase.upper()}: {ev.message}"
        if isinstance(ev, WorkloadError):
            return f"{ev.host:<12} rank {ev.rank} error: {ev.message}"
        if isinstance(ev, CaseResult):
            return "\n".join(f"{ev.host:<12} note: {n}" for n in ev.notes) or None
        return None


def _record(launch: fleet.Launch, outcome: fleet.Outcome, batch_id: str) -> RunRecord:
    spec = launch.spec
    return RunRecord(
        run_id=launch.run_id,
        batch_id=batch_id,
        case=spec.case.name,
        vendor=spec.config.vendor,
        config=spec.config.name,
        chip=spec.config.chip,
        nnodes=spec.config.nnodes,
        nproc_per_node=spec.config.nproc_per_node,
        hosts=launch.hosts,
        status=outcome.status,
        error=outcome.error,
        started=outcome.started,
        finished=outcome.finished,
        precision=spec.precision,
        fix_hp={k: v for k, v in spec.fix_hp.items() if k != "precision"},
        metrics={k: v for k, v in outcome.result.metrics.items() if k in METRIC_KEYS}
        if outcome.result
        else {},
        notes=outcome.result.notes if outcome.result else [],
        columns=spec.case.report,
        short_names=spec.case.short_names,
        run_dir=str(launch.run_dir),
    )


def _run_interruptible(work: Callable[[], fleet.Outcome], cancel: threading.Event) -> fleet.Outcome:
    """Run in a worker thread so Ctrl-C or SIGTERM cancels the run cleanly instead of
    tearing through ansible-runner."""
    box: list[fleet.Outcome | BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # re-raised in the main thread below
            box.append(exc)
        finally:
            done.set()

    previous = signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    threading.Thread(target=target, daemon=True).start()
    try:
        # Event.wait, not Thread.join: an interrupted join can leave the thread looking dead.
        while not done.is_set():
            try:
                done.wait(0.2)
            except KeyboardInterrupt:
                cancel.set()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def run_batch(args: BatchArgs, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        sets = catalog.parse_sets(args.sets)
        specs = []
        for case_name, ref in pair_cases(args.cases, args.configs):
            case = catalog.load_case(case_name)
            specs.append(catalog.resolve(case, catalog.load_config(case, ref), sets))
        if args.repeat < 1:
            raise catalog.CatalogError(f"--repeat {args.repeat}: must be at least 1")
        hosts = [
            fleet.select_hosts(args.inventory, s.config.vendor, s.config.nnodes) for s in specs
        ]
    except catalog.CatalogError as exc:
        print(f"fleetperf: error: {exc}", file=err)
        return EXIT_BAD_INPUT

    batch_id = fleet.new_run_id("batch")
    records: list[RunRecord] = []
    code = EXIT_OK
    cancel = threading.Event()
    store = ResultStore(args.results_dir / "fleetperf.sqlite")
    try:
        for spec, spec_hosts in [
            (s, h) for s, h in zip(specs, hosts, strict=True) for _ in range(args.repeat)
        ]:
            launch = fleet.Launch(
                spec=spec,
                run_id=fleet.new_run_id(spec.case.name),
                hosts=spec_hosts,
                inventory=args.inventory,
                results_dir=args.results_dir,
                data_root=args.data_root,
            )
            print(
                f"== {spec.case.name} {spec.config.ref} on {', '.join(spec_hosts)}"
                f" (run {launch.run_id})",
                file=out,
                flush=True,
            )
            printer = ProgressPrinter(out)
            outcome = _run_interruptible(
                lambda run=launch, show=printer: fleet.run_case(run, show, cancel), cancel
            )
            if printer.latencies:
                median = statistics.median(printer.latencies)
                print(
                    f"== event latency: median {median:.2f} s over {len(printer.latencies)}"
                    " step records",
                    file=out,
                )
            if outcome.status == "bad_input":
                print(f"fleetperf: error: {outcome.error} (nothing launched)", file=err)
                code = EXIT_BAD_INPUT
                break
            record = _record(launch, outcome, batch_id)
            store.add(record)
            result_json = json.dumps(record.to_json_dict(), indent=2, ensure_ascii=False)
            (launch.run_dir / "result.json").write_text(result_json + "\n", encoding="utf-8")
            records.append(record)
            verdict = outcome.status + (f": {outcome.error}" if outcome.error else "")
            print(f"== {verdict}", file=out, flush=True)
            if outcome.status != "passed":
                code = EXIT_FAILED
            if outcome.status == "aborted":
                break
    finally:
        store.close()
    if records:
        print(file=out)
        print(render(records, args.fmt), file=out)
    return code
