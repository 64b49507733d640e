"""Cases: pick cases and vendor configs, see what they resolve to, edit overrides, launch;
pick a suite and its chips and run it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Checkbox, Header, Input, Label, Static, Tree
from textual.widgets.tree import TreeNode

from tui.app.safe import literal
from tui.app.screens.dialogs import ConfirmScreen
from tui.app.threads import draw_from_thread
from tui.app.widgets.casedetail import (
    Pick,
    batch_command,
    capped_note,
    case_info,
    family_table,
    resolved_table,
    runs_table,
    suite_info,
    suites_table,
)
from tui.app.widgets.casetree import GUIDE, Chip, add_cases, add_suites, pick_label
from tui.app.widgets.footer import Footer
from tui.app.widgets.picktree import PickTree
from tui.catalog import catalog
from tui.catalog.suites import Suite, load_suite, suite_names
from tui.core.errors import UserInputError

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp


class CasesScreen(Screen[None]):
    """Cases and their vendor configs. Space marks a config (on a case: all of its configs);
    the detail pane shows the highlighted one resolved with your overrides, and the target
    it is judged by. Overrides are KEY=VALUE pairs separated by spaces, checked as --set is
    in batch mode. Launch (l, or enter in the overrides field) runs every marked config (or
    the highlighted one) on the inventory's hosts; enter on the tree folds a case; escape
    leaves a field. Smoke (m) makes each run the case's short smoke run (--smoke): its own
    small budget, no target, no verdict; a run capped without it (max_samples=N) is still
    judged by its target. Suites, under the cases, are named lists of case x config runs
    (docs/suites.md): space marks a suite's chips, as --config picks them (none marked:
    every run); Run suite (s) asks, then starts the runs of the highlighted suite that
    fleetperf --batch --suite would, with the overrides, repeat and smoke."""

    TITLE = "Cases"
    BINDINGS = [
        Binding("l", "launch", "Launch", id="cases.launch"),
        Binding("s", "run_suite", "Run suite…", id="cases.suite"),
        # Not in the footer (the field's title names its key): at 80 columns the footer
        # then still holds every key of the screen and the screens' group whole.
        Binding("o", "edit_overrides", "Overrides", show=False, id="cases.overrides"),
        Binding("m", "toggle_smoke", "Smoke", show=False, id="cases.smoke"),
        # Shown only while a field has the focus: there the screen's letter keys type.
        Binding("escape", "focus_tree", "Leave field", id="cases.tree"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.marked: set[Pick] = set()
        self.current: Pick | None = None
        self.suites: dict[str, Suite] = {}  # those that loaded, by name
        self.chips: set[Chip] = set()  # marked chips
        self.suite: str | None = None  # the highlighted suite (or one of its chips)
        self.suites_node: TreeNode | None = None
        self.case_nodes: dict[str, TreeNode] = {}  # by case name

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield PickTree("cases", id="case-tree")
            with Vertical(id="case-detail"):
                with VerticalScroll(id="detail-scroll"):
                    yield Static(id="case-info")
                    yield Static(id="resolved")
                    yield Static(id="run-hosts")
                with Horizontal(classes="row"):
                    # No max_samples in the example: a capped run is still judged by its
                    # target, and fails short of it; Smoke is the short check.
                    yield Input(placeholder="KEY=VALUE ... as --set", id="overrides")
                    yield Input("1", id="repeat", type="integer", classes="short")
                    yield Checkbox("Smoke (m)", id="smoke", compact=True)
                yield Label("", id="override-error")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#overrides", Input).border_title = "Overrides (o)"
        self.query_one("#repeat", Input).border_title = "Repeat"
        tree = self.query_one(Tree)
        tree.show_root = False
        tree.guide_depth = GUIDE
        self.case_nodes = add_cases(tree, self.app.config.cases_dir, self.marked)
        self.suites_node = tree.root.add(
            literal("Suites", style="bold"), data=("suites", None), expand=True
        )
        self.suites_node.add_leaf(literal("reading...", style="dim"))
        # Once the first frame is drawn: a thread holds the interpreter half of the time,
        # and begun now it slowed that frame by 0.2 s.
        self.call_after_refresh(self._read_suites)
        self.call_after_refresh(self._read_last_used)
        tree.focus()
        first = next(iter(self.case_nodes.values()), None)
        if first is not None:
            self._unfold(first)

    def _unfold(self, node: TreeNode) -> None:
        """Open ``node`` (a case) and its family, fold every other case, put the cursor on
        it and show its first config."""
        for other in self.case_nodes.values():
            if other is not node:
                other.collapse()
        for family in self.query_one(Tree).root.children:
            if family.data and family.data[0] == "family" and family is not node.parent:
                family.collapse()
        assert node.parent is not None
        node.parent.expand()
        node.expand()
        tree = self.query_one(Tree)
        # Once its lines are laid out again; the cursor's move shows its first config
        # (_highlighted): the detail pane is not drawn twice, nor in the first frame.
        tree.call_after_refresh(tree.move_cursor, node)

    @work(thread=True, exclusive=True, group="last-used")
    def _read_last_used(self) -> None:
        """The case of the store's newest run: the one to open, if the cursor has not
        moved from the first case meanwhile."""
        session = self.app.session
        try:
            newest = session.store.list(limit=1) if session.has_store() else []
        except UserInputError:  # an unreadable store: Results says so; here nothing opens
            return
        if newest:
            draw_from_thread(self, self._open_last_used, newest[0].case)

    def _open_last_used(self, case_name: str) -> None:
        node = self.case_nodes.get(case_name)
        first = next(iter(self.case_nodes.values()), None)
        if node is not None and self.query_one(Tree).cursor_node in (None, first):
            self._unfold(node)

    @work(thread=True, exclusive=True, group="suites")
    def _read_suites(self) -> None:
        """Every suite, read as --batch --suite reads it (each of its cases and configs
        loaded): a few hundred ms for the shipped ones, so off the event loop."""
        config = self.app.config
        loaded: list[tuple[str, Suite | str]] = []  # a suite, or why it cannot be read
        for name in suite_names(config.suites_dir):
            try:
                loaded.append((name, load_suite(name, config.suites_dir, config.cases_dir)))
            except UserInputError as exc:
                loaded.append((name, str(exc)))
        draw_from_thread(self, self._add_suites, loaded)

    def _add_suites(self, loaded: list[tuple[str, Suite | str]]) -> None:
        assert self.suites_node is not None  # added on mount, before the worker starts
        self.suites = add_suites(self.suites_node, loaded, self.chips, self.app.config.suites_dir)

    # -- selection ------------------------------------------------------------------

    def _leaves(self, node: TreeNode) -> list[TreeNode]:
        """What space marks on ``node``: itself (a config, a chip) or its configs or chips."""
        if node.data and node.data[0] in ("config", "chip"):
            return [node]
        return [c for c in node.children if c.data and c.data[0] in ("config", "chip")]

    def action_toggle(self) -> None:
        node = self.query_one(Tree).cursor_node
        leaves = self._leaves(node) if node is not None else []
        if not leaves:
            return
        kind = leaves[0].data[0]  # a case has configs, a suite chips
        marks = self.chips if kind == "chip" else self.marked
        picks = [leaf.data[1] for leaf in leaves]
        on_all = all(p in marks for p in picks)
        for leaf, pick in zip(leaves, picks, strict=True):
            (marks.discard if on_all else marks.add)(pick)
            leaf.set_label(pick_label(pick, marks))
        if kind == "chip":
            self.refresh_detail()  # the suite's runs on the chips now marked
        else:
            self.sub_title = f"{len(self.marked)} marked"

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        kind, value = event.node.data or (None, None)
        self.suite = None
        if kind == "config":
            self.current = value
        elif kind == "case":
            configs = self._leaves(event.node)
            self.current = configs[0].data[1] if configs else None
        elif kind in ("suite", "chip"):
            self.current = None
            self.suite = value if kind == "suite" else value[0]
        elif kind == "family":
            self.current = None
            self._show(family_table(value, [n.data[1] for n in event.node.children]))
            return
        elif kind == "suites":
            self.current = None
            self._show(suites_table(list(self.suites.values())))
            return
        elif kind == "error":
            self.current = None
            self._show(literal(value, style="red"))
            return
        self.refresh_detail()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_tree":  # escape: in the footer and live only in a field
            return isinstance(self.focused, Input | Checkbox)
        return True

    def action_focus_tree(self) -> None:
        self.query_one(Tree).focus()

    def action_toggle_smoke(self) -> None:
        self.query_one("#smoke", Checkbox).toggle()

    def action_edit_overrides(self) -> None:
        self.query_one("#overrides", Input).focus()

    # -- detail -----------------------------------------------------------------------

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _field_changed(self) -> None:
        self.refresh_detail()

    @property
    def smoke(self) -> bool:
        return self.query_one("#smoke", Checkbox).value

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_launch()

    def _sets(self) -> dict:
        """The overrides typed so far; CatalogError with batch mode's message if bad."""
        return catalog.parse_sets(self.query_one("#overrides", Input).value.split())

    def _show(
        self, info: Text | Table, resolved: Text | Table | str = "", hosts: Text | str = ""
    ) -> None:
        self.query_one("#case-info", Static).update(info)
        self.query_one("#resolved", Static).update(resolved)
        self.query_one("#run-hosts", Static).update(hosts)

    def _override_error(self, exc: UserInputError | None, note: str = "") -> None:
        """Batch mode's message for bad overrides under the field, else ``note``."""
        label = self.query_one("#override-error", Label)
        label.update(literal(exc) if exc else literal(note))
        label.set_class(exc is not None, "error")
        label.set_class(exc is None and bool(note), "warning")
        self.query_one("#overrides", Input).set_class(exc is not None, "invalid")

    def refresh_detail(self) -> None:
        if self.suite is not None:
            self._show_suite(self.suites[self.suite])
            return
        if self.current is None:
            return
        case_name, ref = self.current
        cases_dir = self.app.config.cases_dir
        try:
            case = catalog.load_case(case_name, cases_dir)
            config = catalog.load_config(case, ref)
        except UserInputError as exc:
            self.query_one("#case-info", Static).update(literal(exc, style="red"))
            return
        try:
            sets = self._sets()
            spec = catalog.resolve(case, config, sets, self.smoke)
        except UserInputError as exc:  # shown as the plain config, the error under the field
            self._override_error(exc)
            spec, sets = catalog.resolve(case, config), {}
        else:
            self._override_error(None, capped_note(spec, sets))
        self.query_one("#case-info", Static).update(case_info(spec))
        self.query_one("#resolved", Static).update(resolved_table(spec, sets))
        self._show_hosts(spec)

    def _show_hosts(self, spec: catalog.RunSpec) -> None:
        label = self.query_one("#run-hosts", Static)
        session = self.app.session
        if not session.inventory_read:
            label.update("Hosts: reading the inventory...")
            self._read_inventory()
            return
        try:
            hosts = session.hosts_for(spec)
        except UserInputError as exc:
            label.update(literal(f"Hosts: none: {exc}", style="red"))
            return
        label.update(literal(f"Hosts: {', '.join(hosts)}  ({session.inventory.name})"))

    @work(thread=True, exclusive=True, group="inventory")
    def _read_inventory(self) -> None:
        try:
            self.app.session.read_inventory()
        except UserInputError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
            return
        draw_from_thread(self, self.refresh_detail)

    def marked_chips(self, suite: Suite) -> list[str]:
        return sorted(chip for name, chip in self.chips if name == suite.name)

    def suite_runs(self, suite: Suite) -> list[Pick]:
        """The runs Run suite starts: the suite's on its marked chips (none: all)."""
        return suite.pick(self.marked_chips(suite))

    def _show_suite(self, suite: Suite) -> None:
        try:
            self._sets()
        except UserInputError as exc:
            self._override_error(exc)
        else:
            self._override_error(None)
        chips = self.marked_chips(suite)
        runs = self.suite_runs(suite)
        self._show(
            suite_info(suite, chips, len(runs)),
            runs_table(runs),
            literal(f"Batch mode: {self._command(suite, chips)}"),
        )

    def _command(self, suite: Suite, chips: list[str]) -> str:
        """The --batch command line that starts the same runs."""
        overrides = self.query_one("#overrides", Input).value.split()
        repeat = self.query_one("#repeat", Input).value
        return batch_command(suite, chips, overrides, repeat, self.smoke)

    # -- launch -----------------------------------------------------------------------

    def action_launch(self) -> None:
        picks = sorted(self.marked) or ([self.current] if self.current else [])
        if not picks:
            on_suite = "On a suite, s (Run suite…) starts its runs."
            hint = on_suite if self.suite else "Mark a config first (space)."
            self.notify(hint, severity="warning")
            return
        checked = self._checked(picks)
        if checked is not None:
            self._launch(picks, *checked, smoke=self.smoke)

    def action_run_suite(self) -> None:
        tree = self.query_one(Tree)
        node = tree.cursor_node
        if node is not None and node.parent is self.suites_node and node.data:
            kind, error = node.data
            if kind == "error":  # a suite that cannot be read
                self.notify(error, title="Not launched", severity="error", timeout=10)
                return
        if self.suite is None:
            tree.move_cursor(self.suites_node)
            tree.focus()
            self.notify("Pick a suite under Suites (space marks its chips), then s again.")
            return
        suite = self.suites[self.suite]
        runs = self.suite_runs(suite)
        checked = self._checked(runs)
        if checked is None:
            return
        sets, repeat = checked
        chips = self.marked_chips(suite)
        question = (
            f"Start suite {suite.name}: {len(runs) * repeat} run(s)"
            f" on {', '.join(chips or suite.chips)}?"
            f" The same runs as: {self._command(suite, chips)}"
        )

        smoke = self.smoke

        def answer(yes: bool | None) -> None:
            if yes:
                self._launch(runs, sets, repeat, smoke=smoke)

        self.app.push_screen(ConfirmScreen(question, yes="Start", no="Cancel"), answer)

    def _checked(self, picks: list[Pick]) -> tuple[dict, int] | None:
        """The overrides and repeat, checked with every run as plan() checks them, before
        any worker; None (and the message shown) if refused."""
        try:
            sets = self._sets()
            repeat = int(self.query_one("#repeat", Input).value or "0")
            for case_name, ref in picks:
                case = catalog.load_case(case_name, self.app.config.cases_dir)
                catalog.resolve(case, catalog.load_config(case, ref), sets, self.smoke)
        except UserInputError as exc:
            self.notify(str(exc), title="Not launched", severity="error")
            return None
        return sets, repeat

    @work(thread=True, exclusive=True, group="launch")
    def _launch(self, picks: list[Pick], sets: dict, repeat: int, smoke: bool) -> None:
        try:
            plans = self.app.session.plan(picks, sets, repeat, smoke)
        except UserInputError as exc:
            draw_from_thread(
                self,
                self.notify,
                str(exc),
                title="Not launched",
                severity="error",
                timeout=10,
            )
            return
        self.app.launch(plans)
        # Back on this screen, keys are screen keys again, not text in a field (issue 41).
        draw_from_thread(self, self.action_focus_tree)
        draw_from_thread(self, self.app.switch_mode, "runs")
