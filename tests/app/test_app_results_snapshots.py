"""The Results screen as a person reads it, at 100x30 and 80x24 (pytest-textual-snapshot):
the seeds' table as a table widget, and the charts of a run and its config's history.

Update after a deliberate change with ``pytest tests/app/test_app_results_snapshots.py
--snapshot-update`` and look at the SVGs under tests/app/__snapshots__/ before committing."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import fixed_inventory, make_app, wait_for
from test_app_results import charted_history
from textual.pilot import Pilot
from textual.widgets import DataTable

from tui.app.widgets.plots import HistoryPlot, RunPlot
from tui.app.widgets.runtable import SeedsTable

SIZES = [(100, 30), pytest.param((80, 24), marks=pytest.mark.slow)]


async def _results(pilot: Pilot) -> DataTable:
    await pilot.press("4")
    table = pilot.app.screen.query_one("#history", DataTable)
    await wait_for(pilot, lambda: table.row_count == 6)
    await wait_for(pilot, lambda: bool(pilot.app.screen.query(SeedsTable)))
    await pilot.app.workers.wait_for_complete()  # the store read: no refill to come
    # The filters' new options refill the list once more (a CI run under load drew it
    # mid-refill, columns as wide as their labels): settled when the rows are back.
    await pilot.pause(0.3)
    await wait_for(pilot, lambda: table.row_count == 6)
    table.focus()
    return table


@pytest.mark.parametrize("size", SIZES, ids=["100x30", "80x24"])
def test_results_seeds_table(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    """Every run's row in one table per case, cut at the pane's edge (scrolled, not wrapped)."""
    charted_history(tmp_path / "results")
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await _results(pilot)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", SIZES, ids=["100x30", "80x24"])
def test_results_charts(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    """The newest run's loss and samples/s per step; its config's p_core history, the run
    flagged in red."""
    charted_history(tmp_path / "results")
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await _results(pilot)
        await pilot.press("c")
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.query_one(RunPlot).curves is not None)
        await wait_for(pilot, lambda: screen.query_one(HistoryPlot).history is not None)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=before)
