"""Hosts: the inventory's groups and hosts, a preflight, and provisioning."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Header, Label, Tree

from tui.app.safe import literal
from tui.app.screens.dialogs import ConfirmScreen
from tui.app.threads import draw_from_thread
from tui.app.widgets.footer import Footer
from tui.app.widgets.picktree import PickTree
from tui.core.errors import UserInputError
from tui.core.term import printable
from tui.engine.hostcheck import HostCheck, TaskEvent

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

# Why a host is unreachable comes last (and whole under the table): a long reason in the
# reachable column pushed chip, devices and image off the screen (issue 41 point 7).
HOST_COLUMNS = ("host", "groups", "reachable", "chip", "devices", "image", "note")
TASK_COLUMNS = ("host", "mode", "task", "ok", "changed", "failed", "skipped")


class HostsScreen(Screen[None]):
    """The inventory's groups and hosts. Preflight asks every host through ansible-runner
    (setup): reachable, chip, device count, and whether its benchmark image is there.
    Provision runs provision.yml on the marked hosts (or the highlighted one) in check mode
    first, shows what would change, and asks before the real run."""

    TITLE = "Hosts"
    BINDINGS = [
        Binding("p", "preflight", "Preflight", id="hosts.preflight"),
        Binding("v", "provision", "Provision", id="hosts.provision"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[str, list[str]] | None = None  # None: the inventory is not read
        self.marked: set[str] = set()
        self.tasks: dict[str, Counter[str]] = {}
        self.notes: dict[str, str] = {}  # why each unreachable host is, from the preflight

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield PickTree("inventory", id="group-tree")
            with Vertical(id="host-side"):
                yield DataTable(id="hosts", cursor_type="row")
                yield Label("", id="host-reason")
                yield Label("Provisioning: none yet (v)", id="provision-status")
                yield DataTable(id="tasks", cursor_type="row")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        hosts = self.query_one("#hosts", DataTable)
        for name in HOST_COLUMNS:
            hosts.add_column(name, key=name)
        tasks = self.query_one("#tasks", DataTable)
        for name in TASK_COLUMNS:
            tasks.add_column(name, key=name)
        self.query_one(Tree).show_root = False
        self.sub_title = printable(f"inventory {shown_path(self.app.config.inventory)}")
        self.load()

    @work(thread=True, exclusive=True, group="inventory")
    def load(self) -> None:
        session = self.app.session
        try:
            session.read_inventory()
            groups, hosts = session.host_groups(), session.hosts()
        except UserInputError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
            return
        draw_from_thread(self, self._show_inventory, groups, hosts)
        self._preflight(hosts)

    def _show_inventory(self, groups: dict[str, list[str]], all_hosts: list[str]) -> None:
        self.groups = groups
        tree = self.query_one(Tree)
        tree.clear()
        for group, hosts in groups.items():
            node = tree.root.add(literal(group), data=("group", group), expand=True)
            for host in hosts:
                node.add_leaf(self._label(host), data=("host", host))
        table = self.query_one("#hosts", DataTable)
        table.clear()
        for host in all_hosts:
            names = ",".join(g for g, hs in groups.items() if host in hs)
            table.add_row(literal(host), literal(names), "checking...", "", "", "", "", key=host)

    def _label(self, host: str) -> Text:
        return literal(f"{'[x]' if host in self.marked else '[ ]'} {host}")

    def _picked(self) -> list[str]:
        if self.marked:
            return sorted(self.marked)
        table = self.query_one("#hosts", DataTable)
        if table.row_count == 0:
            return []
        node = self.query_one(Tree).cursor_node
        if node is not None and node.data and node.data[0] == "host":
            return [node.data[1]]
        return [str(self._picked_row(table))]

    def action_toggle(self) -> None:
        node = self.query_one(Tree).cursor_node
        if node is None or not node.data:
            return
        kind, name = node.data
        hosts = [name] if kind == "host" else (self.groups or {}).get(name, [])
        on_all = all(h in self.marked for h in hosts)
        for host in hosts:
            (self.marked.discard if on_all else self.marked.add)(host)
        for group in self.query_one(Tree).root.children:
            for leaf in group.children:
                leaf.set_label(self._label(leaf.data[1]))
        self.sub_title = f"{len(self.marked)} marked"

    @on(Tree.NodeHighlighted)
    def _follow(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data and event.node.data[0] == "host":
            table = self.query_one("#hosts", DataTable)
            table.move_cursor(row=table.get_row_index(event.node.data[1]))

    @on(DataTable.RowHighlighted, "#hosts")
    def _show_reason(self) -> None:
        """The highlighted host's reason, else the first unreachable host's, whole."""
        table = self.query_one("#hosts", DataTable)
        here = self._picked_row(table)
        host = (
            here
            if self.notes.get(here or "")
            else next((h for h, note in self.notes.items() if note), None)
        )
        text = f"{host}: {self.notes[host]}" if host else ""
        self.query_one("#host-reason", Label).update(literal(text))

    @staticmethod
    def _picked_row(table: DataTable) -> str | None:
        if table.row_count == 0:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    # -- preflight --------------------------------------------------------------------

    def action_preflight(self) -> None:
        if self.groups is None:
            self.load()
        else:
            self._preflight(self.app.session.hosts())

    @work(thread=True, exclusive=True, group="preflight")
    def _preflight(self, hosts: list[str]) -> None:
        if not hosts:
            return
        checks = self.app.session.preflight(hosts)
        draw_from_thread(self, self._show_checks, checks)

    def _show_checks(self, checks: dict[str, HostCheck]) -> None:
        table = self.query_one("#hosts", DataTable)
        for host, check in checks.items():
            self.notes[host] = "" if check.reachable else check.message
            for col, value in (
                ("reachable", "yes" if check.reachable else "no"),
                ("chip", check.chip or "?"),
                ("devices", check.devices or ("? (not provisioned)" if check.reachable else "?")),
                ("image", check.image or "?"),
                ("note", self.notes[host]),
            ):
                table.update_cell(host, col, literal(value), update_width=True)
        self._show_reason()
        down = [h for h, c in checks.items() if not c.reachable]
        if down:
            self.notify(f"Unreachable: {', '.join(down)}", severity="warning")

    # -- provisioning -----------------------------------------------------------------

    def action_provision(self) -> None:
        if self.app.config.read_only:
            self.notify(
                "Provisioning is off in the browser: it runs as root on the hosts."
                " Start fleetperf serve --allow-write, or use fleetperf in a terminal.",
                title="Not provisioned",
                severity="warning",
                timeout=10,
            )
            return
        hosts = self._picked()
        if not hosts:
            self.notify("No hosts to provision.", severity="warning")
            return
        self._provision(hosts, check=True)

    @work(thread=True, exclusive=True, group="provision")
    def _provision(self, hosts: list[str], check: bool) -> None:
        mode = "check" if check else "real"
        draw_from_thread(self, self._start_tasks, hosts, mode)

        def on_task(ev: TaskEvent) -> None:
            draw_from_thread(self, self._show_task, ev)

        try:
            stats = self.app.session.provision(hosts, check, on_task)
        except Exception as exc:  # noqa: BLE001 - ansible-runner setup errors become a notice
            draw_from_thread(self, self.notify, f"provision.yml: {exc}", severity="error")
            return
        draw_from_thread(self, self._finished, hosts, mode, stats)

    def _start_tasks(self, hosts: list[str], mode: str) -> None:
        table = self.query_one("#tasks", DataTable)
        table.clear()
        self.tasks = {h: Counter() for h in hosts}
        for host in hosts:
            table.add_row(literal(host), mode, "starting...", "0", "0", "0", "0", key=host)
        self.query_one("#provision-status", Label).update(
            literal(f"provision.yml ({mode} mode) on {', '.join(hosts)}: running")
        )

    def _show_task(self, ev: TaskEvent) -> None:
        table = self.query_one("#tasks", DataTable)
        if ev.host not in self.tasks:
            return
        counts = self.tasks[ev.host]
        counts[ev.status] += 1
        table.update_cell(ev.host, "task", literal(ev.task), update_width=True)
        for col in ("ok", "changed", "failed", "skipped"):
            table.update_cell(ev.host, col, str(counts[col]))

    def _finished(self, hosts: list[str], mode: str, stats: dict[str, dict[str, int]]) -> None:
        failed = [
            h for h in hosts if stats.get(h, {}).get("failures") or stats.get(h, {}).get("dark")
        ]
        changed = sum(stats.get(h, {}).get("changed", 0) for h in hosts)
        status = self.query_one("#provision-status", Label)
        table = self.query_one("#tasks", DataTable)
        for host in hosts:
            table.update_cell(host, "task", "failed" if host in failed else "done")
        summary = f"provision.yml ({mode} mode): {changed} change(s)"
        if failed:
            summary += f", failed on {', '.join(failed)}"
        status.update(literal(summary))
        if failed:
            self.notify(summary, severity="error", timeout=10)
            return
        if mode == "check":
            self.app.push_screen(
                ConfirmScreen(
                    f"Check mode: {changed} change(s) on {', '.join(hosts)}."
                    " Provision these hosts for real?",
                    yes="Provision",
                    no="Not now",
                ),
                lambda yes: self._provision(hosts, check=False) if yes else None,
            )
        else:
            self.notify(summary)
            self.action_preflight()


def shown_path(path: Path) -> str:
    """The inventory as the operator would name it: relative to the working directory when
    inside it (inventory/examples/nvidia.yml), else whole (fleetperf -i)."""
    cwd = Path.cwd()
    return str(path.relative_to(cwd) if path.is_relative_to(cwd) else path)
