"""References and history: is a passed run's number where it should be?

Two sources give a metric a band (docs/references.md):

- **References** (ReFrame's idea): a vendor config declares published figures with
  tolerances as fractions, e.g. ``p_core 287.9 samples/s, lower -0.10``. A reference
  judges a run only on the hardware it names (the config's chip and devices, the
  accelerator the workload reported) with the hyperparameters it was measured with;
  elsewhere it is shown, not judged.
- **History**: earlier passed runs of the same case, config, hyperparameters, accelerator
  and data kind (synthetic or not), busy and quiet runs apart (``busy``: what other
  processes used during the run where measured, else the load at launch). Judged as fleet
  qualification judges a host against its peers (tui/results/intervals.py), the earlier
  runs being the peers: their band is the median of the last ``HISTORY_RUNS`` ±
  ``K_MAD`` × 1.4826 × MAD (one run's noise); the run's interval (of its one value) is
  flagged only when it lies wholly outside that band by more than the metric's tolerance
  (a fraction of the band's centre), on the side that matters for the metric (throughput
  down, loss up, memory up); needs ``MIN_HISTORY`` runs.

Controller code: no torch, no textual. Pure functions but ``judge`` (which reads the store).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from harness.metrics import Metric

from tui.catalog.published import Reference
from tui.results.intervals import interval, side
from tui.results.verdict import Check, Verdict

if TYPE_CHECKING:
    from tui.catalog.catalog import RunSpec
    from tui.results.record import RunRecord
    from tui.results.store import ResultStore

HISTORY_RUNS = 10  # the band comes from the newest this many comparable runs
MIN_HISTORY = 3  # fewer comparable runs: history does not judge
K_MAD = 3.0  # the band's half-width: one run's noise, in robust standard deviations
MAD_TO_SIGMA = 1.4826  # MAD x this = the standard deviation of normal noise
DEFAULT_TOLERANCE = 0.15  # the floor past the band, as a fraction of its centre
# Metrics whose runs spread more by nature: wall time from process start (imports, data
# loading, time to a target accuracy), and accuracy at the evaluation that ended the run.
TOLERANCE = {"e2e_time": 0.25, "e2e_time_main": 0.25, "acc": 0.05}


def outside(value: float, low: float | None, high: float | None) -> bool:
    return (low is not None and value < low) or (high is not None and value > high)


# -- history --------------------------------------------------------------------------


def tolerance(metric: str) -> float:
    return TOLERANCE.get(metric, DEFAULT_TOLERANCE)


def _band(values: Sequence[float]) -> tuple[float, float, float]:
    """(low, median, high): the newest HISTORY_RUNS values' median ± K_MAD robust sigmas."""
    recent = list(values)[-HISTORY_RUNS:]
    median = statistics.median(recent)
    noise = K_MAD * MAD_TO_SIGMA * statistics.median(abs(v - median) for v in recent)
    return median - noise, median, median + noise


def history_band(
    values: Sequence[float], metric: Metric
) -> tuple[float | None, float | None, float, float] | None:
    """(low, high, median, half-width) from earlier values, oldest first; None when there
    are fewer than MIN_HISTORY or the metric has no direction. Only the side that matters
    is bounded, where a run's value is flagged (``flags``): the band plus the tolerance."""
    if metric.higher_is_better is None or len(values) < MIN_HISTORY:
        return None
    low, median, high = _band(values)
    half = high - median + tolerance(metric.name) * abs(median)
    if metric.higher_is_better:
        return median - half, None, median, half
    return None, median + half, median, half


def flags(value: float, values: Sequence[float], metric: Metric) -> bool:
    """Whether a run's ``value`` lies wholly outside the band of earlier ``values`` by more
    than the metric's tolerance, on the worse side (intervals.side, qualification's rule)."""
    low, _, high = _band(values)
    where = side(interval([value]), (low, high), tolerance(metric.name) * 100)
    return where == (-1 if metric.higher_is_better else 1)


def comparable_key(record: RunRecord) -> tuple[Any, ...]:
    """What a run is compared on: case, vendor config, every hyperparameter, the
    accelerator it reported (the chip class: on CPU the CPU model) and whether its data
    was synthetic (unknown counts as real)."""
    hp = tuple(sorted((k, repr(v)) for k, v in record.hp.items()))
    accelerator = str(record.environment.get("accelerator") or "")
    return (record.case, record.vendor, record.config, hp, accelerator, bool(record.synthetic_data))


def busy(record: RunRecord) -> bool:
    """Whether the run's hosts were busy with other work: what other processes used during
    the run (the ``busy`` of its monitoring, tui/results/monitoring.py) where it was
    measured; else, for records made before that, the load average at launch."""
    said = (record.monitoring or {}).get("busy", False)
    if said is None or isinstance(said, str):
        return said is not None
    return record.loaded


def history_of(record: RunRecord, earlier: Iterable[RunRecord]) -> list[RunRecord]:
    """The passed runs ``record`` is compared with, oldest first (the newest HISTORY_RUNS).
    Runs on a loaded (busy) host and on a quiet one are histories apart: a busy host's
    numbers measure its other work too (on a host always busy, its runs still judge each
    other)."""
    return history_and_apart(record, earlier)[0]


def load_apart(record: RunRecord, earlier: Iterable[RunRecord]) -> str:
    """'2 comparable run(s) on a loaded host left out' (or a quiet host, for a loaded
    run): what history_of kept apart; '' when nothing."""
    return history_and_apart(record, earlier)[1]


def history_and_apart(
    record: RunRecord, earlier: Iterable[RunRecord]
) -> tuple[list[RunRecord], str]:
    """history_of and load_apart from one pass over ``earlier`` (a config's thousands of
    runs: comparable_key of each is the costly part)."""
    runs = comparable_before(record, earlier)
    loaded = busy(record)
    same = [r for r in runs if busy(r) == loaded]
    apart = len(runs) - len(same)
    host = "quiet" if loaded else "loaded"
    note = f"{apart} comparable run(s) on a {host} host left out" if apart else ""
    return same[-HISTORY_RUNS:], note


def comparable_before(record: RunRecord, earlier: Iterable[RunRecord]) -> list[RunRecord]:
    """Every passed run before ``record`` with its comparable_key, oldest first, whatever
    its host's load (history_of keeps loaded and quiet hosts apart)."""
    key = comparable_key(record)
    runs = [
        r
        for r in earlier
        if r.status == "passed"
        and not r.smoke  # a smoke run's numbers are not a full run's
        and r.run_id != record.run_id
        and (r.started, r.run_id) < (record.started, record.run_id)
        and comparable_key(r) == key
    ]
    runs.sort(key=lambda r: (r.started, r.run_id))
    return runs


def history_checks(record: RunRecord, history: list[RunRecord]) -> tuple[list[Check], list[str]]:
    checks: list[Check] = []
    notes: list[str] = []
    if len(history) < MIN_HISTORY:
        notes.append(
            f"history: {len(history)} comparable passed run(s), {MIN_HISTORY} needed: not judged"
        )
        return checks, notes
    metrics = record.registry()
    for name, value in record.metrics.items():
        metric = metrics.get(name)
        if value is None or metric is None:
            continue
        values = [v for r in history if (v := r.metrics.get(name)) is not None]
        band = history_band(values, metric)
        if band is None:
            continue
        low, high, median, half = band
        basis = (
            f"history: median {metric.show(median)} of {len(values)} earlier passed run(s)"
            f" ± {half / abs(median) * 100 if median else 0:.0f} %"
        )
        checks.append(
            Check(
                metric=name,
                value=value,
                low=low,
                high=high,
                source="history",
                basis=basis,
                flagged=flags(value, values, metric),
            )
        )
    return checks, notes


# -- references -----------------------------------------------------------------------


def why_not_judged(ref: Reference, spec: RunSpec, record: RunRecord) -> str | None:
    """Why ``ref`` does not judge this run (another accelerator, other hyperparameters),
    or None when it does."""
    device = ref.device or spec.config.chip
    accelerator = str(record.environment.get("accelerator") or "")
    if not accelerator:
        return f"the run reported no accelerator (the reference is for {device})"
    if device.lower() not in accelerator.lower():
        return f"ran on {accelerator}, the reference is for {device}"
    expected = {**spec.case.defaults, **spec.config.overrides, **ref.hp}
    if record.hp != expected:
        differ = sorted(k for k in {*expected, *record.hp} if expected.get(k) != record.hp.get(k))
        return f"hyperparameters differ from the reference's ({', '.join(differ)})"
    return None


def reference_checks(
    record: RunRecord, spec: RunSpec, refs: Iterable[Reference]
) -> tuple[list[Check], list[str]]:
    checks: list[Check] = []
    notes: list[str] = []
    metrics = record.registry()
    for ref in refs:
        metric = metrics[ref.metric]
        value = record.metrics.get(ref.metric)
        reason = why_not_judged(ref, spec, record)
        label = f"reference {ref.metric} {metric.show(ref.value)} {ref.unit}".rstrip()
        if reason is not None:
            notes.append(f"{label}: shown, not judged: {reason}")
            continue
        if value is None:
            notes.append(f"{label}: the run has no {ref.metric}")
            continue
        low, high = ref.bounds(metric)
        checks.append(
            Check(
                metric=ref.metric,
                value=value,
                low=low,
                high=high,
                source="reference",
                basis=f"{label} ({ref.source})",
                flagged=outside(value, low, high),
            )
        )
    return checks, notes


def verdict_for(record: RunRecord, spec: RunSpec, earlier: Iterable[RunRecord]) -> Verdict:
    """``record`` against its config's references and its history among ``earlier``."""
    earlier = list(earlier)
    ref_checks, ref_notes = reference_checks(record, spec, spec.config.references)
    hist_checks, hist_notes = history_checks(record, history_of(record, earlier))
    apart = load_apart(record, earlier)
    if apart:
        hist_notes.append(f"history: {apart}")
    return Verdict(checks=ref_checks + hist_checks, notes=ref_notes + hist_notes)


def judge(record: RunRecord, spec: RunSpec, store: ResultStore) -> RunRecord:
    """The record with its verdict against the store's runs of its case; a run that did
    not pass, or a smoke run (a short budget), is not judged (verdict None)."""
    if record.status != "passed" or record.smoke:
        return record
    verdict = verdict_for(record, spec, store.list(case=record.case))
    return record.model_copy(update={"verdict": verdict})
