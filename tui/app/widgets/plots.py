"""Results charts in the terminal (textual-plotext): a run's loss and throughput per step,
and its config's history of one metric with the band each run was held to.

The data comes from what the HTML report draws (tui/results/report.py): the loss curve
from the run's ``events.jsonl``, the comparable series, the rolling bands and the verdicts'
flags; nothing here computes a band. The readers run in a worker; the widgets only draw.
Every label that comes from a record is shown through ``printable``: plotext's output is
read back as ANSI, so a control sequence in a label would reach the terminal otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.metrics import Metric
from rich.text import Text
from textual_plotext import PlotextPlot

from tui.core.term import printable
from tui.results.record import RunRecord
from tui.results.references import comparable_key
from tui.results.report import (
    MAX_POINTS,
    fmt_band,
    headline,
    rolling_bands,
    series,
    step_curve,
)
from tui.results.tables import short_id

Band = tuple[float | None, float | None, float, float] | None
# (plotext's colour, Rich's for the same in the legend)
LOSS, RATE, LINE, BAND, FLAGGED = (
    ("green", "green"),
    ("blue", "blue"),
    ("cyan", "cyan"),
    ("gray", "grey50"),
    ("red", "red"),
)


@dataclass(frozen=True)
class RunCurves:
    """(step, value) of a run's step records: its loss and its samples/s."""

    run_id: str
    loss: list[tuple[int, float]]
    throughput: list[tuple[int, float]]


@dataclass(frozen=True)
class History:
    """One metric over the passed runs comparable with a run (tui/results/references.py's
    key), oldest first: the band each was held to and whether its verdict flagged it."""

    metric: Metric
    runs: list[RunRecord]
    bands: list[Band]
    flagged: list[bool]
    current: int | None  # the run the history was asked for, when it is in the series


def run_curves(results_dir: Path, run_id: str) -> RunCurves:
    """The loss as the report reads it, and the throughput of the same step records (the
    first record of each step: every node's rank 0 reports the whole job's samples/s)."""
    return RunCurves(
        run_id,
        step_curve(results_dir, run_id, "loss"),
        step_curve(results_dir, run_id, "throughput"),
    )


def config_history(run: RunRecord, records: Sequence[RunRecord]) -> History | None:
    """The history of ``run``'s config: its headline throughput (the report's choice), else
    its first metric with a direction; None when no passed comparable run has one."""
    key = comparable_key(run)
    # The config first: a cheap test that leaves comparable_key a few runs to look at.
    same = [r for r in records if r.config == run.config and comparable_key(r) == key]
    runs = series(same).get(key, [])
    have = {k for r in runs for k, v in r.metrics.items() if v is not None}
    registry = run.registry()
    name = headline(have) or next(
        (m.name for m in registry.values() if m.higher_is_better is not None and m.name in have),
        None,
    )
    if name is None or name not in registry:
        return None
    metric = registry[name]
    runs = [r for r in runs if r.metrics.get(name) is not None]
    bands = rolling_bands(metric, runs)[-MAX_POINTS:]
    runs = runs[-MAX_POINTS:]
    flagged = [
        r.verdict is not None and any(c.metric == name for c in r.verdict.flagged) for r in runs
    ]
    ids = [r.run_id for r in runs]
    current = ids.index(run.run_id) if run.run_id in ids else None
    return History(metric, runs, bands, flagged, current)


class RunPlot(PlotextPlot):
    """Loss (left axis) and samples/s (right axis) against the step."""

    curves: RunCurves | None = None  # what is drawn

    def show(self, curves: RunCurves | None) -> None:
        self.curves = curves
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if curves is not None:
            if curves.loss:
                plt.plot(*zip(*curves.loss, strict=True), color=LOSS[0], marker="braille")
            if curves.throughput:
                steps, rates = zip(*curves.throughput, strict=True)
                plt.plot(steps, rates, color=RATE[0], marker="braille", yside="right")
        plt.xlabel("step")
        self.refresh()


class HistoryPlot(PlotextPlot):
    """A metric over its comparable runs: the band's edges, the values, flagged points red
    and the run asked for marked."""

    history: History | None = None  # what is drawn

    def show(self, history: History | None) -> None:
        self.history = history
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if history is not None:
            xs = list(range(1, len(history.runs) + 1))
            values = [float(r.metrics[history.metric.name] or 0.0) for r in history.runs]
            banded = [(x, b) for x, b in zip(xs, history.bands, strict=True) if b is not None]
            if banded:
                bx = [x for x, _ in banded]
                plt.plot(bx, [b[2] - b[3] for _, b in banded], color=BAND[0], marker="braille")
                plt.plot(bx, [b[2] + b[3] for _, b in banded], color=BAND[0], marker="braille")
            plt.plot(xs, values, color=LINE[0], marker="braille")
            bad = [(x, v) for x, v, f in zip(xs, values, history.flagged, strict=True) if f]
            if bad:
                plt.scatter(*zip(*bad, strict=True), color=FLAGGED[0], marker="x")
            if (i := history.current) is not None:  # red when flagged too
                color = FLAGGED[0] if history.flagged[i] else "default"
                plt.scatter([xs[i]], [values[i]], marker="●", color=color)
            ends = [1, len(xs)] if len(xs) > 1 else [1]
            # Month, day and time (UTC) of the first and last run: a day of runs reads apart.
            plt.xticks(ends, [_when(history.runs[x - 1].started) for x in ends])
        self.refresh()


def _when(started: str) -> str:
    return started[5:16].replace("T", " ")


def run_legend(curves: RunCurves | None) -> Text:
    """What the run plot shows, its colours named (plotext's own legend would cover the
    lines at this size): the run, then the key."""
    if curves is None:
        return Text("no run")
    text = Text(
        printable(f"run {short_id(curves.run_id)} per step\n"), no_wrap=True, overflow="ellipsis"
    )
    if not curves.loss and not curves.throughput:
        text.append(printable(f"no step records in runs/{curves.run_id}/events.jsonl"))
        return text
    text.append("━ loss", style=LOSS[1])
    text.append("  ")
    text.append("━ samples/s (right axis)", style=RATE[1])
    return text


def history_legend(history: History | None, run: RunRecord | None) -> Text:
    """The metric, how many runs of which config, the key, and the highlighted run's value
    against the band it was held to."""
    if run is None:
        return Text("no run")
    if history is None:
        what = f"{run.vendor}/{run.config}"
        return Text(printable(f"no passed comparable run of {what} has a metric to chart"))
    m, last = history.metric, history.runs[-1]
    unit = f" ({m.unit})" if m.unit else ""
    text = Text(
        printable(f"{m.name}{unit}: {len(history.runs)} {last.vendor}/{last.config} runs\n"),
        no_wrap=True,
        overflow="ellipsis",
    )
    text.append("━ runs ", style=LINE[1])
    text.append("━ band ", style=BAND[1])
    text.append("x flagged", style=FLAGGED[1])
    if history.current is not None:
        band = history.bands[history.current]
        value = history.runs[history.current].metrics[m.name]
        text.append(printable(f" ● {m.show(value)}"))
        if band is not None:
            text.append(printable(f", band {fmt_band(m, band[0], band[1])}"))
    return text
