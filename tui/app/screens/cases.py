"""Cases: pick cases and vendor configs, see what they resolve to, edit overrides, launch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label, Static, Tree
from textual.widgets.tree import TreeNode

from tui.app.safe import literal
from tui.app.widgets.picktree import PickTree
from tui.catalog import catalog
from tui.core.errors import UserInputError

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

Pick = tuple[str, str]  # (case, vendor/CHIPxNxP)


class CasesScreen(Screen[None]):
    """Cases and their vendor configs. Space marks a config (on a case: all of its configs);
    the detail pane shows the highlighted one resolved with your overrides. Overrides are
    KEY=VALUE pairs separated by spaces, checked as --set is in batch mode. Launch (l, or
    enter in the overrides field) runs every marked config (or the highlighted one) on the
    inventory's hosts; enter on the tree folds a case."""

    TITLE = "Cases"
    BINDINGS = [
        Binding("l", "launch", "Launch", id="cases.launch"),
        Binding("o", "edit_overrides", "Overrides", id="cases.overrides"),
        Binding("escape", "focus_tree", "Back to tree", show=False, id="cases.tree"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.marked: set[Pick] = set()
        self.current: Pick | None = None

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
                    yield Input(placeholder="KEY=VALUE ... e.g. max_samples=256", id="overrides")
                    yield Input("1", id="repeat", type="integer", classes="short")
                yield Label("", id="override-error")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#overrides", Input).border_title = "Overrides (o)"
        self.query_one("#repeat", Input).border_title = "Repeat"
        tree = self.query_one(Tree)
        tree.show_root = False
        cases_dir = self.app.config.cases_dir
        for name in catalog.case_names(cases_dir):
            try:
                case = catalog.load_case(name, cases_dir)
            except UserInputError as exc:
                tree.root.add_leaf(
                    literal(f"{name}  (invalid)", style="red"), data=("error", str(exc))
                )
                continue
            node = tree.root.add(literal(name), data=("case", name), expand=True)
            for ref in catalog.config_refs(case):
                node.add_leaf(self._label((name, ref)), data=("config", (name, ref)))
        tree.focus()
        first = next((n for n in tree.root.children if n.data and n.data[0] == "case"), None)
        if first is not None and first.children:
            tree.move_cursor(first)
            self.current = first.children[0].data[1]
            self.refresh_detail()

    # -- selection ------------------------------------------------------------------

    def _label(self, pick: Pick) -> Text:
        mark = "[x]" if pick in self.marked else "[ ]"
        return literal(f"{mark} {pick[1]}", style="bold" if pick in self.marked else "")

    def _configs(self, node: TreeNode) -> list[TreeNode]:
        kind, _ = node.data or (None, None)
        if kind == "config":
            return [node]
        return [c for c in node.children if c.data and c.data[0] == "config"]

    def action_toggle(self) -> None:
        node = self.query_one(Tree).cursor_node
        if node is None:
            return
        leaves = self._configs(node)
        picks = [leaf.data[1] for leaf in leaves]
        on_all = all(p in self.marked for p in picks)
        for leaf, pick in zip(leaves, picks, strict=True):
            (self.marked.discard if on_all else self.marked.add)(pick)
            leaf.set_label(self._label(pick))
        self.sub_title = f"{len(self.marked)} marked"

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        kind, value = event.node.data or (None, None)
        if kind == "config":
            self.current = value
        elif kind == "case":
            configs = self._configs(event.node)
            self.current = configs[0].data[1] if configs else None
        elif kind == "error":
            self.current = None
            self.query_one("#case-info", Static).update(literal(value, style="red"))
            return
        self.refresh_detail()

    def action_focus_tree(self) -> None:
        self.query_one(Tree).focus()

    def action_edit_overrides(self) -> None:
        self.query_one("#overrides", Input).focus()

    # -- detail -----------------------------------------------------------------------

    @on(Input.Changed, "#overrides")
    def _overrides_changed(self) -> None:
        self.refresh_detail()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_launch()

    def _sets(self) -> dict:
        """The overrides typed so far; CatalogError with batch mode's message if bad."""
        return catalog.parse_sets(self.query_one("#overrides", Input).value.split())

    def refresh_detail(self) -> None:
        error = self.query_one("#override-error", Label)
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
        self.query_one("#case-info", Static).update(_case_info(case, config))
        try:
            sets = self._sets()
            spec = catalog.resolve(case, config, sets)
        except UserInputError as exc:
            error.update(literal(exc))
            error.add_class("error")
            self.query_one("#overrides", Input).add_class("invalid")
            spec, sets = catalog.resolve(case, config), {}
        else:
            error.update("")
            error.remove_class("error")
            self.query_one("#overrides", Input).remove_class("invalid")
        self.query_one("#resolved", Static).update(_resolved(spec, config, sets))
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
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.app.call_from_thread(self.refresh_detail)

    # -- launch -----------------------------------------------------------------------

    def action_launch(self) -> None:
        picks = sorted(self.marked) or ([self.current] if self.current else [])
        if not picks:
            self.notify("Mark a config first (space).", severity="warning")
            return
        try:
            sets = self._sets()
            repeat = int(self.query_one("#repeat", Input).value or "0")
            for case_name, ref in picks:  # the same checks as plan(), before any worker
                case = catalog.load_case(case_name, self.app.config.cases_dir)
                catalog.resolve(case, catalog.load_config(case, ref), sets)
        except UserInputError as exc:
            self.notify(str(exc), title="Not launched", severity="error")
            return
        self._launch(picks, sets, repeat)

    @work(thread=True, exclusive=True, group="launch")
    def _launch(self, picks: list[Pick], sets: dict, repeat: int) -> None:
        try:
            plans = self.app.session.plan(picks, sets, repeat)
        except UserInputError as exc:
            self.app.call_from_thread(
                self.notify,
                str(exc),
                title="Not launched",
                severity="error",
                timeout=10,
            )
            return
        self.app.launch(plans)
        self.app.call_from_thread(self.app.switch_mode, "runs")


def _case_info(case: catalog.CaseFile, config: catalog.VendorConfig) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    target = f"{case.target.metric} >= {case.target.value:g}" if case.target else "none"
    for key, value in (
        ("Case", case.name),
        ("Model", case.model),
        ("Dataset", case.dataset),
        ("Task", case.task if case.kind in case.task else f"{case.task} ({case.kind})"),
        ("Target", target),
        ("Config", f"{config.ref}: {config.nnodes} node(s) x {config.nproc_per_node} proc"),
    ):
        table.add_row(key, literal(value))
    return table


def _resolved(spec: catalog.RunSpec, config: catalog.VendorConfig, sets: dict) -> Table:
    table = Table(
        title="Resolved hyperparameters (* = overridden)",
        title_justify="left",
        expand=True,
        box=box.SIMPLE_HEAD,
    )
    table.add_column("key")
    table.add_column("value")
    table.add_column("from")
    for key, value in spec.hp.items():
        if key in sets:
            where, style = "override *", "bold yellow"
        elif key in config.overrides:
            where, style = "config *", "bold cyan"
        else:
            where, style = "default", ""
        table.add_row(literal(key), literal(repr(value)), where, style=style)
    return table
