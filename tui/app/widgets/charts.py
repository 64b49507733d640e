"""Small dashboard widgets: a labelled sparkline and a run's progress line."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar, Sparkline

from tui.app.feed import RunView
from tui.app.safe import literal


class Chart(Horizontal):
    """One series of the selected run: its name and last value, then the sparkline."""

    def __init__(self, series: str, label: str, id: str | None = None) -> None:
        super().__init__(id=id, classes="chart")
        self.series, self.label = series, label
        # Kept, not queried: the dashboard may draw before these are mounted.
        self._value = Label(f"{label}\n-", classes="chart-label")
        self._spark = Sparkline([], summary_function=max)

    def compose(self) -> ComposeResult:
        yield self._value
        yield self._spark

    @property
    def plot_width(self) -> int:
        return self._spark.size.width

    def show(self, points: list[float]) -> None:
        last = f"{points[-1]:.4g}" if points else "-"
        # Fixed-size widgets: no layout pass, which would cost more than the drawing.
        self._value.update(f"{self.label}\n{last}", layout=False)
        self._spark.data = points


class RunProgress(Horizontal):
    """A run in the run list: what it is, its state, and a bar against its budget."""

    def __init__(self, run_id: str) -> None:
        super().__init__(classes="run-progress")
        self.run_id = run_id
        self._view: RunView | None = None

    def compose(self) -> ComposeResult:
        yield Label(literal(self.run_id), classes="run-name")
        yield ProgressBar(total=None, show_eta=False, classes="run-bar")

    def on_mount(self) -> None:
        if self._view is not None:
            self._draw(self._view)

    def show(self, view: RunView) -> None:
        self._view = view
        if self.is_mounted:  # else on_mount draws it
            self._draw(view)

    def _draw(self, view: RunView) -> None:
        # The status first, and cut rather than wrapped: a narrow list keeps what matters.
        text = literal(
            f"[{view.status}] {view.case} {view.config}", no_wrap=True, overflow="ellipsis"
        )
        self.query_one(Label).update(text, layout=False)
        total, done = view.progress()
        bar = self.query_one(ProgressBar)
        if total is None and view.active:
            bar.update(total=None)
        else:
            # A finished run without a budget: full when it passed, where it stopped otherwise.
            total = total or 1.0
            done = total if view.status == "passed" else done
            bar.update(total=total, progress=done)
