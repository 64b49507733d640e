"""The run dashboard: the feed's aggregation, and the screen fed with typed events."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from app_support import make_app, plain, run, wait_for
from textual.widgets import DataTable, Label, Log, Sparkline

from tui.app.feed import SERIES_POINTS, RunFeed, downsample
from tui.app.screens.dashboard import DashboardScreen
from tui.app.widgets.charts import RunProgress
from tui.events import HostState, MetricSample, RunFinished, RunStarted

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
    assert runs == {RUN} and logs[RUN] == ["started emitter cpu/CPUx2x1 on a, b"]
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
            table = screen.query_one(DataTable)
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
            await wait_for(
                pilot, lambda: "failed: host node-b" in "\n".join(screen.query_one(Log).lines)
            )
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
            long_lived = [screen, screen.query_one(DataTable), screen.query_one(Log)]
            await wait_for(
                pilot, lambda: not {id(o) for o in long_lived} & {id(o) for o in gc.get_objects()}
            )

    try:
        run(scenario())
    finally:
        gc.unfreeze()  # the app's objects may be collected once the test is over


def test_the_host_table_keeps_about_a_screen_of_renders() -> None:
    """Under a live feed every cached render goes stale at the next update; the stock
    caches (10,000 cells) fill with garbage the collector then walks (the dashboard
    benchmark's stalls). The names are Textual's: if an upgrade renamed them, DataTable
    would no longer read ours."""
    import inspect

    from textual.widgets import DataTable

    from tui.app.widgets.livetable import CELLS, LiveTable

    names = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
    stock, live = DataTable(), LiveTable()
    source = inspect.getsource(DataTable)
    for name in names:
        assert source.count(f"self.{name}") >= 2, name  # made and read by DataTable
        assert getattr(live, name).maxsize <= CELLS, name
        assert getattr(live, name).maxsize < getattr(stock, name).maxsize, name


def test_the_host_table_draws_its_cells_as_the_stock_table_does() -> None:
    """LiveTable draws plain cells itself (the stock path cost the benchmark's stalls):
    every line, cursor row and cropped cell included, must come out as DataTable's. Its
    str cells are plain text: what reads as markup or emoji codes is shown as it is (the
    stock table given the same text as Text), escape sequences escaped."""
    from rich.text import Text
    from textual.app import App, ComposeResult

    from tui.app.widgets.livetable import LiveTable

    rows = [
        ("node-00", "running", "12", "320.5", "1:02", "ok"),
        ("node-01", "failed", "-", "-", "-", "a reason far too long for its column here"),
        ("node-02", "running", "[b]bold[/b]", "7", "0:01:02", "wide \u4e2d\u6587 text"),
        ("node-03", "queued", "", ":x: done", "", "[rank0]: [/x] [@click=app.quit]"),
        ("node-04", "failed", "", "", "", "title \x1b]0;evil\x07 clear \x1b[2J"),
    ]
    literal = {  # what the stock table must be given to show each text as it is
        "[b]bold[/b]": Text("[b]bold[/b]", no_wrap=True, end=""),
        ":x: done": Text(":x: done", no_wrap=True, end=""),
        "0:01:02": Text("0:01:02", no_wrap=True, end=""),
        "[rank0]: [/x] [@click=app.quit]": Text(
            "[rank0]: [/x] [@click=app.quit]", no_wrap=True, end=""
        ),
        "title \x1b]0;evil\x07 clear \x1b[2J": Text(
            "title \\u001b]0;evil\\u0007 clear \\u001b[2J", no_wrap=True, end=""
        ),
    }

    class Both(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(id="stock", zebra_stripes=True)
            yield LiveTable(id="live", zebra_stripes=True)

        def on_mount(self) -> None:
            for table in self.query(DataTable):
                table.styles.height = 7
                for i, name in enumerate(("host", "state", "step", "x", "ETA", "note")):
                    table.add_column(name, key=name, width=None if i == 5 else 7)
                stock = not isinstance(table, LiveTable)
                for row in rows:
                    cells = [literal.get(c, c) if stock else c for c in row]
                    table.add_row(*cells, key=row[0])

    async def scenario() -> None:
        app = Both()
        async with app.run_test(size=(60, 16)) as pilot:
            stock, live = app.query_one("#stock", DataTable), app.query_one("#live", DataTable)
            app.set_focus(None)  # a focused table draws its header differently
            for cursor, priority in ((0, "css"), (2, "css"), (0, "renderable")):
                for table in (stock, live):
                    table.move_cursor(row=cursor)
                    table.cursor_foreground_priority = priority
                    table.cursor_background_priority = priority
                await pilot.pause()
                for y in range(7):
                    want, got = stock.render_line(y), live.render_line(y)
                    # Same cells in the same styles; segments may be split differently.
                    assert list(got.simplify()) == list(want.simplify()), y
            assert "[b]bold" in live.render_line(3).text  # markup shown (cropped), not read
            assert (
                ":x: don" in live.render_line(4).text
                and "[rank0]: [/x]" in live.render_line(4).text
            )
            assert "\x1b" not in "".join(live.render_line(y).text for y in range(7))

    run(scenario())


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
            table, note = screen.query_one(DataTable), screen.query_one("#host-note", Label)
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
            table = screen.query_one(DataTable)
            await wait_for(pilot, lambda: table.row_count == 1)
            app.feed.push(HostState(RUN, "node-a", "failed", why))
            app.feed.push(RunFinished(RUN, "failed", why, 1.0))
            note, status = screen.query_one("#host-note", Label), screen.query_one("#run-status")
            await wait_for(pilot, lambda: plain(note, width=300).strip() == f"node-a: {shown}")
            assert plain(status, width=300).strip().endswith(shown)
            assert str(table.get_cell("node-a", "note")) == shown
            assert shown in "\n".join(screen.query_one(Log).lines)
            await pilot.click("#host-note")  # nothing to click: the app stays
            await pilot.pause(0.2)
            assert app.is_running

    run(scenario())
