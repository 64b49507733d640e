"""What qualify reads from a run's record for its samples: a judged metric's label, the
rule it is judged by, and the run's covariates (busy, throttled)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

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


def link_samples(
    records: Iterable[RunRecord], rules: Mapping[str, Rule]
) -> dict[str, dict[tuple[str, str], list[float]]]:
    """Each judged link metric's samples by pair (label: case config metric), from the
    passed runs on two hosts, as the command collects them."""
    found: dict[str, dict[tuple[str, str], list[float]]] = {}
    for r in records:
        if r.status != "passed" or len(r.hosts) != 2 or r.hosts[0] == r.hosts[1]:
            continue
        a, b = r.hosts
        for name, value in r.metrics.items():
            if name in rules and value is not None:
                found.setdefault(metric_label(r, name), {}).setdefault((a, b), []).append(
                    float(value)
                )
    return found
