"""What qualify reads from a run's record for its samples: a judged metric's label, the
rule it is judged by, and the run's covariates (busy, throttled)."""

from __future__ import annotations

import dataclasses

from tui.qualify.judge import Rule
from tui.results.record import RunRecord


def metric_label(record: RunRecord, metric: str) -> str:
    """A judged metric as the tables name it: case, config, metric."""
    return f"{record.case} {record.config} {metric}"


def rule_for(label: str, rules: dict[str, Rule]) -> Rule:
    """The rule of a metric's label (its last word), named by the label."""
    rule = rules[label.rsplit(" ", 1)[-1]]
    return dataclasses.replace(rule, metric=label)


def covariates(record: RunRecord) -> tuple[str | None, str | None]:
    """(busy, throttle) of a run: the reasons its monitoring gives, None where it gives
    none (a record from before they were measured reads as quiet and unthrottled)."""
    monitoring = record.monitoring or {}
    found = []
    for key in ("busy", "throttle"):
        value = monitoring.get(key)
        if not isinstance(value, str):
            value = next((n for n in record.notes if n.startswith(f"{key}: ")), None)
        found.append(value.removeprefix(f"{key}: ") or None if value else None)
    return found[0], found[1]
