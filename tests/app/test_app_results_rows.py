"""The Results screen lists runs from the store's rows (ResultStore.rows, issue 45): it reads
a whole RunRecord only for the runs its lower pane shows, compares or exports, and what it
shows of them is what the records say."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import make_app, plain, run, wait_for
from seed_records import distilbert
from textual.widgets import DataTable, Static

from tui.app.screens import results as results_screen
from tui.app.screens.results import ResultsScreen
from tui.app.widgets.resultcells import compare_table
from tui.app.widgets.runtable import SeedsTable
from tui.results import store as store_module
from tui.results.record import RunRecord
from tui.results.store import ResultStore

RUNS = 150  # more than a page (results.PAGE): the newest page, then the whole store


def _store(results_dir: Path) -> list[RunRecord]:
    """RUNS runs of one config a day apart, every seventh on a loaded host."""
    records = []
    for i in range(RUNS):
        numbers = (300 + i % 9, 1700.0 + i % 13, 1800.0, 1900.0, 0.91, 13.9)
        records.append(
            distilbert(
                f"run-{i:03d}",
                "A100x1x8",
                {},
                numbers,
                started=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T10:00:00Z",
                load_per_cpu=0.9 if i % 7 == 0 else 0.1,
            )
        )
    with ResultStore(results_dir / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)
    return records


@pytest.mark.slow
def test_the_list_reads_no_record_and_compare_is_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _store(tmp_path / "results")
    made: list[str] = []
    record = store_module._record

    def counted(row: object, values: dict[str, float]) -> RunRecord:
        made.append(row["run_id"])  # type: ignore[index]
        return record(row, values)

    monkeypatch.setattr(store_module, "_record", counted)
    reads: list[int | None] = []  # each ResultStore.rows call's limit
    rows = ResultStore.rows

    def counted_rows(self: ResultStore, limit: int | None = None) -> list[object]:
        reads.append(limit)
        return rows(self, limit)  # type: ignore[return-value]

    monkeypatch.setattr(ResultStore, "rows", counted_rows)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()  # the Cases screen's reads
            made.clear()
            await pilot.press("4")
            screen = app.screen
            assert isinstance(screen, ResultsScreen)
            await wait_for(pilot, lambda: len(screen.records) == RUNS and not screen.reading)
            await app.workers.wait_for_complete()
            # One page, then the whole store: Textual resumes the screen twice as it first
            # shows it, and each began a read.
            assert reads == [results_screen.PAGE, None]
            table = screen.query_one("#history", DataTable)
            assert table.row_count == results_screen.FILL_ROWS
            # The seeds' pane: the newest TABLE_RUNS runs' records, each read once.
            newest = [r.run_id for r in records[-results_screen.TABLE_RUNS :]]
            assert sorted(made) == newest, made
            table.focus()
            await pilot.press("space", "down", "space", "d")  # the two newest
            view = screen.query_one("#compare-view", Static)
            await wait_for(pilot, lambda: screen.mode == "compare" and bool(view.content))
            assert sorted(made) == newest  # compare read no other record
            before, after = records[-2], records[-1]
            expected = Static(compare_table(before, after, records))
            assert plain(view, width=160) == plain(expected, width=160)
            assert "earlier spread: 10 comparable passed run(s)" in plain(view, width=160)
            assert "on a quiet host left out" not in plain(view, width=160)
            assert "on a loaded host left out" in plain(view, width=160)

    run(scenario())


def test_the_list_is_drawn_before_the_lower_pane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read's runs are listed first and the seeds' pane built after that frame (its
    tables and verdicts cost a first showing more drawing than the list itself)."""
    _store(tmp_path / "results")
    seen: list[tuple[int, bool]] = []  # after each read is shown: rows listed, pane built
    show = ResultsScreen._show

    def observed(self: ResultsScreen, records: list[object], note: str) -> None:
        show(self, records, note)  # type: ignore[arg-type]
        table = self.query_one("#history", DataTable)
        seen.append((table.row_count, bool(self.query(SeedsTable))))

    monkeypatch.setattr(ResultsScreen, "_show", observed)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()  # the Cases screen's reads
            await pilot.press("4")
            screen = app.screen
            assert isinstance(screen, ResultsScreen)
            await wait_for(pilot, lambda: len(seen) == 2 and bool(screen.query(SeedsTable)))
            # The page listed with no pane yet; then the whole store, the pane built.
            assert seen == [(results_screen.FILL_ROWS, False), (results_screen.FILL_ROWS, True)]

    run(scenario())
