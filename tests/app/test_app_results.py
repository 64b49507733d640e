"""The Results screen: history from the store, filters, seeds' table, compare, export."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from app_support import history, make_app, plain, run, seed_store, wait_for
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Input, Select, Static

from tui.app.app import FleetperfApp
from tui.app.screens import results as results_screen
from tui.app.screens.export import ExportScreen
from tui.app.screens.results import ResultsScreen
from tui.app.widgets.plots import HistoryPlot, RunCurves, RunPlot, config_history, run_curves
from tui.app.widgets.runtable import SeedsTable, SeedsView
from tui.results.compare import compare
from tui.results.record import Peak, RunRecord
from tui.results.references import history_band
from tui.results.report import rolling_bands, series, step_curve
from tui.results.store import ResultStore
from tui.results.tables import render
from tui.results.verdict import Check, Verdict


async def results_read(
    pilot: Pilot, app: FleetperfApp, runs: int
) -> tuple[ResultsScreen, DataTable]:
    """Key 4, then the Results screen once it read the whole store (``runs`` records)."""
    await pilot.press("4")
    screen = app.screen
    assert isinstance(screen, ResultsScreen)
    await wait_for(pilot, lambda: len(screen.records) == runs and not screen.reading)
    return screen, screen.query_one("#history", DataTable)


def seeds_text(screen: Screen) -> str:
    """The seeds' pane as plain text: each table's header and rows, then the notes."""
    lines = []
    for widget in screen.query_one(SeedsView).children:
        if isinstance(widget, DataTable):
            rows = [[c.label for c in widget.ordered_columns]]
            rows += [widget.get_row_at(i) for i in range(widget.row_count)]
            lines += [" | ".join(str(cell) for cell in row) for row in rows]
        elif isinstance(widget, Static):
            lines.append(plain(widget, width=300))
    return "\n".join(lines)


def test_compare_flags_a_change_outside_the_earlier_spread() -> None:
    records = {r.run_id: r for r in history()}
    same_config = [r for r in records.values() if r.config == "A100x1x8"]
    compared = compare(records["run-3"], records["run-new"], same_config)
    rows = {c.metric.name: c for c in compared.changes}
    p_whole = rows["p_whole"]
    assert (p_whole.before, p_whole.after) == (1760.0, 1500.0)
    assert p_whole.change == (1500.0 - 1760.0) / 1760.0
    assert p_whole.spread == (1700.0, 1760.0) and p_whole.outside
    assert p_whole.better is False  # samples/s: higher is better
    assert rows["p_train"].spread == (1780.0, 1810.0) and not rows["p_train"].outside
    assert rows["acc"].spread == (0.915, 0.915) and rows["acc"].outside  # every earlier run
    assert rows["e2e_time"].outside and rows["e2e_time"].better is False  # slower
    # Too few earlier runs: no spread, nothing flagged.
    few = compare(records["run-0"], records["run-1"], same_config)
    assert all(c.spread is None and not c.outside for c in few.changes)


def test_compare_names_other_hyperparameters_and_leaves_loaded_hosts_out() -> None:
    """Issue 29 point 6: a max_samples=800 run beside a 3200-sample one was compared without
    a word, and the earlier spread took in a run on a loaded host."""
    records = {r.run_id: r.model_copy(update={"hp": {"max_samples": 3200}}) for r in history()}
    short = records["run-3"].model_copy(update={"hp": {"max_samples": 800}})
    loaded = records["run-2"].model_copy(
        update={"run_id": "run-busy", "load_per_cpu": 1.5, "metrics": {"p_whole": 900.0}}
    )
    earlier = [r for r in records.values() if r.run_id != "run-3"] + [short, loaded]
    compared = compare(short, records["run-new"], earlier)
    assert compared.differs == ["max_samples 800 -> 3200"]
    assert compared.load_apart == "1 comparable run(s) on a loaded host left out"
    assert compared.spread_runs == 3  # run-0..2: run-3 is now the 800-sample run
    p_whole = next(c for c in compared.changes if c.metric.name == "p_whole")
    assert p_whole.spread == (1700.0, 1740.0) and p_whole.outside  # 900 not in it
    same = compare(records["run-2"], records["run-new"], earlier)
    assert same.differs == []  # like for like: nothing said
    busy = compare(loaded, records["run-new"], earlier)
    assert busy.differs == ["host loaded (load 1.5 per CPU) -> quiet"]


@pytest.mark.slow
def test_history_filters_compare_and_export(tmp_path: Path) -> None:
    records = seed_store(tmp_path / "results")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("4")
            screen = app.screen
            assert isinstance(screen, ResultsScreen)
            table = screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == len(records))
            # Newest first.
            assert str(table.coordinate_to_cell_key((0, 0)).row_key.value) == "run-new"
            # The seeds' table of what is shown: a table widget per case, not markdown source.
            await wait_for(pilot, lambda: bool(screen.query(SeedsTable)))
            (seeds,) = screen.query(SeedsTable)
            assert seeds.row_count == len(records)
            assert [str(c.label) for c in seeds.ordered_columns][:3] == ["run", "date", "配置"]
            assert "###" not in seeds_text(screen)
            pane = screen.query_one("#compare-view", Static)
            screen.query_one("#filter-config", Select).value = "A100x2x8"
            await wait_for(pilot, lambda: table.row_count == 1)
            screen.query_one("#filter-config", Select).value = "A100x1x8"
            await wait_for(pilot, lambda: table.row_count == len(records) - 1)
            # The same case and columns: the table mounted gets the rows, not mounted anew.
            await wait_for(pilot, lambda: seeds.row_count == len(records) - 1)
            assert screen.query_one(SeedsTable) is seeds
            table.focus()
            await pilot.press("d")  # fewer than two marked: a notice
            assert any("exactly two" in str(n.message) for n in app._notifications)
            await pilot.press("space", "down", "space")  # run-new and run-3
            assert screen.marked == ["run-new", "run-3"]
            await pilot.press("d")
            text = plain(pane, width=140)
            assert "-14.8%" in text  # p_whole 1760 -> 1500
            (p_whole,) = [ln for ln in text.splitlines() if "p_whole (" in ln]
            assert "1700.0..1760.0" in p_whole and "! outside" in p_whole
            # run-new set train_batch_size 96, run-3 left it at its default: said so.
            assert "not like for like: train_batch_size (default) -> 96" in text
            assert "earlier spread: 4 comparable passed run(s) of the newer run" in text
            # Export the two marked runs in each format.
            for fmt in ("md", "csv", "json"):
                await pilot.press("e")
                button = f"#export-{fmt}"
                await wait_for(pilot, lambda b=button: bool(app.screen.query(b)))
                assert isinstance(app.screen, ExportScreen)
                app.screen.query_one("#export-path").value = str(tmp_path / "out" / f"x.{fmt}")
                await pilot.click(button)
                await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))
            marked = sorted(
                (r for r in records if r.run_id in ("run-3", "run-new")), key=lambda r: r.started
            )
            assert (tmp_path / "out" / "x.md").read_text() == render(marked, "md", ids=True) + "\n"
            assert (tmp_path / "out" / "x.csv").read_text() == render(marked, "csv") + "\n"
            exported = json.loads((tmp_path / "out" / "x.json").read_text())
            assert [r["run_id"] for r in exported] == ["run-3", "run-new"]

    run(scenario())


def test_no_store_yet_says_so(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            await wait_for(pilot, lambda: bool(app.screen.query(SeedsView)))
            await wait_for(pilot, lambda: "No results store" in seeds_text(app.screen))
            assert not (tmp_path / "results" / "fleetperf.sqlite").exists()

    run(scenario())


def test_the_first_show_restyles_nothing_and_follows_the_theme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Key 4 builds the screen styled by the stylesheet as it is (a theme changed before
    included), without Textual's reparse and restyle of the whole app."""
    restyles: list[str] = []
    refresh_css = FleetperfApp.refresh_css

    def counted(self: FleetperfApp, animate: bool = True) -> None:
        restyles.append(self.screen.__class__.__name__)
        refresh_css(self, animate)

    monkeypatch.setattr(FleetperfApp, "refresh_css", counted)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            dark = app.screen.styles.background
            await pilot.press("ctrl+t")
            await pilot.pause()
            light = app.screen.styles.background
            assert light != dark
            restyles.clear()
            await pilot.press("4")
            await wait_for(pilot, lambda: bool(app.screen.query(SeedsView)))
            assert isinstance(app.screen, ResultsScreen)
            assert restyles == []
            assert app.screen.styles.background == light

    run(scenario())


# A run's error as hosts write them: torchrun's rank prefix, text that reads as markup
# (a closing tag with no opening one, an action), and escape sequences (window title, clear).
HOSTILE_ERROR = "[rank0]: boom [/x] [@click=app.quit] \x1b]0;evil\x07\x1b[2J"


def test_a_run_error_shows_literally_and_its_escapes_do_not_reach_the_terminal(
    tmp_path: Path,
) -> None:
    record = history()[0].model_copy(update={"status": "failed", "error": HOSTILE_ERROR})
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        store.add(record)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == 1)
            await wait_for(pilot, lambda: "failed:" in seeds_text(screen))
            text = seeds_text(screen)
            assert "failed: [rank0]: boom [/x] [@click=app.quit] " in text
            assert "\\u001b]0;evil\\u0007\\u001b[2J" in text  # shown, not obeyed
            assert "\x1b" not in text and "\x07" not in text
            assert str(table.get_cell("run-0", "status")) == "failed"
            await pilot.click(SeedsTable)  # a click on the error: no action runs
            await pilot.pause(0.2)
            assert app.is_running

    run(scenario())


@pytest.mark.slow
def test_read_only_export_writes_under_the_results_directory_only(tmp_path: Path) -> None:
    seed_store(tmp_path / "results")

    async def scenario() -> None:
        app = make_app(tmp_path)
        app.config = replace(app.config, read_only=True)  # as fleetperf serve starts it
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("4")
            table = app.screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count > 0)
            table.focus()
            await pilot.press("e")
            # pushed is not yet composed: under load the buttons come a little later
            await wait_for(pilot, lambda: bool(app.screen.query("#export-md")))
            assert isinstance(app.screen, ExportScreen)
            path = app.screen.query_one("#export-path", Input)
            assert path.disabled
            path.value = str(tmp_path / "elsewhere" / "x.md")  # what typing could not do
            await pilot.click("#export-md")
            await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))
            assert not (tmp_path / "elsewhere").exists()
            (written,) = (tmp_path / "results" / "exports").iterdir()
            assert written.name.startswith("fleetperf-") and written.suffix == ".md"
            assert any("written to" in str(n.message) for n in app._notifications)

    run(scenario())


def test_one_marked_run_shows_what_its_mfu_divides_and_its_config_env(tmp_path: Path) -> None:
    records = history()
    peak = Peak(
        chip="A100",
        math="tf32",
        datasheet_flops=156e12,
        measured_flops=120e12,
        model_flops_per_s_per_device=31.2e12,
    )
    newest = max(records, key=lambda r: r.started)
    records = [
        r.model_copy(update={"peak": peak, "config_env": {"BKCL_FORCE_SYNC": "1"}})
        if r is newest
        else r
        for r in records
    ]
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            table = app.screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == len(records))
            await wait_for(pilot, lambda: bool(app.screen.query(SeedsTable)))
            assert "datasheet peak" not in seeds_text(app.screen)  # several runs: the table
            table.focus()
            await pilot.press("space")  # the newest run, first row
            await wait_for(pilot, lambda: "datasheet peak" in seeds_text(app.screen))
            text = seeds_text(app.screen)
            assert "156 TFLOP/s" in text and "31.2 TFLOP/s" in text and "math" in text
            assert "BKCL_FORCE_SYNC=1" in text

    run(scenario())


def test_a_run_id_typed_as_fleetperf_results_takes_it(tmp_path: Path) -> None:
    """Issue 29 point 4 in the app: the run column shows the short form; the run id field
    takes it (or any unique prefix), clears a filter that hides the run, marks it; an
    ambiguous one is refused naming the matches."""
    seed_store(tmp_path / "results")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == 6)
            assert str(table.get_cell("run-x8", "run")) == "x8"  # short_id's tail
            screen.query_one("#filter-config", Select).value = "A100x1x8"  # hides run-x8
            await wait_for(pilot, lambda: table.row_count == 5)
            search = screen.query_one("#run-search", Input)
            search.focus()
            await pilot.press(*"x8", "enter")
            await wait_for(pilot, lambda: screen.marked == ["run-x8"])
            assert table.row_count == 6  # the filter that hid it is cleared
            assert screen._cursor_run() == "run-x8"
            search.value = ""
            search.focus()
            await pilot.press(*"run-", "enter")
            await wait_for(
                pilot, lambda: any("ambiguous" in str(n.message) for n in app._notifications)
            )
            (notice,) = [
                str(n.message) for n in app._notifications if "ambiguous" in str(n.message)
            ]
            assert notice.startswith("run 'run-' is ambiguous: 6 runs match (run-0, run-1,")
            assert screen.marked == ["run-x8"]

    run(scenario())


def charted_history(results_dir: Path) -> list[RunRecord]:
    """history() stored with run-new's p_core at 1500 (its four earlier runs: 1900) and
    flagged as the engine's verdict would, and run-new's step records in its run directory
    (loss falling, samples/s rising), as a finished run leaves them."""
    records = history()
    new = next(r for r in records if r.run_id == "run-new")
    metric = new.registry()["p_core"]
    band = history_band([1900.0] * 4, metric)
    assert band is not None
    flag = Check(
        metric="p_core",
        value=1500.0,
        low=band[0],
        high=band[1],
        source="history",
        basis="median of 4 earlier runs - max(3 MADs, tolerance)",
        flagged=True,
    )
    update = {"verdict": Verdict(checks=[flag]), "metrics": new.metrics | {"p_core": 1500.0}}
    records = [r.model_copy(update=update) if r is new else r for r in records]
    with ResultStore(results_dir / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)
    run_dir = results_dir / "runs" / "run-new"
    run_dir.mkdir(parents=True)
    lines = []
    for step in range(10, 410, 10):
        sample = {"type": "MetricSample", "run_id": "run-new", "host": "node-a", "rank": 0}
        sample |= {"step": step, "loss": 2.0 / (step / 10) ** 0.5, "throughput": 1000 + step}
        lines.append(json.dumps(sample))
    lines.append("not json")  # a torn line: skipped
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    return records


def test_config_history_is_the_reports_series_bands_and_flags(tmp_path: Path) -> None:
    records = charted_history(tmp_path / "results")
    new = next(r for r in records if r.run_id == "run-new")
    hist = config_history(new, records)
    assert hist is not None
    assert hist.metric.name == "p_core"  # the report's headline throughput
    (runs,) = series([r for r in records if r.config == "A100x1x8"]).values()
    assert [r.run_id for r in hist.runs] == [r.run_id for r in runs]
    assert hist.bands == rolling_bands(hist.metric, runs)
    assert hist.flagged == [r.run_id == "run-new" for r in runs]
    assert hist.current == len(runs) - 1
    curves = run_curves(tmp_path / "results", "run-new")
    assert curves.loss == step_curve(tmp_path / "results", "run-new", "loss")
    assert curves.throughput[0] == (10, 1010.0) and len(curves.throughput) == 40
    assert run_curves(tmp_path / "results", "run-0") == RunCurves("run-0", [], [])


def test_charts_follow_the_highlighted_run(tmp_path: Path) -> None:
    """c: the highlighted run's loss and samples/s per step, its config's history with the
    band and the flagged run; moving the cursor redraws them for the next run."""
    charted_history(tmp_path / "results")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == 6)
            table.focus()
            await pilot.press("c")
            run_plot, history_plot = screen.query_one(RunPlot), screen.query_one(HistoryPlot)
            await wait_for(pilot, lambda: run_plot.curves is not None)
            assert run_plot.curves.run_id == "run-new" and len(run_plot.curves.loss) == 40
            assert history_plot.history is not None and history_plot.history.flagged[-1]
            legend = plain(screen.query_one("#history-legend", Static))
            assert "p_core (samples/s): 5 nvidia/A100x1x8 runs" in legend
            assert "x flagged" in legend and "● 1500.0, band >= 1615.0" in legend
            drawn = str(run_plot.render())
            assert "step" in drawn and "┤" in drawn  # an axis, not an empty box
            await pilot.press("down")  # run-x8: another config, no step records
            await wait_for(pilot, lambda: run_plot.curves.run_id == "run-x8")
            assert "no step records" in plain(screen.query_one("#run-legend", Static))
            assert history_plot.history is not None and len(history_plot.history.runs) == 1
            await pilot.press("t")
            assert screen.query_one("#result-pane").current == "seeds"

    run(scenario())


def test_a_big_store_lists_its_newest_runs_first_then_reads_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest PAGE runs are listed before the rest of the store is read; the list holds
    the newest LIST_ROWS shown runs and every marked one (scaled down: 6 runs, 4 and 3)."""
    seed_store(tmp_path / "results")
    monkeypatch.setattr(results_screen, "PAGE", 4)
    monkeypatch.setattr(results_screen, "LIST_ROWS", 3)
    monkeypatch.setattr(results_screen, "REST_AFTER_S", 0.01)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen, table = await results_read(pilot, app, runs=6)
            assert [str(k.value) for k in table.rows] == ["run-new", "run-x8", "run-3"]
            assert screen.sub_title == "6 of 6 runs (newest 3 listed), 0 marked"
            search = screen.query_one("#run-search", Input)
            search.focus()
            await pilot.press(*"run-0", "enter")  # older than the listed: marked, so listed
            await wait_for(pilot, lambda: screen.marked == ["run-0"])
            assert [str(k.value) for k in table.rows][-1] == "run-0"

    run(scenario())


def test_the_run_list_grows_as_the_cursor_nears_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listed runs go into the table FILL_ROWS at a time, the next ones when the cursor
    comes within FILL_MARGIN rows of the end; a run found by its id is listed at once
    (scaled down: 6 runs, 2 at a time, a margin of 1)."""
    seed_store(tmp_path / "results")
    monkeypatch.setattr(results_screen, "FILL_ROWS", 2)
    monkeypatch.setattr(results_screen, "FILL_MARGIN", 1)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen, table = await results_read(pilot, app, runs=6)
            await wait_for(pilot, lambda: table.row_count == 2)
            assert screen.sub_title == "6 of 6 runs, 0 marked"  # all 6 are listed
            table.focus()
            await pilot.press("down")  # on the last row added: the next two follow
            await wait_for(pilot, lambda: table.row_count == 4)
            assert [str(k.value) for k in table.rows][:2] == ["run-new", "run-x8"]
            screen.query_one("#run-search", Input).focus()
            await pilot.press(*"run-0", "enter")  # the oldest: listed and marked at once
            await wait_for(pilot, lambda: screen.marked == ["run-0"])
            assert table.row_count == 6
            assert table.cursor_row == 5

    run(scenario())


def test_the_seeds_table_scrolls_sideways_from_the_keyboard(tmp_path: Path) -> None:
    """At 80 columns a row is cut, not wrapped: tab from the run list reaches the table,
    right scrolls it."""
    seed_store(tmp_path / "results")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            screen = app.screen
            await wait_for(pilot, lambda: bool(screen.query(SeedsTable)))
            seeds = screen.query_one(SeedsTable)
            assert seeds.virtual_size.width > seeds.size.width  # wider than the pane
            assert seeds.virtual_size.height == seeds.row_count + 1  # a line per row
            screen.query_one("#history", DataTable).focus()
            await pilot.press("tab")
            assert app.focused is seeds
            await pilot.press("right", "right", "right")
            await wait_for(pilot, lambda: seeds.scroll_x > 0)

    run(scenario())


def test_smoke_and_capped_runs_say_so_beside_their_status(tmp_path: Path) -> None:
    """Issue 41 point 3: a smoke run and a max_samples run read as plain 'passed' here."""
    records = history()
    records[-2] = records[-2].model_copy(update={"smoke": True})
    records[-1] = records[-1].model_copy(update={"fix_hp": {"max_samples": 256}})
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)
    statuses = {}

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            _, table = await results_read(pilot, app, runs=len(records))
            status = next(
                i for i, c in enumerate(table.ordered_columns) if "status" in str(c.label)
            )
            for key in table.rows:
                statuses[str(key.value)] = str(table.get_row(key)[status])

    run(scenario())
    assert statuses[records[-2].run_id] == "passed smoke"
    assert statuses[records[-1].run_id] == "passed capped"
    assert statuses[records[0].run_id] == "passed"


def test_one_marked_run_with_a_sweep_shows_its_serving_curve(tmp_path: Path) -> None:
    """Issue 43: a run's points as the curve's table, tokens/s per user = 1000 / p90 TPOT
    ('/' where TPOT is 0), under the run marked alone."""
    records = history()
    newest = max(records, key=lambda r: r.started)
    points = [
        {
            "hp": {"concurrency": c},
            "metrics": {
                "output_tokens_per_s": 100.0 * c,
                "tpot_p90_ms": tpot,
                "ttft_p90_ms": 40.0 + c,
                "goodput_ratio": 1.0,
            },
        }
        for c, tpot in ((1, 4.0), (2, 0.0))
    ]
    records = [r.model_copy(update={"points": points}) if r is newest else r for r in records]
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            table = app.screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == len(records))
            await wait_for(pilot, lambda: bool(app.screen.query(SeedsTable)))
            assert "Serving curve" not in seeds_text(app.screen)
            table.focus()
            await pilot.press("space")  # the newest run, first row
            await wait_for(pilot, lambda: "Serving curve" in seeds_text(app.screen))
            rows = [line.strip("│ ").split() for line in seeds_text(app.screen).splitlines()]
            assert [[c for c in r if c != "│"] for r in rows if r[:1] == ["concurrency"]] == [
                ["concurrency", "1", "100.0", "250.0", "41.0", "1.00"],
                ["concurrency", "2", "200.0", "/", "42.0", "1.00"],
            ]

    run(scenario())
