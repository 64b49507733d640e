"""Suites on the Cases screen (issue 30): pick one and its chips, the runs it starts (those
of ``fleetperf --batch --suite``), and a suite that cannot be read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from app_support import FIXTURE_CASES, LOCAL_INVENTORY, fixed_inventory, plain, run, wait_for
from textual.pilot import Pilot
from textual.widgets import Static, Tree

from tui.app.app import AppConfig, FleetperfApp
from tui.app.screens.cases import CasesScreen
from tui.app.screens.dialogs import ConfirmScreen
from tui.catalog.suites import load_suite
from tui.core import paths
from tui.core.errors import CatalogError

TINY = """\
description: the emitter on this machine, twice
runs:
  - {case: emitter, config: cpu/CPUx1x1}
  - {case: emitter, config: cpu/CPUx1x1}
"""


def suites_app(
    tmp_path: Path, suites_dir: Path, cases_dir: Path = FIXTURE_CASES, inventory: Path | None = None
) -> FleetperfApp:
    inventory = inventory or fixed_inventory(tmp_path)
    config = AppConfig(inventory, tmp_path / "results", tmp_path / "data", cases_dir, suites_dir)
    return FleetperfApp(config)


def tiny_suites(tmp_path: Path) -> Path:
    """``tiny`` (two emitter runs) and ``broken`` (not YAML), for the fixture cases."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "tiny.yaml").write_text(TINY)
    (suites / "broken.yaml").write_text("runs: [{case: emitter\n")
    return suites


async def go_to(pilot: Pilot, data: tuple) -> None:
    """Arrow down the tree to the node holding ``data``, as a person would."""
    tree = pilot.app.screen.query_one(Tree)
    for _ in range(400):
        if tree.cursor_node is not None and tree.cursor_node.data == data:
            return
        await pilot.press("down")
    raise AssertionError(f"no node {data} in the tree")


def test_base_on_cpu_picks_the_runs_batch_mode_would(tmp_path: Path) -> None:
    expected = load_suite("base").pick(["cpu"])

    async def scenario() -> None:
        app = suites_app(tmp_path, paths.SUITES_DIR, paths.CASES_DIR)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, CasesScreen)
            await wait_for(pilot, lambda: "base" in screen.suites)
            await pilot.press("s")  # no suite highlighted: the cursor goes to the suites
            assert screen.query_one(Tree).cursor_node is screen.suites_node
            await go_to(pilot, ("chip", ("base", "cpu/CPU")))
            await pilot.press("space")
            base = screen.suites["base"]
            assert screen.suite_runs(base) == expected
            runs = plain(screen.query_one("#resolved", Static)).splitlines()
            assert [ln.split() for ln in runs if ln.strip().startswith("base-")] == [
                list(pair) for pair in expected
            ]
            command = plain(screen.query_one("#run-hosts", Static), width=200)
            assert "fleetperf --batch --suite base --config cpu/CPU" in command
            await pilot.press("s")  # asks first, naming how many runs
            assert isinstance(app.screen, ConfirmScreen)
            assert f"{len(expected)} run(s) on cpu/CPU?" in app.screen.question
            await pilot.press("n")
            await pilot.pause(0.2)
            assert app.screen is screen and app.batches == []

    run(scenario())


def test_a_suite_that_cannot_be_read_shows_why_and_starts_nothing(tmp_path: Path) -> None:
    suites = tiny_suites(tmp_path)
    # The shipped base suite under other cases (a foreign FLEETPERF_CASES_DIR).
    shutil.copy(paths.SUITES_DIR / "base.yaml", suites / "base.yaml")
    errors = {}
    for name in ("base", "broken"):
        with pytest.raises(CatalogError) as bad:
            load_suite(name, suites, FIXTURE_CASES)
        errors[name] = str(bad.value)
    assert "base-computation" in errors["base"]
    assert all("\n" not in error for error in errors.values())  # one line each

    async def scenario() -> None:
        app = suites_app(tmp_path, suites)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: "tiny" in screen.suites)
            assert sorted(screen.suites) == ["tiny"]
            for name, error in errors.items():
                await go_to(pilot, ("error", error))
                assert str(screen.query_one(Tree).cursor_node.label) == f"{name}  (invalid)"
                info = plain(screen.query_one("#case-info", Static), width=400)
                assert info.strip() == error
                await pilot.press("s")
                await pilot.pause(0.2)
                assert app.screen is screen and app.batches == []
                assert error in [str(n.message) for n in app._notifications]

    run(scenario())


@pytest.mark.slow
def test_a_suite_runs_on_this_machine(tmp_path: Path) -> None:
    """Two emitter runs started from the tiny suite, each with the overrides typed."""
    suites = tiny_suites(tmp_path)
    (tmp_path / "data" / "emitter").mkdir(parents=True)
    (tmp_path / "data" / "emitter" / "marker").write_text("staged\n")
    expected = load_suite("tiny", suites, FIXTURE_CASES).pick([])

    async def scenario() -> None:
        app = suites_app(tmp_path, suites, inventory=LOCAL_INVENTORY)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: "tiny" in screen.suites)
            await pilot.press("o", *"steps=2 interval_s=0.05", "escape")
            await go_to(pilot, ("suite", "tiny"))
            await pilot.press("s", "y")
            await wait_for(pilot, lambda: app.current_mode == "runs" and app.batches, 60)
            (batch,) = app.batches
            assert [(r.plan.spec.case.name, r.plan.spec.config.ref) for r in batch.runs] == expected
            await wait_for(pilot, lambda: batch.done, 120)
            records = batch.wait()
        assert [r.status for r in records] == ["passed", "passed"]
        assert all(r.hp["steps"] == 2 and r.hp["interval_s"] == 0.05 for r in records)

    run(scenario())
