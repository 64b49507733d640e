"""Each screen at a fixed size with fixed data (pytest-textual-snapshot).

Update after a deliberate change with ``pytest tests/app/test_app_snapshots.py --snapshot-update``
and look at the SVGs under tests/__snapshots__/ before committing them."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import fixed_inventory, make_app, plain, seed_store, wait_for
from seed_records import running_record
from test_app_attach import OWNER, now_iso, step_line
from test_app_attach import RUN as ATTACHED
from test_app_dashboard import metric
from test_app_fleet import show_recorded
from test_app_suites import go_to, suites_app, tiny_suites
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tui.app.widgets.hosttable import HostTable
from tui.core import paths
from tui.core.events import HostState, RunFinished, RunStarted
from tui.results.store import ResultStore

RUN = "20261122-070000-emitter-0001"
LONG_REASON = (
    "host node-a: failed: target acc 0.95 not reached in 160 samples (the run was capped:"
    " max_samples=160)"
)


@pytest.fixture(
    params=[(100, 30), pytest.param((80, 24), marks=pytest.mark.slow)], ids=["100x30", "80x24"]
)
def size(request: pytest.FixtureRequest) -> tuple[int, int]:
    """Every screen at a roomy size and at the smallest the app supports (80x24)."""
    return request.param


async def _cases_ready(pilot: Pilot) -> None:
    hosts = pilot.app.screen.query_one("#run-hosts", Static)
    await wait_for(pilot, lambda: "localhost" in plain(hosts))
    await pilot.app.workers.wait_for_complete()  # the suites read


def test_cases_screen(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    app = suites_app(tmp_path, tiny_suites(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=_cases_ready)


def test_cases_screen_light_theme_with_a_bad_override(
    snap_compare, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = suites_app(tmp_path, tiny_suites(tmp_path))

    async def before(pilot: Pilot) -> None:
        pilot.app.theme = "textual-light"
        await _cases_ready(pilot)
        await pilot.press("down", "space", "o", *"steps=0 interval_s=0.5")
        await pilot.press("home")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_suite_on_the_cases_screen(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    """The tiny suite with its one chip marked: its runs and the batch command; above it
    a suite that cannot be read."""
    app = suites_app(tmp_path, tiny_suites(tmp_path))

    async def before(pilot: Pilot) -> None:
        await _cases_ready(pilot)
        await go_to(pilot, ("chip", ("tiny", "cpu/CPU")))
        await pilot.press("space")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_hosts_screen(
    snap_compare, tmp_path: Path, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the subtitle names the inventory relative to it
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await pilot.press("2")
        table = pilot.app.screen.query_one("#hosts", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        await wait_for(
            pilot, lambda: str(table.get_cell("localhost", "reachable")) == "yes", timeout=120
        )

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_runs_screen(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        feed = pilot.app.feed
        hosts = ["node-a", "node-b"]
        feed.add_run(RUN, "emitter", "cpu/CPUx2x1", hosts, {"max_samples": 400})
        feed.push(RunStarted(RUN, "emitter", "cpu/CPUx2x1", hosts, 0.0))
        for step in range(1, 41):  # one chart point per step: a fixed series
            for host in hosts:
                feed.push(metric(host, step, 1000.0 + step, loss=2.0 / step))
            feed.take()
        feed.push(HostState(RUN, "node-b", "failed", "host node-b: failed: out of memory"))
        feed.push(RunFinished(RUN, "failed", "host node-b: failed: out of memory", 1050.0))
        await pilot.press("3")
        table = pilot.app.screen.query_one("#host-table", HostTable)
        await wait_for(pilot, lambda: str(table.get_cell("node-b", "state")) == "failed")
        await pilot.pause(0.6)

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_results_screen_comparing_two_runs(
    snap_compare, tmp_path: Path, size: tuple[int, int]
) -> None:
    seed_store(tmp_path / "results")
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await pilot.press("4")
        table = pilot.app.screen.query_one("#history", DataTable)
        await wait_for(pilot, lambda: table.row_count == 6)
        table.focus()
        await pilot.press("space", "down", "down", "space", "d")

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.fixture(params=[(80, 24), (120, 40)], ids=["80x24", "120x40"])
def issue41_size(request: pytest.FixtureRequest) -> tuple[int, int]:
    """The two sizes issue 41 tried the app at."""
    return request.param


def test_hosts_screen_with_an_unreachable_host(
    snap_compare, tmp_path: Path, issue41_size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 point 7: the unreachable reason pushed chip, devices and image off the
    screen; now it is the last column, and whole under the table."""
    monkeypatch.chdir(tmp_path)
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path, unreachable=True))

    async def before(pilot: Pilot) -> None:
        await pilot.press("2")
        table = pilot.app.screen.query_one("#hosts", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2)
        await wait_for(
            pilot, lambda: str(table.get_cell("ghost", "reachable")) == "no", timeout=120
        )
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=issue41_size, run_before=before)


def test_cases_screen_a_capped_run_of_a_case_with_a_target(
    snap_compare, tmp_path: Path, issue41_size: tuple[int, int]
) -> None:
    """Issue 41 points 4 and 5: the config's own target, the Smoke field, and the note that
    a capped run is still judged by that target."""
    app = suites_app(tmp_path, tiny_suites(tmp_path), paths.CASES_DIR)

    async def before(pilot: Pilot) -> None:
        await go_to(pilot, ("config", ("distilbert-pytorch", "cpu/CPUx1x1")))
        await _cases_ready(pilot)
        await pilot.press("o", *"max_samples=256")
        await pilot.press("home")

    assert snap_compare(app, terminal_size=issue41_size, run_before=before)


def test_cases_by_family_with_the_base_cases_open(
    snap_compare, tmp_path: Path, issue41_size: tuple[int, int]
) -> None:
    """Issue 42: the shipped cases by family, base-computation open (the last used), its
    longest config name (iluvatar/BI-V100x1x8-bf16) whole at 80 columns."""
    app = suites_app(tmp_path, paths.SUITES_DIR, paths.CASES_DIR)

    async def before(pilot: Pilot) -> None:
        await _cases_ready(pilot)
        screen = pilot.app.screen
        screen._unfold(screen.case_nodes["base-computation"])
        # On a cpu config: this machine's hosts (an iluvatar one names the inventory's path).
        await go_to(pilot, ("config", ("base-computation", "cpu/CPUx1x1-bf16")))

    assert snap_compare(app, terminal_size=issue41_size, run_before=before)


def test_fleet_screen_with_a_recorded_qualification(
    snap_compare, tmp_path: Path, issue41_size: tuple[int, int]
) -> None:
    """Issue 42: four hosts judged (node3 flagged, node2 inconclusive while busy, every
    link of node4 slow): each host's state, ratio and verdict per metric, the heat map."""
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
    assert snap_compare(app, terminal_size=issue41_size, run_before=show_recorded)


def test_runs_screen_another_controllers_run_that_failed(
    snap_compare, tmp_path: Path, issue41_size: tuple[int, int]
) -> None:
    """Issue 41 point 7: at 120 columns the status line cut the reason and dropped a
    followed run's id; now it wraps, the id and controller before the reason."""
    results = tmp_path / "results"
    events = results / "runs" / ATTACHED / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_text(step_line(1) + step_line(2))
    record = running_record(ATTACHED, OWNER, events.parent, hp={"max_samples": 80})
    store = ResultStore(results / "fleetperf.sqlite")
    store.add(record.model_copy(update={"started": now_iso()}))
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await pilot.press("3")
        table = pilot.app.screen.query_one("#host-table", HostTable)
        await wait_for(pilot, lambda: "node-a" in table.rows)  # the run's first lines read
        await wait_for(pilot, lambda: str(table.get_cell("node-a", "step")) == "2")
        store.add(record.model_copy(update={"status": "failed", "error": LONG_REASON}))
        status = pilot.app.screen.query_one("#run-status")
        await wait_for(pilot, lambda: plain(status).startswith("[failed]"))
        await pilot.press("c")  # no charts: their points depend on how many ticks it ran
        await pilot.pause(0.6)

    try:
        assert snap_compare(app, terminal_size=issue41_size, run_before=before)
    finally:
        store.close()
