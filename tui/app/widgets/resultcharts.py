"""The Results screen's charts pane: the highlighted run's loss and samples/s per step
beside its config's history (tui/app/widgets/plots.py draws them)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tui.app.widgets.plots import (
    History,
    HistoryPlot,
    RunCurves,
    RunPlot,
    history_legend,
    run_legend,
)
from tui.results.record import RunRecord


class Charts(Horizontal):
    """The highlighted run's loss and samples/s per step beside its config's history."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="plot"):
            yield Label(id="run-legend", classes="plot-legend")
            yield RunPlot(id="run-plot")
        with Vertical(id="history-plot-side", classes="plot"):
            yield Label(id="history-legend", classes="plot-legend")
            yield HistoryPlot(id="history-plot")

    def show(
        self, run: RunRecord | None, curves: RunCurves | None, history: History | None
    ) -> None:
        self.query_one("#run-legend", Label).update(run_legend(curves))
        self.query_one(RunPlot).show(curves)
        self.query_one("#history-legend", Label).update(history_legend(history, run))
        self.query_one(HistoryPlot).show(history)
