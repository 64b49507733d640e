"""A run's record, built in one place from its launch (the 'running' record stored
before anything starts) and then its outcome (the ended record): the batch, the app and
a followed run all keep what this builds. A new record field is the record model
(tui/results/record.py), a line here, and a migration (tui/results/migrations)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tui.catalog import images
from tui.catalog.metrics import CaseMetric
from tui.core.events import CaseResult
from tui.executors.base import Launch, Outcome
from tui.results.interrupted import controller_id
from tui.results.record import RunRecord, now_utc_iso


def running_record(launch: Launch, batch_id: str) -> RunRecord:
    """The 'running' record of a run about to start: what the controller knows."""
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
        status="running",
        started=now_utc_iso(),
        precision=spec.precision,
        fix_hp=spec.seed_fix_hp,
        hp=spec.hp,
        smoke=spec.smoke,
        config_env=spec.config.env,
        executor=launch.executor,
        # The image tag the hosts' preflight insists on (a kind that runs images); the ids that
        # ran come at the end.
        image=launch.image.tag if launch.image else None,
        case_metrics=[CaseMetric.model_validate(m) for m in spec.case.metrics],
        columns=spec.case.report,
        short_names=spec.case.short_names,
        run_dir=str(launch.run_dir),
        inventory=str(launch.inventory),
        controller=controller_id(),
    )


def finished_record(
    record: RunRecord,
    outcome: Outcome,
    dropped_lines: Counter[str],
    monitoring: dict[str, Any] | None,
) -> RunRecord:
    result: CaseResult | None = outcome.result
    known = record.registry()
    metrics = dict(result.metrics) if result else {}
    notes = [*(result.notes if result else []), *outcome.notes]
    dropped = sorted(k for k in metrics if k not in known)
    if dropped:
        notes.append(f"metrics not in the registry, dropped: {', '.join(dropped)}")
    if dropped_lines:  # the workload wrote lines the controller could not take
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(dropped_lines.items()))
        notes.append(
            f"{dropped_lines.total()} event line(s) broke the workload contract"
            f" (docs/workload-contract.md) and were dropped: {why}"
        )
    return RunRecord.model_validate(
        {
            **record.model_dump(),
            "status": outcome.status,
            "error": outcome.error,
            "finished": now_utc_iso(),
            "metrics": {k: v for k, v in metrics.items() if k in known},
            "notes": notes,
            "environment": result.environment if result else {},
            "peak": result.peak if result else None,
            "rank_times": result.rank_times if result else None,
            "points": result.points if result else None,
            "monitoring": monitoring,
            "load_per_cpu": outcome.load_per_cpu,
            "synthetic_data": outcome.synthetic_data,
            "executor_detail": outcome.detail,
            "image": images.ran(record.image, outcome.image_ids) if record.image else None,
        }
    )
