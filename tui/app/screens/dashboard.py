"""Runs: the live dashboard. One row per host, charts, progress per run, a log; runs other
controllers run, followed read-only from their run directories (Session.follow)."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.metrics import METRICS
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, Label, ListItem, ListView, RichLog

from tui.app import elsewhere
from tui.app.feed import HostRow, RunView, run_target
from tui.app.safe import literal
from tui.app.screens.dialogs import ConfirmScreen
from tui.app.widgets.charts import Chart, RunProgress
from tui.app.widgets.footer import Footer
from tui.app.widgets.hosttable import HostTable
from tui.catalog import catalog
from tui.core.errors import CatalogError, UserInputError
from tui.engine.following import FollowedRun
from tui.results.record import RunRecord
from tui.results.report import headline

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

TICK_S = 0.5
ELSEWHERE_S = 2.0  # how often the store is asked for runs other controllers run
QUIET = f"{elsewhere.FRESH_S // 60} min"
# Column widths fit the widest value each column shows; "note" takes the rest.
COLUMNS = {
    "host": 10,
    "state": 11,
    "step": 6,
    "samples/s": 9,
    "tokens/s": 8,
    "mem GiB": 9,
    "loss": 6,
    "ETA": 6,
    "note": None,
}


class DashboardScreen(Screen[None]):
    """Every run launched from this app, newest last, and every run the store has as running
    under another controller (a --batch from cron, a colleague's app), marked with that
    controller's host and pid: followed read-only from its run directory's events to its
    end. The table has one row per host of the highlighted run; the charts show its
    throughput (samples/s), mean loss and peak memory over time. Cancel asks first, then
    stops the remote work; what was measured is kept in the store. Only the controller that
    runs a run can cancel it."""

    TITLE = "Runs"
    BINDINGS = [
        Binding("x", "cancel_run", "Cancel run", id="runs.cancel"),
        Binding("c", "toggle_charts", "Charts", id="runs.charts"),
        Binding("g", "toggle_log", "Log", id="runs.log"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.selected: str | None = None
        self._log_next = 0  # the selected run's next log line to draw (RunView.logged)
        self._items: dict[str, RunProgress] = {}
        self._followed: dict[str, FollowedRun] = {}  # other controllers' runs, by run id
        # The ids of those not followed (elsewhere.choose): ids only, so a look's thousand
        # records die young instead of filling the collector's oldest generation.
        self._listed: list[str] = []
        self._quiet: set[str] = set()  # followed once, stopped for want of a sign of life
        self._looking = threading.Lock()  # one look for them at a time
        self._next_look = 0.0  # (monotonic) no look before this
        self._shown_listed: list[str] | None = None  # the run ids #elsewhere names
        self._status_lines = 1  # the status line's height now (it wraps, up to three)

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield ListView(id="run-list")
            yield Label("", id="elsewhere")  # other controllers' runs not followed
            yield Label(
                "No runs yet: mark a config on the Cases screen (1) and launch.", id="run-status"
            )
            yield HostTable(COLUMNS, id="host-table")
            # The note column is the first cut on a narrow terminal: the highlighted host's
            # note (or a failed host's reason) is also shown here, whole.
            yield Label("", id="host-note")
            with Horizontal(id="charts"):
                yield Chart("throughput", "samples/s", id="chart-throughput")
                yield Chart("loss", "loss", id="chart-loss")
                yield Chart("memory", "mem GiB", id="chart-memory")
            # Wrapped: a log line (the results hint, a host's reason) is read whole.
            yield RichLog(max_lines=500, wrap=True, id="run-log")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.set_interval(TICK_S, self.tick)
        self.set_interval(ELSEWHERE_S, self._follow_elsewhere)
        self._follow_elsewhere()
        self.tick()

    def on_unmount(self) -> None:
        for handle in self._followed.values():
            handle.close()

    @work(thread=True, group="elsewhere")
    def _follow_elsewhere(self) -> None:
        """Follow the runs other controllers run that elsewhere.choose picks (the newest
        few with a recent sign of life), stop following those that went quiet, and list
        the rest. The feed learns a run first, so it is shown from its first event."""
        if not self._looking.acquire(blocking=False):  # the last look has not ended
            return
        session, now = self.app.session, time.time()
        try:
            following = {
                i for i, h in self._followed.items() if not h.done and i not in self._quiet
            }
            if time.monotonic() < self._next_look:  # between looks: the followed ones only
                started = [self._followed[i].started for i in following]
                self._drop(elsewhere.quiet(started, session.results_dir, now))
                return
            records = session.running_elsewhere()
            choice = elsewhere.choose(records, following, session.results_dir, now)
            self._drop(choice.drop)
            for record in choice.follow:
                self._follow(record)
            self._listed = [r.run_id for r in choice.listed]
            # A crowded store is read less often: a thousand records a look cost the event
            # loop collections of the garbage they leave (docs/benchmarks.md).
            if len(records) > elsewhere.CROWD:
                self._next_look = time.monotonic() + elsewhere.CROWDED_LOOK_S
        except UserInputError:  # a store that cannot be read now, a run just ended: next time
            pass
        finally:
            self._looking.release()

    def _drop(self, run_ids: list[str]) -> None:
        """Stop following these runs (they may go on): listed, not followed."""
        for run_id in run_ids:
            self._quiet.add(run_id)
            self._followed[run_id].close()
            self.app.feed.set_status(run_id, "not followed", f"no sign of life here in {QUIET}")
            self._listed = [*self._listed, run_id]

    def _follow(self, record: RunRecord) -> None:
        handle = self.app.session.follow(record.run_id)
        self._followed[record.run_id] = handle
        self._quiet.discard(record.run_id)
        ref = f"{record.vendor}/{record.config}"
        target = _target(record, self.app.config.cases_dir)
        feed = self.app.feed
        feed.add_run(record.run_id, record.case, ref, record.hosts, record.hp, target)
        handle.subscribe(feed.push)

    # -- the refresh tick: the only place the feed reaches widgets ---------------------

    def tick(self) -> None:
        feed = self.app.feed
        for run_id in feed.runs.keys() - self._items.keys():
            self._add_item(run_id)
        self._sync_status()
        rows, runs, logs = feed.take()
        if self.app.screen is not self:  # suspended: the next resume redraws everything
            return
        self._show_listed()
        for run_id in runs & self._items.keys():
            self._items[run_id].show(feed.snapshot(run_id))
        if self.selected is None:
            return
        table = self.query_one(HostTable)
        for run_id, row in rows:
            if run_id == self.selected:
                table.put(row.host, _cells(row))  # repaints the row if its text changed
        for number, line in logs.get(self.selected, []):
            if number >= self._log_next:  # not drawn yet by _select's snapshot
                self.query_one(RichLog).write(literal(line))
                self._log_next = number + 1
        if self.selected in runs:
            self._show_status(feed.snapshot(self.selected))
        self._show_note()
        self._draw_charts()

    def _sync_status(self) -> None:
        """The run handles are the truth for status; events may race the subscription."""
        for batch in self.app.batches:
            for handle in batch.runs:
                self.app.feed.set_status(handle.run_id, handle.status, handle.error)
        for followed in list(self._followed.values()):
            if followed.run_id not in self._quiet:
                self.app.feed.set_status(followed.run_id, followed.status, followed.error)

    def _show_listed(self) -> None:
        """The runs other controllers run that are not followed, named on one line."""
        ids = self._listed
        if ids == self._shown_listed:
            return
        self._shown_listed = ids
        label = self.query_one("#elsewhere", Label)
        label.display = bool(ids)
        text = (
            f"Not followed: {len(ids)} more run(s) other controllers have as running (followed:"
            f" the newest {elsewhere.FOLLOW_MAX} with a sign of life in {QUIET}): "
        )
        label.update(literal(text + ", ".join(ids[:20]), no_wrap=True, overflow="ellipsis"))

    def on_screen_resume(self) -> None:
        if self.selected:
            self._select(self.selected)

    def _add_item(self, run_id: str) -> None:
        progress = RunProgress(run_id)
        self._items[run_id] = progress
        followed = self._followed.get(run_id)
        if followed is None:
            self.query_one(ListView).append(ListItem(progress))
        else:  # marked with the controller that runs it
            owner = Label(literal(_owner(followed), no_wrap=True), classes="run-owner")
            self.query_one(ListView).append(
                ListItem(Horizontal(owner, progress, classes="run-row"))
            )
        progress.show(self.app.feed.snapshot(run_id))
        # A new run is shown at once (issue 41 point 8), unless the operator watches
        # another that is still going and did not just launch this one here.
        watched = self.app.feed.runs.get(self.selected or "")
        if watched is None or not watched.active or self.app.handle(run_id) is not None:
            self._select(run_id)
            runs = self.query_one(ListView)
            runs.index = len(runs) - 1

    @on(ListView.Highlighted, "#run-list")
    def _highlighted(self, event: ListView.Highlighted) -> None:
        if event.item is not None:
            self._select(event.item.query_one(RunProgress).run_id)

    def _select(self, run_id: str) -> None:
        self.selected = run_id
        view = self.app.feed.snapshot(run_id)
        table = self.query_one(HostTable)
        table.clear()
        for host in view.hosts:
            table.put(host, _cells(view.rows[host]))
        log = self.query_one(RichLog)
        log.clear()
        for line in view.log:
            log.write(literal(line))
        self._log_next = view.logged
        self._show_status(view)
        self._show_note()
        self._draw_charts()

    @on(HostTable.RowHighlighted, "#host-table")
    def _row_highlighted(self) -> None:
        self._show_note()

    def _show_note(self) -> None:
        """The highlighted host's note, else the first failed host's reason."""
        if self.selected is None:
            return
        rows = self.app.feed.rows(self.selected)
        key = self.query_one(HostTable).cursor_key
        here = None if key is None else rows.get(key)
        failed = (r for r in rows.values() if r.phase in ("failed", "unreachable") and r.message)
        row = here if here is not None and here.message else next(failed, None)
        text = "" if row is None else row.message
        if row is not None and not text.startswith(f"host {row.host}"):
            text = f"{row.host}: {text}"
        note = self.query_one("#host-note", Label)
        note.update(literal(text, overflow="ellipsis", no_wrap=True), layout=False)
        note.set_class(row is not None and row.phase in ("failed", "unreachable"), "error")

    def _show_status(self, view: RunView) -> None:
        # The status first, then the run id and who runs it; the reason after them. The
        # line wraps (up to three lines) rather than cut the reason or the id (issue 41).
        text = f"[{view.status}] {view.case} {view.config}  run {view.run_id}"
        if followed := self._followed.get(view.run_id):
            text += f"  {_owner(followed)}"
        if view.error:
            text += f"  {view.error}"
        # The published throughput for this config, beside the live one (docs/references.md).
        reference = rate_references(view.case, view.config)
        if reference and not view.error:
            text += f"  ({reference})"
        label = self.query_one("#run-status", Label)
        shown = literal(text, overflow="ellipsis")
        width = label.content_size.width or self.size.width - 2
        lines = min(len(shown.wrap(self.app.console, max(width, 1))), 3)
        # A layout pass only when the height changes: the line is redrawn every tick.
        label.update(shown, layout=lines != self._status_lines)
        self._status_lines = lines
        label.set_class(view.status in ("failed", "aborted", "bad_input"), "error")

    def _draw_charts(self) -> None:
        charts = self.query_one("#charts")
        if not charts.display or self.selected is None:
            return  # hidden charts are not redrawn
        for chart in self.query(Chart):
            width = max(chart.plot_width, 1)
            chart.show(self.app.feed.series(self.selected, chart.series, width))

    # -- actions ----------------------------------------------------------------------

    def action_toggle_charts(self) -> None:
        charts = self.query_one("#charts")
        charts.display = not charts.display
        self._draw_charts()

    def action_toggle_log(self) -> None:
        log = self.query_one(RichLog)
        log.display = not log.display

    def action_cancel_run(self) -> None:
        if followed := self._followed.get(self.selected or ""):
            try:
                followed.cancel()
            except UserInputError as exc:  # another controller's run: refused, saying whose
                self.notify(str(exc), severity="warning")
            return
        handle = self.app.handle(self.selected) if self.selected else None
        if handle is None or handle.status not in ("queued", "running"):
            self.notify("No active run selected.", severity="warning")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.notify(f"Cancelling {handle.run_id}: stopping the remote work...")
                self._cancel(handle.run_id)

        self.app.push_screen(
            ConfirmScreen(
                f"Cancel run {handle.run_id}? The workload stops on every host; what was"
                " measured so far is kept.",
                yes="Cancel run",
                no="Keep running",
            ),
            answer,
        )

    @work(thread=True, group="cancel")
    def _cancel(self, run_id: str) -> None:
        handle = self.app.handle(run_id)
        if handle is not None:
            handle.cancel()


def _owner(followed: FollowedRun) -> str:
    return f"{followed.owner} (read-only)"


def _target(record: RunRecord, cases_dir: Path) -> tuple[str, float] | None:
    """The target (metric, value) the run is judged by, as a launch gives the feed: its
    case's, resolved with the run's hyperparameters; None without one or for a smoke run."""
    try:
        case = catalog.load_case(record.case, cases_dir)
    except CatalogError:
        return None
    return run_target(case, record.hp, record.smoke)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _cells(row: HostRow) -> tuple[str, ...]:
    mem = (
        "-"
        if row.mem_used_gib is None
        else f"{row.mem_used_gib:.1f}/{_num(row.mem_total_gib, '.1f')}"
    )
    return (
        row.host,
        row.phase,
        _num(row.step, "d"),
        _num(row.samples_per_s, ".1f"),
        _num(row.tokens_per_s, ".0f"),
        mem,
        _num(row.loss, ".4f"),
        _eta(row.eta_s),
        row.message or _ttft(row.ttft_p99_ms),
    )


def _ttft(ms: float | None) -> str:
    """A serving run's live latency, in the note column while nothing else is said there."""
    return "" if ms is None else f"TTFT p99 {ms:.0f} ms"


@functools.lru_cache(maxsize=64)  # the dashboard asks at every refresh
def rate_references(case_name: str, config_ref: str) -> str:
    """The config's throughput references in one line, for the dashboard beside the live
    throughput ("" when it has none, or the case or config cannot be read)."""
    try:
        case = catalog.load_case(case_name)
        config = catalog.load_config(case, config_ref)
    except CatalogError:
        return ""
    name = headline(ref.metric for ref in config.references)
    parts = []
    for ref in config.references:
        if ref.metric != name:
            continue
        metric = METRICS[ref.metric]
        cond = f" with {', '.join(f'{k}={v}' for k, v in ref.hp.items())}" if ref.hp else ""
        parts.append(f"{ref.metric} {metric.show(ref.value)} {ref.unit}{cond}")
    if not parts:
        return ""
    device = config.references[0].device or config.chip
    return f"reference on {device}: " + "; ".join(parts)
