"""Events as the operator reads them: one text per event, shared by the batch printer and
the app's run log (each lays it out its own way, and escapes it for its screen)."""

from __future__ import annotations

from typing import NamedTuple

from tui.core.events import (
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


class EventText(NamedTuple):
    host: str | None  # whose line it is; None for the run's own (its start and end)
    text: str


def event_text(ev: Event, store_options: str = "") -> EventText | None:
    """What ``ev`` says, or None for what has no line of its own (system samples).
    ``store_options``: what ``fleetperf results`` needs to find the run's store
    (``--store URL``; empty for the default), for the hint that names that command."""
    match ev:
        case MetricSample():
            parts = [f"step {ev.step:>6}", f"samples {ev.samples:>8}"]
            if ev.throughput is not None:
                parts.append(f"{ev.throughput:9.1f} samples/s")
            if ev.loss is not None:
                parts.append(f"loss {ev.loss:.4f}")
            if ev.mem_used_gib is not None and ev.mem_total_gib is not None:
                parts.append(f"mem {ev.mem_used_gib:.2f}/{ev.mem_total_gib:.1f} GiB")
            return EventText(ev.host, "  ".join(parts))
        case RunStarted():
            hosts = ", ".join(ev.hosts)
            return EventText(None, f"started {ev.case} {ev.config} on {hosts} (run {ev.run_id})")
        case RunFinished():
            return EventText(None, ev.status + (f": {ev.error}" if ev.error else ""))
        case HostState():
            return EventText(ev.host, _host_state(ev))
        case WorkloadStarted():
            return EventText(ev.host, f"started: world size {ev.world_size}")
        case EvalSample():
            return EventText(ev.host, f"eval {ev.name}={ev.value:.4f} after {ev.samples} samples")
        case WorkloadError():
            return EventText(ev.host, f"rank {ev.rank} error: {ev.message}")
        case CaseResult():
            notes = (
                f", {len(ev.notes)} note(s) in the record (fleetperf results {ev.run_id}"
                f"{store_options} --format json)"
                if ev.notes
                else ""
            )
            return EventText(ev.host, f"result {ev.status}{notes}")
    return None


def _host_state(ev: HostState) -> str:
    if ev.phase in ("failed", "unreachable"):  # the tracker's message names host and phase
        return f"{ev.phase.upper()}: {ev.message}"
    if ev.phase == "stopped" and not ev.message:
        return "stopped: the workload no longer runs there"
    return ev.phase + (f": {ev.message}" if ev.message else "")
