"""The run dashboard: the feed's aggregation, and the screen fed with typed events."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from app_support import make_app, plain, run, wait_for
from rich.style import Style
from textual.coordinate import Coordinate
from textual.strip import Strip
from textual.widgets import DataTable, Label, RichLog, Sparkline

from tui.app.feed import SERIES_POINTS, RunFeed, downsample
from tui.app.screens.dashboard import DashboardScreen
from tui.app.widgets.charts import RunProgress
from tui.app.widgets.hosttable import HostTable
from tui.core.events import CaseResult, HostState, MetricSample, RunFinished, RunStarted

RUN = "20261122-070000-emitter-0001"


def metric(host: str, step: int, t: float, loss: float = 0.5, run_id: str = RUN) -> MetricSample:
    return MetricSample(
        run_id=run_id,
        host=host,
        rank=0,
        t=t,
        received=t,
        step=step,
        samples=step * 8,
        tokens=step * 64,
        loss=loss,
        lr=0.1,
        throughput=40.0,
        mem_used_gib=0.5,
        mem_total_gib=2.0,
    )


def test_feed_folds_events_into_one_row_per_host_per_tick() -> None:
    feed = RunFeed()
    feed.add_run(RUN, "emitter", "cpu/CPUx2x1", ["a", "b"], {"max_samples": 800})
    feed.push(RunStarted(RUN, "emitter", "cpu/CPUx2x1", ["a", "b"], 0.0))
    for step in range(1, 11):
        feed.push(metric("a", step, float(step)))
    feed.push(metric("b", 1, 1.0))
    rows, runs, logs = feed.take()
    assert sorted(r.host for _, r in rows) == ["a", "b"]  # ten events of a: one update
    a = feed.runs[RUN].rows["a"]
    assert (a.step, a.samples, a.samples_per_s) == (10, 80, 40.0)
    assert a.tokens_per_s == 64.0  # 64 tokens per second between the last two records
    assert a.eta_s == (800 - 80) / 40.0
    assert runs == {RUN} and logs[RUN] == [(0, f"started emitter cpu/CPUx2x1 on a, b (run {RUN})")]
    assert feed.runs[RUN].progress() == (800.0, 80.0)
    assert feed.take() == ([], set(), {})  # nothing new: nothing to redraw
    feed.push(HostState(RUN, "b", "failed", "host b: failed: disk full"))
    feed.push(metric("b", 2, 2.0))  # a late line must not hide the failure
    assert feed.runs[RUN].rows["b"].phase == "failed"
    assert feed.runs[RUN].rows["b"].message == "host b: failed: disk full"


def test_feed_series_are_bounded_and_downsampled() -> None:
    feed = RunFeed()
    feed.add_run(RUN, "emitter", "cpu/CPUx1x1", ["a"], {})
    feed.push(RunStarted(RUN, "emitter", "cpu/CPUx1x1", ["a"], 0.0))
    for step in range(1, SERIES_POINTS + 50):
        feed.push(metric("a", step, float(step), loss=1.0 / step))
        feed.take()
    assert len(feed.runs[RUN].series["loss"]) == SERIES_POINTS
    points = feed.series(RUN, "loss", 40)
    assert len(points) == 40 and points == sorted(points, reverse=True)
    assert downsample([1.0, 3.0, 5.0, 7.0], 2) == [2.0, 6.0]
    assert downsample([1.0, 2.0], 5) == [1.0, 2.0]


def test_dashboard_shows_rows_failure_reason_and_skips_hidden_charts(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            feed = app.feed
            feed.add_run(RUN, "emitter", "cpu/CPUx2x1", ["node-a", "node-b"], {"max_samples": 400})
            feed.push(RunStarted(RUN, "emitter", "cpu/CPUx2x1", ["node-a", "node-b"], 0.0))
            now = time.time()
            for step in range(1, 6):
                feed.push(metric("node-a", step, now + step, loss=1.0 / step))
                feed.push(metric("node-b", step, now + step, loss=1.0 / step))
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, DashboardScreen)
            table = screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 2)
            assert str(table.get_cell("node-a", "step")) == "5"
            assert str(table.get_cell("node-a", "samples/s")) == "40.0"
            assert str(table.get_cell("node-b", "mem GiB")) == "0.5/2.0"
            progress = screen.query_one(RunProgress)
            await wait_for(pilot, lambda: progress.query_one("ProgressBar").progress == 40)
            # A failing host: its reason in its row, the run's in the status line.
            feed.push(HostState(RUN, "node-b", "failed", "host node-b: failed: CUDA error"))
            feed.push(RunFinished(RUN, "failed", "host node-b: failed: CUDA error", now + 9))
            await wait_for(pilot, lambda: str(table.get_cell("node-b", "state")) == "failed")
            assert "CUDA error" in str(table.get_cell("node-b", "note"))
            status = screen.query_one("#run-status", Label)
            await wait_for(pilot, lambda: "CUDA error" in plain(status))
            assert "[failed]" in plain(status)
            await wait_for(pilot, lambda: "failed: host node-b" in log_text(screen))
            # Hidden charts are not redrawn.
            sparkline = screen.query_one("#chart-loss").query_one(Sparkline)
            await pilot.press("c")
            before = list(sparkline.data or [])
            feed.add_run("second", "emitter", "cpu/CPUx1x1", ["node-c"], {})
            feed.push(RunStarted("second", "emitter", "cpu/CPUx1x1", ["node-c"], 0.0))
            for step in range(1, 20):
                feed.push(metric("node-c", step, now + step, loss=5.0, run_id="second"))
            await wait_for(pilot, lambda: len(screen.query(RunProgress)) == 2)
            screen.query_one("#run-list").focus()
            await pilot.press("down")  # the second run: its rows, not its charts
            await wait_for(pilot, lambda: table.row_count == 1 and "node-c" in table.rows)
            await pilot.pause(1.2)
            assert list(sparkline.data or []) == before
            await pilot.press("c")
            assert sparkline.data and sparkline.data[-1] == 5.0
            # Cancel on a run without a live handle: a notice, never a traceback.
            await pilot.press("x")
            assert any("No active run" in str(n.message) for n in app._notifications)

    run(scenario())


def test_a_screen_first_shown_leaves_the_collectors_full_passes(tmp_path: Path) -> None:
    # A full collection walks every tracked object: under a busy feed, the screens' widgets
    # and styles (as old as the app) made it stop the event loop for 50-100 ms.
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, DashboardScreen)
            long_lived = [screen, screen.query_one(HostTable), screen.query_one(RichLog)]
            await wait_for(
                pilot, lambda: not {id(o) for o in long_lived} & {id(o) for o in gc.get_objects()}
            )

    try:
        run(scenario())
    finally:
        gc.unfreeze()  # the app's objects may be collected once the test is over


def test_the_host_table_draws_what_a_datatable_showed() -> None:
    """HostTable replaced the dashboard's DataTable (row cursor, zebra stripes): every
    line, header, stripes, cursor focused or not, mouse hover, cropped and wide cells,
    a table wider than the widget scrolled sideways, dark and light themes, must come out
    in the same cells and colours as DataTable's. Host text is shown as it is: what reads
    as markup or emoji codes (the DataTable given it as Text), escape sequences escaped."""
    from rich.text import Text
    from textual.app import App, ComposeResult

    from tui.core.term import printable

    columns = {"host": 7, "state": 7, "step": 7, "x": 7, "ETA": 7, "note": None}
    rows = [
        ("node-00", "running", "12", "320.5", "1:02", "ok"),
        ("node-01", "failed", "-", "-", "-", "a reason far too long for its column here"),
        ("node-02", "running", "[b]bold[/b]", "7", "0:01:02", "wide \u4e2d\u6587 text"),
        ("node-03", "queued", "", ":x: done", "", "[rank0]: [/x] [@click=app.quit]"),
        ("node-04", "failed", "", "", "", "title \x1b]0;evil\x07 clear \x1b[2J"),
    ]

    class Both(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(id="stock", zebra_stripes=True, cursor_type="row")
            yield HostTable(columns, id="mine")

        def on_mount(self) -> None:
            stock, mine = self.query_one(DataTable), self.query_one(HostTable)
            for key, width in columns.items():
                stock.add_column(key, key=key, width=width)
            for row in rows:
                stock.add_row(*(Text(printable(c), no_wrap=True, end="") for c in row), key=row[0])
                mine.put(row[0], row)
            stock.styles.height = mine.styles.height = 7

    def look(line: Strip) -> list[tuple[str, Style | None]]:
        """Text and colours, joined where neighbours look the same (DataTable splits a line
        by cell, and marks cells with metadata for its mouse handling)."""
        out: list[tuple[str, Style | None]] = []
        for seg in line:
            style = seg.style.clear_meta_and_links() if seg.style else None
            if out and out[-1][1] == style:
                out[-1] = (out[-1][0] + seg.text, style)
            else:
                out.append((seg.text, style))
        return out

    async def scenario() -> None:
        app = Both()
        async with app.run_test(size=(60, 16)) as pilot:
            stock, mine = app.query_one(DataTable), app.query_one(HostTable)
            compared = 0
            for theme, focused, cursor, hover, scroll_x in (
                ("textual-dark", False, 0, None, 0),
                ("textual-dark", True, 0, None, 0),
                ("textual-dark", True, 2, 3, 0),
                ("textual-dark", False, 4, 4, 0),
                ("textual-dark", True, 1, None, 20),
                ("textual-light", True, 3, 0, 0),
                ("textual-light", False, 0, None, 28),
            ):
                app.theme = theme
                shown = []
                for table in (stock, mine):
                    app.set_focus(table if focused else None)
                    if table is stock:
                        stock.move_cursor(row=cursor, scroll=False)
                        stock.hover_coordinate = Coordinate(hover or 0, 0)
                        stock._set_hover_cursor(hover is not None)  # what a mouse move sets
                    else:
                        mine.move_cursor(cursor)
                        mine._set_hover(hover)
                    table.scroll_to(x=scroll_x, animate=False)
                    await pilot.pause()
                    assert table.scroll_offset.x == scroll_x
                    shown.append([look(table.render_line(y)) for y in range(7)])
                assert shown[1] == shown[0], (theme, focused, cursor, hover, scroll_x)
                compared += 1
            assert compared == 7
            mine.scroll_to(x=0, animate=False)
            await pilot.pause()
            lines = [mine.render_line(y).text for y in range(7)]
            assert "[b]bold" in lines[3]  # markup shown (cropped), not read
            assert ":x: don" in lines[4] and "[rank0]: [/x]" in lines[4]
            assert "\x1b" not in "".join(lines) and "title \\u001b]0" in lines[5]
            assert (
                mine.get_cell("node-04", "note") == "title \\u001b]0;evil\\u0007 clear \\u001b[2J"
            )

    run(scenario())


def test_a_changed_host_repaints_its_own_line_only() -> None:
    """The point of HostTable: a row whose text changed is drawn again, one line; an
    unchanged put or a row off screen draws nothing; the cursor moving draws its two rows."""
    from textual.app import App, ComposeResult

    class Counting(HostTable):
        def __init__(self) -> None:
            super().__init__({"host": 8, "step": 6, "note": None})
            self.painted: list[int] = []

        def render_line(self, y: int) -> Strip:
            self.painted.append(y)
            return super().render_line(y)

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield Counting()

        def on_mount(self) -> None:
            table = self.query_one(Counting)
            table.styles.height = 12  # a header and 11 of the 40 rows
            for i in range(40):
                table.put(f"h{i:02d}", (f"h{i:02d}", str(i), ""))

    async def scenario() -> None:
        app = One()
        async with app.run_test(size=(60, 20)) as pilot:
            table = app.query_one(Counting)
            table.focus()
            await pilot.pause()

            async def painted_after(change: Callable[[], object]) -> list[int]:
                await pilot.pause()
                table.painted.clear()
                change()
                await pilot.pause()
                return sorted(table.painted)

            assert await painted_after(lambda: table.put("h03", ("h03", "99", ""))) == [4]
            assert table.render_line(4).text.split()[:2] == ["h03", "99"]
            assert await painted_after(lambda: table.put("h03", ("h03", "99", ""))) == []
            assert await painted_after(lambda: table.put("h30", ("h30", "1", ""))) == []
            assert await painted_after(lambda: table.move_cursor(1)) == [1, 2]
            everyone = [(f"h{i:02d}", (f"h{i:02d}", "70", "")) for i in range(40)]
            assert await painted_after(lambda: [table.put(*r) for r in everyone]) == list(
                range(1, 12)
            )  # every visible row changed: those lines, not the header
            # A wider note widens its column: the whole table, as any table would.
            assert len(await painted_after(lambda: table.put("h05", ("h05", "7", "x" * 30)))) == 12
            assert table.virtual_size.width == 8 + 2 + 6 + 2 + 30 + 2
            table.put("h05", ("h05", "7", ""))
            assert table.virtual_size.width == 8 + 2 + 6 + 2 + 4 + 2  # back to "note"

    run(scenario())


def test_the_host_table_moves_its_cursor_as_datatable_did() -> None:
    """Keys and clicks move the row cursor and keep it on screen; each move says which
    host is highlighted (the dashboard shows that host's note)."""
    from textual.app import App, ComposeResult

    class One(App[None]):
        highlighted: list[str] = []

        def compose(self) -> ComposeResult:
            yield HostTable({"host": 8, "note": None})

        def on_mount(self) -> None:
            table = self.query_one(HostTable)
            table.styles.height = 12
            for i in range(40):
                table.put(f"h{i:02d}", (f"h{i:02d}", ""))

        def on_host_table_row_highlighted(self, event: HostTable.RowHighlighted) -> None:
            self.highlighted.append(event.key)

    async def scenario() -> None:
        app = One()
        async with app.run_test(size=(40, 20)) as pilot:
            table = app.query_one(HostTable)
            table.focus()
            await pilot.pause()
            assert app.highlighted == ["h00"]  # the first row under the cursor
            await pilot.press("down", "down")
            assert (table.cursor_row, table.cursor_key, app.highlighted[-1]) == (2, "h02", "h02")
            await pilot.press("ctrl+end")
            await pilot.pause()
            assert table.cursor_row == 39 and table.scroll_offset.y == 40 - 11
            assert table.render_line(11).text.startswith(" h39")
            await pilot.press("pageup")
            await pilot.pause()
            assert table.cursor_row == 39 - 11 and table.scroll_offset.y == 29 - 11
            await pilot.press("pagedown")  # back: cursor and view by a page
            await pilot.pause()
            assert table.cursor_row == 39 and table.scroll_offset.y == 29
            await pilot.press("ctrl+home", "up")
            await pilot.pause()
            assert table.cursor_row == 0 and table.scroll_offset.y == 0
            await pilot.click(table, offset=(3, 4))  # line 4: the fourth row under the header
            assert table.cursor_key == "h03" and app.highlighted[-1] == "h03"
            table.clear()
            assert table.row_count == 0 and table.cursor_key is None
            await pilot.press("down")  # an empty table: nothing to move to, no error

    run(scenario())


@pytest.mark.slow
def test_at_80_columns_a_hosts_note_shows_whole_under_the_table(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            hosts = ["node-a", "node-b", "node-c"]
            # A case name as long as the real ones: the run list's line is 38 cells here.
            case = "distilbert-pytorch"
            app.feed.add_run(RUN, case, "cpu/CPUx3x1", hosts, {})
            app.feed.push(RunStarted(RUN, case, "cpu/CPUx3x1", hosts, 0.0))
            await pilot.press("3")
            screen = app.screen
            table, note = screen.query_one(HostTable), screen.query_one("#host-note", Label)
            await wait_for(pilot, lambda: table.row_count == 3)
            assert plain(note).strip() == ""  # nothing to say yet
            why = "host node-c: failed: RuntimeError: NCCL timeout after 600 s on rank 7"
            app.feed.push(HostState(RUN, "node-c", "failed", why))
            await wait_for(
                pilot, lambda: plain(note).strip() == why
            )  # not highlighted, still shown
            assert note.has_class("error")
            app.feed.push(HostState(RUN, "node-a", "stopped", "stopped by the run's cleanup"))
            table.focus()
            await pilot.pause(0.6)
            assert table.cursor_row == 0
            await wait_for(
                pilot, lambda: plain(note).strip() == "node-a: stopped by the run's cleanup"
            )
            assert not note.has_class("error")
            await pilot.press("down")  # node-b has no note: the failed host's reason again
            await wait_for(pilot, lambda: plain(note).strip() == why)
            # The run's status is what a narrow line keeps: first in the list and status line.
            app.feed.push(RunFinished(RUN, "failed", why, 1.0))
            item = screen.query_one(RunProgress).query_one(Label)
            status = screen.query_one("#run-status", Label)
            await wait_for(pilot, lambda: "[failed]" in item.render_line(0).text)
            assert item.render_line(0).text.strip().startswith("[failed] distilbert-pytorch")
            assert status.render_line(0).text.strip().startswith("[failed] distilbert-pytorch")

    run(scenario())


@pytest.mark.slow
def test_a_hosts_message_shows_literally_in_row_note_status_and_log(tmp_path: Path) -> None:
    """Host text is never markup (``[/x]`` would raise, ``[@click=...]`` become an action,
    torchrun's ``[rank0]:`` vanish) and its escape sequences are shown, not sent."""
    why = "[rank0]: boom [/x] [@click=app.quit] \x1b]0;evil\x07\x1b[2J"
    shown = "[rank0]: boom [/x] [@click=app.quit] \\u001b]0;evil\\u0007\\u001b[2J"

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(160, 40)) as pilot:
            app.feed.add_run(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], {})
            app.feed.push(RunStarted(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], 0.0))
            await pilot.press("3")
            screen = app.screen
            table = screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 1)
            app.feed.push(HostState(RUN, "node-a", "failed", why))
            app.feed.push(RunFinished(RUN, "failed", why, 1.0))
            note, status = screen.query_one("#host-note", Label), screen.query_one("#run-status")
            await wait_for(pilot, lambda: plain(note, width=300).strip() == f"node-a: {shown}")
            assert plain(status, width=300).strip().endswith(shown)
            assert str(table.get_cell("node-a", "note")) == shown
            await wait_for(pilot, lambda: shown in log_text(screen))  # drawn once sized
            await pilot.click("#host-note")  # nothing to click: the app stays
            await pilot.pause(0.2)
            assert app.is_running

    run(scenario())


def log_text(screen: DashboardScreen) -> str:
    """The run log's lines as drawn (wrapped lines one after another)."""
    return "\n".join(strip.text for strip in screen.query_one(RichLog).lines)


def test_the_log_wraps_the_results_hint_at_100_columns(tmp_path: Path) -> None:
    """Issue 29 point 9: the log cut "(fleetperf results RUN --format json)" at the edge of a
    100-column terminal; every word of it is on screen now."""

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            app.feed.add_run(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], {})
            app.feed.push(RunStarted(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], 0.0))
            await pilot.press("3")
            screen = app.screen
            app.feed.push(CaseResult(RUN, "node-a", 0, 1.0, "success", True, {}, ["a", "b"]))
            log = screen.query_one("#run-log")  # drawn lines: whatever widget draws them

            def drawn() -> str:
                height = log.scrollable_content_region.height
                return " ".join(" ".join(log.render_line(y).text.split()) for y in range(height))

            await wait_for(pilot, lambda: "result success" in drawn())
            assert f"(fleetperf results {RUN} --format json)" in drawn()

    run(scenario())


def test_a_line_logged_just_before_the_screen_shows_again_is_drawn_once(tmp_path: Path) -> None:
    """The screen draws the selected run's log whole as it shows again (from the run's
    snapshot); a line that came just before, still to be taken at the next tick, was
    drawn a second time by that tick (a snapshot test caught it under load)."""

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            feed = app.feed
            feed.add_run(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], {})
            feed.push(RunStarted(RUN, "emitter", "cpu/CPUx1x1", ["node-a"], 0.0))
            await pilot.press("3")
            screen = app.screen
            await wait_for(pilot, lambda: "started emitter" in log_text(screen))
            await pilot.press("1")
            feed.push(HostState(RUN, "node-a", "failed", "host node-a: failed: disk full"))
            await pilot.press("3")
            await pilot.pause(0.6)  # a few ticks
            assert log_text(screen).count("disk full") == 1, log_text(screen)

    run(scenario())
