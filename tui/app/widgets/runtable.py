"""The seeds' table as table widgets: one DataTable per case, scrolled sideways, never
wrapped (tui/results/tables.py's cells, the same as ``fleetperf results`` prints)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Label

from tui.app.safe import literal
from tui.results.record import RunRecord
from tui.results.tables import case_table


class SeedsTable(DataTable[object]):
    """One case's seed-style table; a row cursor, so left and right scroll it."""

    def __init__(self, header: list[str], rows: list[list[str]]) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, classes="seeds-table")
        for name in header:
            self.add_column(literal(name))
        self.set_rows(rows)

    def set_rows(self, rows: list[list[str]]) -> None:
        self.clear()
        self.add_rows([[literal(c) for c in row] for row in rows])


class SeedsView(VerticalScroll):
    """Per case: its name, the table (the run and date first), the units legend."""

    can_focus = False  # tab from the run list goes to the first table, which scrolls sideways

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shape: list[tuple[str, list[str], str]] = []  # each case: name, header, legend
        self._extra: list[Widget] = []

    def show(self, runs: Sequence[RunRecord], extra: Sequence[Widget] = ()) -> None:
        by_case: dict[str, list[RunRecord]] = {}
        for run in runs:
            by_case.setdefault(run.case, []).append(run)
        tables = [(case, *case_table(case_runs, ids=True)) for case, case_runs in by_case.items()]
        shape = [(case, header, legend) for case, header, _, legend in tables]
        if shape == self._shape:  # the same cases and columns: new rows in the tables mounted
            for table, (_, _, rows, _) in zip(self.query_children(SeedsTable), tables, strict=True):
                table.set_rows(rows)
            for widget in self._extra:
                widget.remove()
            self._extra = list(extra)
            self.mount_all(self._extra)
            return
        widgets: list[Widget] = []
        for case, header, rows, legend in tables:
            widgets += [Label(literal(case, style="bold"), classes="seeds-case")]
            widgets += [SeedsTable(header, rows)]
            if legend:
                widgets += [Label(literal(legend), classes="seeds-legend")]
        self._shape, self._extra = shape, list(extra)
        self.remove_children()
        self.mount_all([*widgets, *extra])
