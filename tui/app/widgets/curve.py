"""The Results screen's serving curve (issue 43): a run's sweep points as a table, system
tokens/s against tokens/s per user with p90 TTFT (tui/results/curve.py defines them)."""

from __future__ import annotations

from rich.table import Table

from tui.app.safe import literal
from tui.results.curve import DEFINITION, HEADER, cells, curve
from tui.results.record import RunRecord


def curve_table(run: RunRecord) -> Table | None:
    """The table of a run with points; None for a run without."""
    if not run.points:
        return None
    points, skipped = curve(run)
    note = DEFINITION + (f"; {skipped} malformed point(s) left out" if skipped else "")
    table = Table(
        title=literal(f"Serving curve of run {run.run_id}", style="table.title"),
        title_justify="left",
        caption=literal(note),
        caption_justify="left",
    )
    for i, name in enumerate(HEADER):
        table.add_column(name, justify="left" if i == 0 else "right")
    for point in points:
        table.add_row(*(literal(c) for c in cells(point)))
    return table
