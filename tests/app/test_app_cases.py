"""The Cases screen: tree, marks, detail pane, inline override validation, help, palette."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import FIXTURE_CASES, make_app, plain, run, wait_for
from textual.command import CommandPalette
from textual.widgets import Input, Label, Static, Tree

from tui.app.screens.cases import CasesScreen
from tui.app.screens.dialogs import HelpScreen
from tui.catalog import catalog


def test_tree_lists_cases_and_configs_and_marks_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, CasesScreen)
            case = catalog.load_case("emitter", FIXTURE_CASES)
            node, suites = screen.query_one(Tree).root.children  # the case, then suites
            assert suites is screen.suites_node
            assert [c.data[1][1] for c in node.children] == catalog.config_refs(case)
            await pilot.press("down", "space")
            assert screen.marked == {("emitter", "cpu/CPUx1x1")}
            assert str(node.children[0].label).startswith("[x]")
            await pilot.press("up", "space")  # on the case: all of its configs
            assert screen.marked == {("emitter", ref) for ref in catalog.config_refs(case)}
            await pilot.press("space")
            assert screen.marked == set()
            hosts = screen.query_one("#run-hosts", Static)
            await wait_for(pilot, lambda: "localhost" in plain(hosts))
            info = plain(screen.query_one("#case-info", Static))
            assert "Model    none" in info and "Config   cpu/CPUx1x1" in info

    run(scenario())


@pytest.mark.slow
def test_bad_override_shows_batch_message_and_launches_nothing(tmp_path: Path) -> None:
    case = catalog.load_case("emitter", FIXTURE_CASES)
    config = catalog.load_config(case, "cpu/CPUx1x1")
    with pytest.raises(catalog.CatalogError) as bad:
        catalog.resolve(case, config, catalog.parse_sets(["steps=0"]))

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            await pilot.press("o", *"steps=0")
            error = screen.query_one("#override-error", Label)
            assert plain(error).strip() == str(bad.value)
            assert screen.query_one("#overrides", Input).has_class("invalid")
            await pilot.press("enter")  # launch: refused with the same message
            await pilot.pause(0.2)
            assert app.batches == []
            assert any(str(bad.value) in str(n.message) for n in app._notifications)
            # A good value clears the error and shows as an override in the resolved table.
            await pilot.press("backspace", "7")
            assert plain(error).strip() == ""
            resolved = plain(screen.query_one("#resolved", Static))
            (line,) = [ln for ln in resolved.splitlines() if " steps " in ln]
            assert "7" in line and "override *" in line

    run(scenario())


@pytest.mark.slow
def test_help_lists_binding_ids_and_palette_offers_every_action(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            text = plain(app.screen.query_one(Static))
            ids = ("cases.launch", "cases.suite", "cases.overrides", "go.results", "tree.mark")
            for binding_id in ids:
                assert binding_id in text
            # What the screen is for: its docstring, as one paragraph.
            assert "Cases and their vendor configs. Space marks a config (on a case:" in text
            await pilot.press("escape")
            assert isinstance(app.screen, CasesScreen)
            commands = {c.title for c in app.get_system_commands(app.screen)}
            assert {
                "Launch",
                "Run suite…",
                "Overrides",
                "Hosts",
                "Runs",
                "Results",
                "Help",
            } <= commands
            assert "Mark" in commands
            await pilot.press("ctrl+p")
            assert isinstance(app.screen, CommandPalette)
            await pilot.press(*"Hosts")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.current_mode == "hosts")

    run(scenario())


def test_an_override_that_reads_as_markup_shows_literally(tmp_path: Path) -> None:
    with pytest.raises(catalog.CatalogError) as bad:
        catalog.parse_sets(["[/x]"])

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("o", *"[/x]")
            error = app.screen.query_one("#override-error", Label)
            await wait_for(pilot, lambda: plain(error).strip() == str(bad.value))
            assert "'[/x]'" in str(bad.value)
            await pilot.press("enter")  # launch: refused with the same message
            await pilot.pause(0.2)
            assert app.batches == [] and app.is_running
            assert any(str(bad.value) in str(n.message) for n in app._notifications)

    run(scenario())


def test_help_shows_the_apps_own_keys_before_the_trees(tmp_path: Path) -> None:
    """Issue 29 point 9: `?` listed twenty generic tree keys before Launch and the screens."""

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.press("question_mark")
            lines = plain(app.screen.query_one(Static), width=120).splitlines()
            keys = [ln.split() for ln in lines[lines.index("Keys") + 1 :] if ln.startswith("  ")]
            own = [i for i, words in enumerate(keys) if "." in words[-1]]  # a binding id
            generic = [i for i, words in enumerate(keys) if "." not in words[-1]]
            assert own and generic  # the tree's keys are still listed, after
            assert max(own) < min(generic)
            assert any(words[-1] == "cases.launch" for words in keys[:5])

    run(scenario())
