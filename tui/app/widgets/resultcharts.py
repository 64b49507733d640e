"""The Results screen's charts pane: the highlighted run's loss and samples/s per step
beside its config's history (tui/app/widgets/plots.py draws them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tui.app.threads import draw_from_thread
from tui.app.widgets.plots import (
    History,
    HistoryPlot,
    RunCurves,
    RunPlot,
    config_history,
    history_legend,
    run_curves,
    run_legend,
)
from tui.core.errors import StoreError
from tui.results.record import RunRecord

if TYPE_CHECKING:
    from tui.engine.session import Session


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

    @work(thread=True, exclusive=True, group="charts")
    def load(self, session: Session, run_id: str | None, series: list[str]) -> None:
        """Read the run's events file and the whole records of its config's series (the
        runs with its comparable_key, ``series``: ids) here; draw on the app's thread."""
        try:
            records = session.store.records(series) if series else []
        except StoreError as exc:
            draw_from_thread(self, self.app.notify, str(exc), severity="error", timeout=10)
            records = []
        run = next((r for r in records if r.run_id == run_id), None)
        curves = run_curves(session.results_dir, run.run_id) if run else None
        history = config_history(run, records) if run else None
        draw_from_thread(self, self.show, run, curves, history)
