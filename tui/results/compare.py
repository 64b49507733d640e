"""Two runs side by side: the change of each metric, flagged when it leaves the spread of
the earlier runs the newer one is comparable with (tui/results/references.py history_of: same case,
config, hyperparameters, accelerator and data kind; loaded and quiet hosts apart). What
makes the two runs unlike (other hyperparameters, say) is said, never silently compared.
Pure functions; no textual."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.metrics import Metric

from tui.results.record import RunRecord
from tui.results.references import history_and_apart

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


@dataclass(frozen=True)
class Comparison:
    changes: list[MetricChange]
    # What the two runs differ in besides their numbers ("max_samples 800 -> 3200"): a
    # change of a metric may come from it. Empty: like for like.
    differs: list[str]
    spread_runs: int  # the earlier runs the spread comes from
    # Comparable earlier runs left out of the spread for their host's load ('' none):
    # loaded hosts for a quiet run, quiet ones for a run on a loaded host.
    load_apart: str


def compare(before: RunRecord, after: RunRecord, history: Sequence[RunRecord]) -> Comparison:
    """Metrics known in either run, in the registry's order. ``history``: other records (any
    status); the spread comes from those history_of takes for ``after``."""
    earlier, apart = history_and_apart(after, history)
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
    return Comparison(out, differences(before, after), len(earlier), apart)


def metric_label(metric: Metric) -> str:
    """The metric's name with the unit its values are shown in: ``mfu_measured (%)``, not
    its record's unit (a fraction of 1) beside ``33.4%``."""
    unit = "%" if metric.fmt == "pct" else metric.unit
    return f"{metric.name} ({unit})" if unit else metric.name


def differences(before: RunRecord, after: RunRecord) -> list[str]:
    """What else than chance separates the runs: config, hyperparameters (every resolved one
    where both records have them, else those set away from the case's defaults),
    accelerator, data kind, a loaded host."""
    out = []
    if (before.vendor, before.config) != (after.vendor, after.config):
        out.append(f"config {before.vendor}/{before.config} -> {after.vendor}/{after.config}")
    a, b = (before.hp, after.hp) if before.hp and after.hp else (before.fix_hp, after.fix_hp)
    for key in sorted({*a, *b}):
        if a.get(key) != b.get(key):
            out.append(f"{key} {_hp(a, key)} -> {_hp(b, key)}")
    pairs = {
        "accelerator": (_accelerator(before), _accelerator(after)),
        "data": (_data(before), _data(after)),
        "host": (_host(before), _host(after)),
    }
    out += [f"{what} {x} -> {y}" for what, (x, y) in pairs.items() if x != y]
    return out


def _hp(hp: dict[str, Any], key: str) -> str:
    return repr(hp[key]) if key in hp else "(default)"


def _accelerator(record: RunRecord) -> str:
    return str(record.environment.get("accelerator") or "?")


def _data(record: RunRecord) -> str:
    return "synthetic" if record.synthetic_data else "real"


def _host(record: RunRecord) -> str:
    return f"loaded (load {record.load_per_cpu:g} per CPU)" if record.loaded else "quiet"
