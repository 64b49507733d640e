"""Results: history from the store, the seeds' table, two runs compared, export."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, Select, Static

from tui.app.safe import literal
from tui.core import safefile
from tui.core.errors import StoreError, UserInputError
from tui.results.compare import compare
from tui.results.record import RunRecord
from tui.results.report import fmt_band
from tui.results.tables import FORMATS, config_env_text, peak_text, render, short_id

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

HISTORY_COLUMNS = ("", "run", "started", "case", "config", "status", "p_whole", "acc", "loss")
FILTERS = ("case", "vendor", "config")


class ResultsScreen(Screen[None]):
    """Every run in the results store, newest first, filtered by case, vendor and config;
    the run id field takes an id as fleetperf results does (whole, a unique prefix, or the
    short form of the run column) and marks that run. Space marks runs. The lower pane shows
    the seeds' table of the marked runs (all shown runs if none is marked); with two marked,
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
        Binding("e", "export", "Export", id="results.export"),
        Binding(
            "r",
            "reload",
            "Reload",
            show=False,
            tooltip="Read the store again (r)",
            id="results.reload",
        ),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.records: list[RunRecord] = []
        self.marked: list[str] = []
        self.mode = "table"

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            with Horizontal(id="filters"):
                for name in FILTERS:
                    yield Select([], prompt=f"any {name}", id=f"filter-{name}")
                # A run id as fleetperf results takes it: whole, a prefix, the short form.
                yield Input(placeholder="run id", id="run-search")
            yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="result-pane"):
                yield Static(id="result-view")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#history", DataTable)
        for name in HISTORY_COLUMNS:
            table.add_column(name, key=name or "mark")

    def on_screen_resume(self) -> None:
        self.action_reload()

    # -- loading ----------------------------------------------------------------------

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="store")
    def _load(self) -> None:
        session = self.app.session
        if not session.has_store():  # reading never makes one
            note = f"No results store at {session.store_at} yet."  # a file: no password
            self.app.call_from_thread(self._show, [], note)
            return
        try:
            records = session.runs()
        except StoreError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.app.call_from_thread(self._show, records, "")

    def _show(self, records: list[RunRecord], note: str) -> None:
        self.records = records
        for name in FILTERS:
            select = self.query_one(f"#filter-{name}", Select)
            values = sorted({_field(r, name) for r in records})
            current = select.value
            select.set_options([(literal(v), v) for v in values])
            if current in values:
                select.value = current
        self._fill()
        if note:
            self.query_one("#result-view", Static).update(literal(note))

    def _shown(self) -> list[RunRecord]:
        wanted = {name: self.query_one(f"#filter-{name}", Select).value for name in FILTERS}
        return [
            r
            for r in self.records
            if all(v is Select.NULL or _field(r, k) == v for k, v in wanted.items())
        ]

    @on(Select.Changed)
    def _filtered(self) -> None:
        self._fill()

    def _fill(self) -> None:
        table = self.query_one("#history", DataTable)
        current = self._cursor_run()  # the cursor stays on its run when the list changes
        table.clear()
        shown = self._shown()
        for r in reversed(shown):
            table.add_row(
                _mark(r.run_id in self.marked),
                literal(short_id(r.run_id)),
                literal(r.started.replace("T", " ").rstrip("Z")),
                literal(r.case),
                literal(f"{r.vendor}/{r.config}"),
                _status(r),
                _metric(r, "p_whole", ".1f"),
                _metric(r, "acc", ".3f"),
                _metric(r, "loss", ".4f"),
                key=r.run_id,
            )
        if current in table.rows:
            table.move_cursor(row=table.get_row_index(current))
        self.sub_title = f"{len(shown)} of {len(self.records)} runs, {len(self.marked)} marked"
        self._render_pane()

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
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.app.call_from_thread(self._go_to, run_id)

    def _go_to(self, run_id: str) -> None:
        """Show the run (clearing filters that hide it), put the cursor on it and mark it."""
        if run_id not in {r.run_id for r in self.records}:  # stored since the last reload
            self.notify(f"run {run_id}: press r to read the store again", severity="warning")
            return
        if run_id not in {r.run_id for r in self._shown()}:
            for name in FILTERS:
                self.query_one(f"#filter-{name}", Select).clear()
        if run_id not in self.marked:
            self.marked.append(run_id)
        self._fill()
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
        table.update_cell(run_id, "mark", _mark(run_id in self.marked))
        self.sub_title = (
            f"{len(self._shown())} of {len(self.records)} runs, {len(self.marked)} marked"
        )
        self._render_pane()

    def _selection(self) -> list[RunRecord]:
        by_id = {r.run_id: r for r in self.records}
        marked = [by_id[m] for m in self.marked if m in by_id]
        return sorted(marked, key=lambda r: r.started) if marked else self._shown()

    def action_table(self) -> None:
        self.mode = "table"
        self._render_pane()

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("Mark exactly two runs (space) to compare them.", severity="warning")
            return
        self.mode = "compare"
        self._render_pane()

    def _render_pane(self) -> None:
        view = self.query_one("#result-view", Static)
        selection = self._selection()
        if not selection:
            view.update("No runs match.")
        elif self.mode == "compare" and len(self.marked) == 2:
            before, after = selection
            table = _compare_table(before, after, self.records)
            view.update(Group(table, _verdict_table(after)) if after.verdict else table)
        else:
            flagged = [r for r in selection if r.verdict and r.verdict.flagged]
            tables = [literal(render(selection, "md")), *map(_verdict_table, flagged)]
            if len(self.marked) == 1:  # one run: what its MFU divides, the env its config set
                (run,) = selection
                tables += [literal(f"\n{peak_text(run)}\n\n{config_env_text(run)}")]
            view.update(Group(*tables) if len(tables) > 1 else tables[0])

    # -- export -----------------------------------------------------------------------

    def action_export(self) -> None:
        records = self._selection()
        if not records:
            self.notify("Nothing to export.", severity="warning")
            return
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        base = self.app.config.results_dir / "exports" / f"fleetperf-{stamp}"

        def done(result: tuple[str, Path] | None) -> None:
            if result is None:
                return
            fmt, path = result
            try:
                safefile.make_dirs(path.parent)
                safefile.write_text(path, render(records, fmt) + "\n")
            except OSError as exc:
                self.notify(f"{path}: {exc.strerror}", title="Not exported", severity="error")
                return
            self.notify(f"{len(records)} run(s) written to {path}", title="Exported")

        self.app.push_screen(ExportScreen(base, len(records), self.app.config.read_only), done)


class ExportScreen(ModalScreen[tuple[str, Path] | None]):
    """Pick a format; the path is editable unless the app is read-only (served in a
    browser): then the file goes where ``base`` says, under the results directory."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="export.cancel")]

    def __init__(self, base: Path, count: int, read_only: bool = False) -> None:
        super().__init__()
        self.base, self.count, self.read_only = base, count, read_only

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.count} run(s) to", classes="question")
            yield Input(str(self.base), id="export-path", disabled=self.read_only)
            if self.read_only:
                yield Label(
                    "Fixed in the browser: fleetperf serve --allow-write lets you choose.",
                    classes="hint",
                )
            with Horizontal(classes="buttons"):
                for fmt in FORMATS:
                    yield Button(fmt, id=f"export-{fmt}")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        fmt = str(event.button.id).removeprefix("export-")
        # Read-only: the page's keystrokes never choose where a file is written.
        path = self.base if self.read_only else Path(self.query_one(Input).value).expanduser()
        if path.suffix.lstrip(".") not in FORMATS:
            path = path.with_name(f"{path.name}.{fmt}")
        self.dismiss((fmt, path))


def _status(record: RunRecord) -> Text:
    """The status, and the metrics the run's verdict flagged (docs/references.md)."""
    text = literal(record.status)
    flagged = record.verdict.flagged if record.verdict else []
    if flagged:
        text.append(f" ! {', '.join(c.metric for c in flagged)}", style="bold red")
    return text


def _verdict_table(record: RunRecord) -> Table:
    """Each metric the run was judged on: its value, the band and where the band came from."""
    table = Table(
        title=literal(f"verdict of {record.run_id}", style="table.title"),
        title_justify="left",
        expand=True,
    )
    for name in ("metric", "value", "band", "from", ""):
        table.add_column(name, justify="right" if name in ("value", "band") else "left")
    for metric, value, band, basis, flagged in check_rows(record):
        flag = Text("! outside", style="bold red") if flagged else Text("")
        table.add_row(literal(metric), literal(value), literal(band), literal(basis), flag)
    for note in record.verdict.notes if record.verdict else []:
        table.add_row("", "", "", literal(note), Text(""))
    return table


def _mark(marked: bool) -> Text:
    return Text("[x]" if marked else "[ ]")


def _field(record: RunRecord, name: str) -> str:
    return {"case": record.case, "vendor": record.vendor, "config": record.config}[name]


def _metric(record: RunRecord, key: str, fmt: str) -> str:
    value = record.metrics.get(key)
    return "/" if value is None else format(value, fmt)


def _compare_table(before: RunRecord, after: RunRecord, history: list[RunRecord]) -> Table:
    comparison = compare(before, after, history)
    title = literal(
        f"{after.case}: {before.vendor}/{before.config} {before.run_id}  vs  "
        f"{after.vendor}/{after.config} {after.run_id}",
        style="table.title",  # what Rich gives a str title
    )
    if comparison.differs:  # never compared as like for like without a word
        title.append(
            literal(f"\nnot like for like: {'; '.join(comparison.differs)}", style="bold yellow")
        )
    apart = comparison.load_apart
    table = Table(
        title=title,
        title_justify="left",
        caption=literal(
            f"earlier spread: {comparison.spread_runs} comparable passed run(s) of the newer"
            " run" + (f"; {apart}" if apart else "")
        ),
        caption_justify="left",
        expand=True,
    )
    for name in ("metric", "before", "after", "change", "earlier spread", ""):
        table.add_column(name, justify="left" if name in ("metric", "") else "right")
    for row in comparison.changes:
        m = row.metric
        change = "-" if row.change is None else f"{row.change * 100:+.1f}%"
        style = {True: "green", False: "red", None: ""}[row.better]
        spread = (
            "too few runs"
            if row.spread is None
            else f"{m.show(row.spread[0])}..{m.show(row.spread[1])}"
        )
        flag = Text("! outside", style="bold red") if row.outside else Text("")
        table.add_row(
            literal(f"{m.name} ({m.unit})" if m.unit else m.name),
            literal(m.show(row.before)),
            literal(m.show(row.after)),
            Text(change, style=style),
            literal(spread),
            flag,
        )
    return table


def check_rows(record: RunRecord) -> list[tuple[str, str, str, str, bool]]:
    """The verdict as rows for a screen: metric, value, band, where it came from, flagged."""
    if record.verdict is None:
        return []
    metrics = record.registry()
    rows = []
    for c in record.verdict.checks:
        m = metrics.get(c.metric)
        value = m.show(c.value) if m else f"{c.value:g}"
        band = fmt_band(m, c.low, c.high) if m else "?"
        rows.append((c.metric, value, band, c.basis, c.flagged))
    return rows
