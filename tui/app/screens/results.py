"""Results: history from the store, the seeds' table, two runs compared, charts, export."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from rich.console import Group
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher, DataTable, Header, Input, Label, Select, Static

from tui.app.safe import literal
from tui.app.screens.export import export_runs
from tui.app.threads import draw_from_thread
from tui.app.widgets.curve import curve_table
from tui.app.widgets.footer import Footer
from tui.app.widgets.resultcells import (
    compare_table,
    mark_cell,
    metric_cell,
    status_cell,
    verdict_table,
)
from tui.app.widgets.resultcharts import Charts
from tui.app.widgets.runfilters import RunFilters
from tui.app.widgets.runtable import SeedsView
from tui.core.errors import StoreError, UserInputError
from tui.results.record import RunRecord
from tui.results.rows import RunRow
from tui.results.tables import config_env_text, peak_text, short_id

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

# The status beside the run: at 80 columns the table scrolls sideways and the last
# columns are the ones cut (issue 41 point 7: "pa" for passed).
HISTORY_COLUMNS = ("", "run", "status", "started", "case", "config", "p_whole", "acc", "loss")
TABLE_RUNS = 20  # none marked: the seeds' table of the newest this many shown runs
PAGE = 100  # read first, drawn at once; the whole store follows (10,000 runs: seconds)
REST_AFTER_S = 0.5  # the whole store is read this long after the newest runs are shown
LIST_ROWS = 500  # the run list: the newest this many shown runs, and every marked one
# ... added to the table this many at a time, the next ones as the cursor comes within
# FILL_MARGIN rows of its end: a filter's refill of all 500 rows cost about 100 ms.
FILL_ROWS, FILL_MARGIN = 100, 20
PANES = {"table": "seeds", "compare": "compare", "charts": "charts"}


class ResultsScreen(Screen[None]):
    """Every run in the results store, newest first, filtered by case, vendor and config;
    the run id field takes an id as fleetperf results does (whole, a unique prefix, or the
    short form of the run column) and marks that run. Space marks runs. The lower pane shows
    the seeds' table of the marked runs as tables scrolled sideways (the newest 20 shown runs
    if none is marked); Charts plot the highlighted run's loss and samples/s per step and
    its config's history of its headline metric with the band and flagged runs; with two marked,
    Compare shows them side by side with the change of each metric, flagged (!) when the
    newer value lies outside the spread (min..max) of the earlier passed runs it is
    comparable with (case, config, hyperparameters, accelerator, data; loaded and quiet
    hosts apart); what else separates the two runs is named above the table. Export writes
    markdown, CSV or JSON."""

    TITLE = "Results"
    AUTO_FOCUS = "#history"  # marks and views work from the list; the filters are a tab away
    BINDINGS = [
        Binding("space", "toggle", "Mark", id="results.mark"),
        # Short words: at 80 columns the footer must still show help and the screen keys.
        Binding(
            "t",
            "table",
            "Table",
            tooltip="The seeds' table of the marked runs (t)",
            id="results.table",
        ),
        Binding(
            "d",
            "compare",
            "Compare",
            tooltip="Two marked runs side by side (d)",
            id="results.compare",
        ),
        Binding(
            "c",
            "charts",
            "Charts",
            tooltip="The highlighted run's curves and its config's history (c)",
            id="results.charts",
        ),
        Binding("e", "export", "Export", id="results.export"),
        Binding(
            "r",
            "reload",
            "Reload",
            show=False,
            tooltip="Read the store again (r)",
            id="results.reload",
        ),
        # Shown only while the run id field has the focus: there letter keys type.
        Binding("escape", "leave_field", "Leave field", id="results.leave"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        # The list's rows (ResultStore.rows); whole records only where needed (_whole).
        self.records: list[RunRow] = []
        self._by_id: dict[str, RunRow] = {}  # the rows by run id, kept by _show
        self._by_config: dict[tuple[str, str, str], list[RunRow]] = {}  # and by config
        self._whole_records: dict[str, RunRecord] = {}  # read since the last _show
        self.shown: list[RunRow] = []  # the rows the filters let through, kept by _fill
        self._listed: list[RunRow] = []  # the run list's rows, newest first (_fill)
        self.marked: list[str] = []
        self.mode = "table"
        self.reading = False  # the whole store is being read after its newest runs
        self._was_shown = self._resuming = False
        self._seeds_key: object = None  # what the seeds' pane shows (redrawn when it changes)

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield RunFilters(id="filters")
            yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
            with ContentSwitcher(id="result-pane", initial="seeds"):
                yield SeedsView(id="seeds")
                with VerticalScroll(id="compare"):
                    yield Static(id="compare-view")
                # The charts pane (Charts) is mounted on first use, not with the screen:
                # most openings never show it.
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#history", DataTable)
        for name in HISTORY_COLUMNS:
            table.add_column(name, key=name or "mark")

    def on_screen_resume(self) -> None:
        # Textual resumes a mode's screen twice as it first shows it: one read.
        if not self._resuming:
            self._resuming = True
            self.call_later(self._resumed)

    def _resumed(self) -> None:
        # Shown again: the newest runs are read again (new and finished runs); the whole
        # store only the first time and on r.
        first, self._was_shown, self._resuming = not self._was_shown, True, False
        self._load(whole=first)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_field":  # escape: in the footer and live only in the field
            return isinstance(self.focused, Input)
        return True

    def action_leave_field(self) -> None:
        self.query_one("#history", DataTable).focus()

    # -- loading ----------------------------------------------------------------------

    def action_reload(self) -> None:
        self._load(whole=True)

    @work(thread=True, exclusive=True, group="store")
    def _load(self, whole: bool) -> None:
        """The newest PAGE runs, merged into what is shown; then (``whole``) every run, once
        the page is on the screen (_show): a big store's list is drawn before the rest of
        it is read, not slowed by that read."""
        session = self.app.session
        if not session.has_store():  # reading never makes one
            note = f"No results store at {session.store_at} yet."  # a file: no password
            draw_from_thread(self, self._show, [], note)
            return
        try:
            newest = session.store.rows(limit=PAGE)
            by_id = {r.run_id: r for r in self.records} | {r.run_id: r for r in newest}
            page = sorted(by_id.values(), key=lambda r: (r.started, r.run_id))
            more = whole and len(newest) == PAGE
            draw_from_thread(self, self._show, page, "more" if more else "")
        except StoreError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)

    @work(thread=True, exclusive=True, group="store")
    def _load_rest(self) -> None:
        try:
            records = self.app.session.store.rows()
        except StoreError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
            return
        # 10,000 rows are a million objects: out of the collector's full passes, each of
        # which walks them all (a stall on the event loop now and then), as the app keeps
        # what its screens built (FleetperfApp._freeze_long_lived).
        gc.freeze()
        draw_from_thread(self, self._show, records, "")

    def _show(self, records: list[RunRow], note: str) -> None:
        """``note``: no store yet, or "more" while the rest of the store is being read."""
        self.reading = note == "more"
        self.records = records
        before, self._by_id = self._by_id, {r.run_id: r for r in records}
        kept = self._whole_records.items()  # a run whose row changed (finished) read again
        self._whole_records = {k: r for k, r in kept if before.get(k) == self._by_id.get(k)}
        self._by_config = {}
        for r in records:
            self._by_config.setdefault(_config(r), []).append(r)
        self._fill()
        if note and not self.reading:  # no store: the note instead of the lower pane
            self._seeds_key = None
            self.query_one(SeedsView).show([], [Label(literal(note))])
        else:
            # The lower pane after the list's frame: its tables and the flagged runs'
            # verdicts cost a first showing 0.1-0.3 s of drawing, which the list would wait
            # for.
            self.call_after_refresh(self._render_pane)
        if self.reading:
            # After the page's tables are mounted and drawn: the read holds the interpreter
            # for seconds, and begun at once it would halve the speed of that drawing.
            self.set_timer(REST_AFTER_S, self._load_rest)
        # After the pane: its drawing would wait for the filters' first mount.
        self.query_one(RunFilters).offer(records)

    @on(Select.Changed)
    def _filtered(self) -> None:
        self._fill()
        self._render_pane()

    def _fill(self) -> None:
        table = self.query_one("#history", DataTable)
        current = self._cursor_run()  # the cursor stays on its run when the list changes
        table.clear()
        self.shown = shown = self.query_one(RunFilters).keep(self.records)
        listed = shown[-LIST_ROWS:]
        listed += [r for r in shown[:-LIST_ROWS] if r.run_id in self.marked]
        self._listed = sorted(listed, key=lambda r: (r.started, r.run_id), reverse=True)
        self._list_to(FILL_ROWS, current)
        if current in table.rows:
            table.move_cursor(row=table.get_row_index(current))
        self._subtitle(len(shown))

    def _list_to(self, rows: int, run_id: str | None = None) -> None:
        """The listed runs into the table up to ``rows`` rows, and up to ``run_id``'s row."""
        if run_id is not None:
            where = (i for i, r in enumerate(self._listed) if r.run_id == run_id)
            rows = max(rows, next(where, -1) + 1)
        table = self.query_one("#history", DataTable)
        for r in self._listed[table.row_count : rows]:
            table.add_row(
                mark_cell(r.run_id in self.marked),
                literal(short_id(r.run_id)),
                status_cell(r),
                literal(r.started.replace("T", " ").rstrip("Z")),
                literal(r.case),
                literal(f"{r.vendor}/{r.config}"),
                metric_cell(r, "p_whole", ".1f"),
                metric_cell(r, "acc", ".3f"),
                metric_cell(r, "loss", ".4f"),
                key=r.run_id,
            )

    def _subtitle(self, shown: int) -> None:
        listed = f" (newest {LIST_ROWS} listed)" if shown > LIST_ROWS else ""
        total = f"{len(self.records)}+ (reading)" if self.reading else str(len(self.records))
        self.sub_title = f"{shown} of {total} runs{listed}, {len(self.marked)} marked"

    # -- a run by its id ----------------------------------------------------------------

    @on(Input.Submitted, "#run-search")
    def _search(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._resolve(event.value.strip())

    @work(thread=True, exclusive=True, group="store")
    def _resolve(self, text: str) -> None:
        """The store's resolver, as ``fleetperf results RUN_ID`` uses it."""
        try:
            run_id = self.app.session.find_run(text).run_id
        except UserInputError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
            return
        draw_from_thread(self, self._go_to, run_id)

    def _go_to(self, run_id: str) -> None:
        """Show the run (clearing filters that hide it), put the cursor on it and mark it."""
        if run_id not in self._by_id:  # stored since the last reload
            self.notify(f"run {run_id}: press r to read the store again", severity="warning")
            return
        if run_id not in {r.run_id for r in self.shown}:
            self.query_one(RunFilters).clear()
        if run_id not in self.marked:
            self.marked.append(run_id)
        self._fill()
        self._render_pane()
        self._list_to(0, run_id)
        table = self.query_one("#history", DataTable)
        table.move_cursor(row=table.get_row_index(run_id))  # kept by the refills to come
        table.focus()

    # -- selection and views ----------------------------------------------------------

    def _cursor_run(self) -> str | None:
        table = self.query_one("#history", DataTable)
        if table.row_count == 0:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_toggle(self) -> None:
        run_id = self._cursor_run()
        if run_id is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked.append(run_id)
        table = self.query_one("#history", DataTable)
        table.update_cell(run_id, "mark", mark_cell(run_id in self.marked))
        self._subtitle(len(self.shown))
        self._render_pane()

    def _selection(self) -> list[RunRow]:
        marked = [self._by_id[m] for m in self.marked if m in self._by_id]
        return sorted(marked, key=lambda r: r.started) if marked else self.shown

    def _whole(self, rows: list[RunRow]) -> list[RunRecord]:
        """The runs' records in the rows' order, read where not read yet (a few, on the event
        loop); a run gone or unreadable since its row was read is left out."""
        missing = [r.run_id for r in rows if r.run_id not in self._whole_records]
        if missing:
            try:
                read = self.app.session.store.records(missing)
            except StoreError as exc:
                self.notify(str(exc), severity="error", timeout=10)
                read = []
            self._whole_records.update((r.run_id, r) for r in read)
        return [self._whole_records[r.run_id] for r in rows if r.run_id in self._whole_records]

    def action_table(self) -> None:
        self._switch("table")

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("Mark exactly two runs (space) to compare them.", severity="warning")
            return
        self._switch("compare")

    async def action_charts(self) -> None:
        if not self.query("#charts"):
            await self.query_one(ContentSwitcher).add_content(Charts(id="charts"))
        self._switch("charts")

    def _switch(self, mode: str) -> None:
        self.mode = mode
        self.query_one(ContentSwitcher).current = PANES[mode]
        self.set_class(mode == "charts", "-charts")  # the run list gives the charts room
        self._render_pane()

    def _render_pane(self) -> None:
        if self.mode == "charts":
            self._load_charts(self._cursor_run())
            return
        pair = self._selection() if self.mode == "compare" and len(self.marked) == 2 else []
        if len(whole := self._whole(pair)) == 2:
            before, after = whole
            # Its spread comes from the runs with its comparable_key, which each row's
            # read found once: history_and_apart looks at those rows alone.
            key = self._by_id[after.run_id].key
            same = [r for r in self._by_config.get(_config(after), []) if r.key == key]
            table = compare_table(before, after, same)
            view = self.query_one("#compare-view", Static)
            view.update(Group(table, verdict_table(after)) if after.verdict else table)
            return
        self.query_one(ContentSwitcher).current = "seeds"  # compare needs two marked
        runs, notes = self._seeds_table()
        # Drawn again only when it would change: a mount is the costly part of a refill.
        key = ([(r.run_id, r.status, r.finished) for r in runs], self.marked[:], len(self.shown))
        if key != self._seeds_key:
            self._seeds_key = key
            self.query_one(SeedsView).show(runs, notes)

    def _seeds_table(self) -> tuple[list[RunRecord], list[Widget]]:
        """The runs for the seeds' table, and what goes under it: the verdicts that flagged
        a metric, one marked run's peak and config env, or which runs a long list shows."""
        rows = self._selection()
        if not self.marked:
            rows = rows[-TABLE_RUNS:]
        selection = self._whole(rows)
        if not selection:
            return [], [Label("No runs match.")]
        notes: list[Widget] = []
        if not self.marked and len(self.shown) > TABLE_RUNS:
            notes.append(
                Label(
                    f"The newest {TABLE_RUNS} of {len(self.shown)} shown runs: mark runs"
                    " (space) for theirs.",
                    classes="hint",
                )
            )
        flagged = [r for r in selection if r.verdict and r.verdict.flagged]
        notes += [Static(verdict_table(r)) for r in flagged]
        if len(self.marked) == 1 and len(selection) == 1:  # its MFU's peak, its config's env
            (run,) = selection
            notes.append(Static(literal(f"{peak_text(run)}\n\n{config_env_text(run)}")))
            if (curve := curve_table(run)) is not None:  # a serving sweep's points
                notes.append(Static(curve))
        return selection, notes

    # -- charts -----------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#history")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The list grows as the cursor nears its end (FILL_ROWS); the charts follow it.
        if event.cursor_row >= event.data_table.row_count - FILL_MARGIN:
            self._list_to(event.data_table.row_count + FILL_ROWS)
        if self.mode == "charts":
            self._load_charts(self._cursor_run())

    def _load_charts(self, run_id: str | None) -> None:
        row = self._by_id.get(run_id or "")
        rows = self._by_config.get(_config(row), []) if row else []
        series = [r.run_id for r in rows if row and r.key == row.key]  # its config's series
        self.query_one(Charts).load(self.app.session, run_id, series)

    # -- export -----------------------------------------------------------------------

    def action_export(self) -> None:
        rows = self._selection()
        if not rows:
            self.notify("Nothing to export.", severity="warning")
            return
        export_runs(self.app, [r.run_id for r in rows])


def _config(record: RunRecord | RunRow) -> tuple[str, str, str]:
    return record.case, record.vendor, record.config
