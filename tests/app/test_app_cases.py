"""The Cases screen: tree, marks, detail pane, inline override validation, help, palette."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest
from app_support import FIXTURE_CASES, make_app, plain, run, wait_for
from seed_records import inference
from test_app_suites import go_to
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, Label, Static, Tree
from textual.widgets._footer import FooterKey

from tui.app.app import FleetperfApp
from tui.app.screens.cases import CasesScreen
from tui.app.screens.dialogs import HelpScreen
from tui.app.widgets.footer import Footer
from tui.catalog import catalog
from tui.core import paths
from tui.results.store import ResultStore

AQUILA = "aquila_33b-inference"


def test_tree_lists_cases_and_configs_and_marks_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, CasesScreen)
            case = catalog.load_case("emitter", FIXTURE_CASES)
            family, suites = screen.query_one(Tree).root.children  # its family, then suites
            assert suites is screen.suites_node
            assert str(family.label) == "training (1)"
            (node,) = family.children
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


def test_the_collector_is_on_once_the_first_frame_is_drawn(tmp_path: Path) -> None:
    """The fleetperf command imports with the collector off (tui/launch.py): the app turns
    it on with its first frame, or nothing it made would ever be collected."""

    async def scenario() -> None:
        gc.disable()
        try:
            async with make_app(tmp_path).run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                assert gc.isenabled()
        finally:
            gc.enable()

    run(scenario())


def test_the_footer_follows_the_keys_and_is_rebuilt_only_when_they_change(
    tmp_path: Path,
) -> None:
    """tui/app/widgets/footer.py: a bindings signal that changes no key shown leaves the
    footer's key widgets as they are; a field's focus adds escape (Leave field)."""

    async def scenario() -> None:
        async with make_app(tmp_path).run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            footer = pilot.app.screen.query_one(Footer)
            widgets = list(footer.query(FooterKey))
            assert widgets and "escape" not in [k.key for k in widgets]
            pilot.app.screen.refresh_bindings()
            await pilot.pause()
            assert list(footer.query(FooterKey)) == widgets  # the same ones: not rebuilt
            await pilot.press("o")  # the overrides field
            await wait_for(pilot, lambda: "escape" in [k.key for k in footer.query(FooterKey)])

    run(scenario())


def test_cases_by_family_folded_but_for_the_last_used(tmp_path: Path) -> None:
    """Issue 42: the shipped cases by family, every case folded but the store's newest
    run's (the inference case here): the suites in sight below, at 120x40 and 80x24; and
    at 80 columns the longest config name whole."""
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        store.add(inference("run-inf"))

    async def scenario(size: tuple[int, int]) -> None:
        app = make_app(tmp_path, paths.CASES_DIR)
        async with app.run_test(size=size) as pilot:
            screen = app.screen
            tree = screen.query_one(Tree)
            await wait_for(pilot, lambda: tree.cursor_node is screen.case_nodes.get(AQUILA))
            families = [str(n.label) for n in tree.root.children]
            assert families == ["training (4)", "inference (4)", "base (4)", "Suites"]
            opened = [name for name, n in screen.case_nodes.items() if n.is_expanded]
            assert opened == [AQUILA]
            assert [n.is_expanded for n in tree.root.children[:3]] == [False, True, False]
            assert tree.root.children[3].line < size[1] - 3  # the suites above the fold
            screen._unfold(screen.case_nodes["base-computation"])
            await pilot.pause()
            # Nothing cut: the widest line fits the tree (iluvatar/BI-V100x1x8-bf16).
            assert tree.virtual_size.width <= tree.scrollable_content_region.width

    run(scenario((120, 40)))
    run(scenario((80, 24)))


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


def footer_keys(app: FleetperfApp) -> dict[str, str]:
    """The footer's keys and their descriptions, as drawn."""
    return {k.key: k.description for k in app.screen.query(FooterKey)}


@pytest.mark.slow
def test_screen_keys_after_a_launch_are_not_typed_into_the_overrides(tmp_path: Path) -> None:
    """Issue 41 point 1: after a launch, 1 came back to Cases with the overrides field
    focused; 4 then d went into it (steps=24d) instead of opening Results."""
    (tmp_path / "data" / "emitter").mkdir(parents=True)
    (tmp_path / "data" / "emitter" / "marker").write_text("staged\n")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            cases = app.screen
            await pilot.press("o", *"steps=2 interval_s=0.05", "enter")
            await wait_for(pilot, lambda: app.current_mode == "runs" and app.batches, 60)
            await pilot.press("1")
            assert app.screen is cases and isinstance(cases.focused, Tree)
            assert "l" in footer_keys(app) and "escape" not in footer_keys(app)
            await pilot.press("4", "d")
            assert app.current_mode == "results"
            assert cases.query_one("#overrides", Input).value == "steps=2 interval_s=0.05"
            (batch,) = app.batches
            await wait_for(pilot, lambda: batch.done, 120)
        assert [r.status for r in batch.wait()] == ["passed"]

    run(scenario())


def test_escape_leaves_a_field_and_the_footer_says_so(tmp_path: Path) -> None:
    """Issue 41 point 1: in the overrides field the footer showed only ^q Quit."""

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            cases = app.screen
            await pilot.press("o", *"steps=3")
            await pilot.pause(0.1)
            assert isinstance(cases.focused, Input)
            assert footer_keys(app).get("escape") == "Leave field"
            await pilot.press("escape", "2")
            assert app.current_mode == "hosts"
            assert cases.query_one("#overrides", Input).value == "steps=3"
            await pilot.press("4")
            results = app.screen
            await pilot.press("tab", "tab", "tab", "tab")  # the filters, then the run id field
            assert results.focused is results.query_one("#run-search", Input)
            assert footer_keys(app).get("escape") == "Leave field"
            await pilot.press("escape", "1")
            assert app.screen is cases

    run(scenario())


def distilbert_app(tmp_path: Path) -> FleetperfApp:
    """The shipped cases (no data needed to show them): distilbert's cpu config sets its own
    target (target_acc 0.95 over the case's 0.91) and the case declares a smoke run."""
    return make_app(tmp_path, cases_dir=paths.CASES_DIR)


async def show_config(pilot: Pilot, case: str, ref: str) -> CasesScreen:
    screen = pilot.app.screen
    await go_to(pilot, ("config", (case, ref)))
    return screen


def test_the_target_shown_is_the_configs_resolved_one(tmp_path: Path) -> None:
    """Issue 41 point 5: the pane said acc >= 0.91 (the case's), the run failed with
    "target acc 0.95 not reached" (the cpu config's)."""
    case = catalog.load_case("distilbert-pytorch")
    spec = catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"))
    assert case.target_value(spec.hp) == 0.95 != case.target.value

    async def scenario() -> None:
        app = distilbert_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await show_config(pilot, "distilbert-pytorch", "cpu/CPUx1x1")
            info = screen.query_one("#case-info", Static)
            assert "Target   acc >= 0.95" in plain(info)
            await pilot.press("o", *"target_acc=0.97")
            assert "Target   acc >= 0.97" in plain(info)
            await pilot.press("escape", "m")  # a smoke run is not judged
            assert "Target   none (smoke: not judged)" in plain(info)

    run(scenario())


def test_smoke_is_offered_and_a_capped_run_is_said_to_be_judged(tmp_path: Path) -> None:
    """Issue 41 point 4: the hint max_samples=256 led to a failed run (judged by its
    target), and the app had no smoke run."""
    case = catalog.load_case("distilbert-pytorch")
    smoke = case.smoke.hp

    async def scenario() -> None:
        app = distilbert_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await show_config(pilot, "distilbert-pytorch", "cpu/CPUx1x1")
            field = screen.query_one("#overrides", Input)
            assert "max_samples" not in str(field.placeholder)
            await pilot.press("o", *"max_samples=256")
            note = plain(screen.query_one("#override-error", Label))
            assert "still judged (acc >= 0.95)" in note and "Smoke (m)" in note
            await pilot.press("escape", "m")
            assert screen.smoke and plain(screen.query_one("#override-error", Label)).strip() == ""
            resolved = plain(screen.query_one("#resolved", Static))
            rows = {ln.split()[0]: ln.split()[1:] for ln in resolved.splitlines() if ln.strip()}
            assert rows["max_samples"] == ["256", "override", "*"]  # --set over smoke
            assert rows["max_epoch"] == [str(smoke["max_epoch"]), "smoke", "*"]
            await pilot.press("m")
            assert not screen.smoke

    run(scenario())


@pytest.mark.slow
def test_a_smoke_run_launched_from_the_app(tmp_path: Path) -> None:
    """Smoke (m) launches what --smoke launches: the case's smoke budget, no verdict, the
    record marked smoke (here the emitter with a smoke run declared)."""
    cases = tmp_path / "cases"
    shutil.copytree(FIXTURE_CASES / "emitter", cases / "emitter")
    with (cases / "emitter" / "case.yaml").open("a") as f:
        f.write("smoke:\n  hp: {steps: 2, interval_s: 0.05}\n")
    (tmp_path / "data" / "emitter").mkdir(parents=True)
    (tmp_path / "data" / "emitter" / "marker").write_text("staged\n")

    async def scenario() -> None:
        app = make_app(tmp_path, cases_dir=cases)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("m", "l")
            await wait_for(pilot, lambda: app.current_mode == "runs" and app.batches, 60)
            (batch,) = app.batches
            await wait_for(pilot, lambda: batch.done, 120)
        (record,) = batch.wait()
        assert record.smoke and record.status == "passed" and record.hp["steps"] == 2

    run(scenario())
