"""Two runs side by side: the change of each metric, flagged when it leaves the spread of
the earlier runs of the same case on the same config. Pure functions; no textual."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.metrics import Metric

from tui.record import RunRecord

MIN_HISTORY = 2  # fewer earlier runs than this: no spread to judge a change against


@dataclass(frozen=True)
class MetricChange:
    metric: Metric
    before: float | None
    after: float | None
    change: float | None  # relative: (after - before) / before; None if either is unknown
    spread: tuple[float, float] | None  # (min, max) of the earlier runs, None if too few
    outside: bool  # after lies outside that spread

    @property
    def better(self) -> bool | None:
        """Whether the change is an improvement; None when the metric has no direction."""
        if self.change is None or self.metric.higher_is_better is None or self.change == 0:
            return None
        return (self.change > 0) == self.metric.higher_is_better


def compare(
    before: RunRecord, after: RunRecord, history: Sequence[RunRecord]
) -> list[MetricChange]:
    """Metrics known in either run, in the registry's order. ``history`` holds earlier records of
    after's case and config (any status; only passed runs started before ``after`` count)."""
    earlier = [
        r
        for r in history
        if r.status == "passed" and r.started < after.started and r.run_id != after.run_id
    ]
    out = []
    for name, metric in after.registry().items():
        a = before.metrics.get(name)
        b = after.metrics.get(name)
        if a is None and b is None:
            continue
        change = (b - a) / abs(a) if a not in (None, 0) and b is not None else None
        values = [v for r in earlier if (v := r.metrics.get(name)) is not None]
        spread = (min(values), max(values)) if len(values) >= MIN_HISTORY else None
        outside = spread is not None and b is not None and not spread[0] <= b <= spread[1]
        out.append(MetricChange(metric, a, b, change, spread, outside))
    return out
