"""Fleet: qualify a group of hosts as `fleetperf qualify` does, the table and the link
matrix filling as hosts and pairs finish."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Input, Label, RichLog, Select, Static

from tui.app.fleetprogress import FleetProgress
from tui.app.safe import literal
from tui.app.threads import draw_from_thread
from tui.app.widgets.footer import Footer
from tui.core.errors import UserInputError
from tui.engine.session import Session
from tui.qualify import keep
from tui.qualify.output import Result
from tui.qualify.run import (
    HOST_SUITE,
    LINK_SUITE,
    Qualification,
    QualifyArgs,
    boot_ids,
    pick_hosts,
    shared_machines,
)
from tui.results.record import now_utc_iso
from tui.results.report_qualify import heat_class, heat_legend, mark

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp

VERDICT_STYLE = {"ok": "green", "inconclusive": "yellow", "flagged": "bold red"}
HEAT_STYLE = {"ok": "on dark_green", "slow": "black on yellow", "bad": "white on red", "none": ""}


class _Lines(io.TextIOBase):
    """The qualification's progress lines (those --batch prints) to the screen's log."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.buf = say, ""

    def write(self, text: str) -> int:
        self.buf += text
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            if line.strip():
                self.say(line)
        return len(text)


class FleetScreen(Screen[None]):
    """Qualify a group: the base suite's single-host cases on every host of the group, then
    the base-interhost links pair by pair (N-1 rounds of disjoint pairs), then one all-host
    all_reduce, as fleetperf qualify runs them; each host judged against its peers. Pick
    the group and the samples per host (repeat), then q starts it; x stops it. The table
    shows each host's state and, per metric, its ratio to the peers' median and verdict;
    the heat map each pair's median on one link metric (m: the next one), shaded by its
    ratio to its peers' median as the command judges it (green less than 10 % below,
    yellow 10-30 % below, red further; ! a pair flagged), as the HTML report shows it."""

    TITLE = "Fleet"
    BINDINGS = [
        Binding("q", "qualify", "Qualify", id="fleet.qualify"),
        Binding("x", "stop", "Stop", id="fleet.stop"),
        Binding("m", "next_metric", "Next link metric", id="fleet.metric"),
        Binding("escape", "focus_table", "Leave field", id="fleet.leave"),
    ]

    app: FleetperfApp

    def __init__(self) -> None:
        super().__init__()
        self.progress: FleetProgress | None = None
        self.qual: Qualification | None = None
        self.link_metric: str | None = None  # the matrix's; None: the first judged

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="row"):
            yield Label("group", classes="field-name")
            yield Select[str]([], prompt="group", id="fleet-group", compact=True)
            yield Label("repeat", classes="field-name")
            yield Input("3", id="fleet-repeat", type="integer", compact=True)
            yield Label(f"suites {HOST_SUITE} + {LINK_SUITE}", id="fleet-suite")
        yield Label("", id="fleet-summary")
        with VerticalScroll(id="fleet-body"):
            yield Static(id="fleet-table")
            yield Static(id="fleet-matrix")
            yield Static(id="fleet-flags")
        yield RichLog(id="fleet-log", max_lines=500, wrap=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#fleet-summary", Label).update("No qualification yet: q starts one.")
        self._read_groups()

    @work(thread=True, exclusive=True, group="fleet-groups")
    def _read_groups(self) -> None:
        try:
            groups = self.app.session.host_groups()
        except UserInputError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
            return
        draw_from_thread(self, self._set_groups, list(groups))

    def _set_groups(self, groups: list[str]) -> None:
        select = self.query_one("#fleet-group", Select)
        select.set_options((literal(g), g) for g in groups)
        if groups:
            select.value = groups[0]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        running = self.qual is not None
        if action == "qualify":
            return not running
        if action == "stop":
            return running
        if action == "focus_table":
            return isinstance(self.focused, Input)
        if action == "next_metric":
            return len(self._link_metrics()) > 1
        return True

    def action_focus_table(self) -> None:
        self.query_one("#fleet-body").focus()

    def _link_metrics(self) -> list[str]:
        result = self.progress.result if self.progress is not None else None
        return list(result.links) if result is not None else []

    def action_next_metric(self) -> None:
        metrics = self._link_metrics()
        if len(metrics) < 2 or self.progress is None:
            return
        at = metrics.index(self.link_metric) if self.link_metric in metrics else 0
        self.link_metric = metrics[(at + 1) % len(metrics)]
        self.show(self.progress)

    # -- running -----------------------------------------------------------------------

    def action_qualify(self) -> None:
        group = self.query_one("#fleet-group", Select).value
        repeat_text = self.query_one("#fleet-repeat", Input).value
        if not isinstance(group, str):
            self.notify("Pick a group first.", severity="warning")
            return
        if not repeat_text.isdigit() or int(repeat_text) < 1:
            self.notify(f"--repeat {repeat_text}: must be at least 1", severity="error")
            return
        self.query_one("#fleet-log", RichLog).clear()
        self._qualify(group, int(repeat_text))

    def action_stop(self) -> None:
        if self.qual is not None:
            self.qual.requested.set()
            self.notify("Stopping the qualification's runs...")

    @work(thread=True, exclusive=True, group="qualify")
    def _qualify(self, group: str, repeat: int) -> None:
        """The qualification `fleetperf qualify --group GROUP --repeat N` runs, through
        tui.qualify (plan, run, judge, keep): only the progress differs, drawn here."""
        config = self.app.config
        args = QualifyArgs(
            config.inventory,
            config.results_dir,
            config.data_root,
            config.store,
            group=group,
            repeat=repeat,
        )
        say = self._say_from_thread
        session = Session(
            args.inventory, args.results_dir, args.data_root, judge=False, store=args.store
        )
        started = now_utc_iso()
        try:
            session.open_store()
            group, hosts = pick_hosts(session.host_groups(), group, None)
            qual = Qualification(args, session, group, hosts, _Lines(say))
            shared = shared_machines(boot_ids(session, hosts))
            for machine in shared:
                say(f"hosts {', '.join(machine)} share one machine (one boot id): one at a time")
            progress = FleetProgress(hosts, one_at_a_time=bool(shared), started=True)

            def done(kind: str, done_hosts: tuple[str, ...]) -> None:
                # On the engine's thread, with the qualification's samples as they are.
                progress.done(kind, done_hosts, qual.judged())
                draw_from_thread(self, self.show, progress)

            qual.on_done = done
            self.qual = qual
            self.app.qualifying = qual.requested
            draw_from_thread(self, self.show, progress)
            measured = qual.run(progress.one_at_a_time)
            if measured.refused or measured.stopped:
                why = measured.refused or "stopped"
                progress.end(why)
                draw_from_thread(self, self.show, progress)
                draw_from_thread(self, self.notify, why, severity="error", timeout=10)
                return
            result = qual.judged()
            keep.save(session.store_at, started, result)
            progress.finish(result)
            draw_from_thread(self, self.show, progress)
        except UserInputError as exc:
            draw_from_thread(self, self.notify, str(exc), severity="error", timeout=10)
        finally:
            session.close()
            self.qual = None
            self.app.qualifying = None
            draw_from_thread(self, self.refresh_bindings)

    def _say_from_thread(self, line: str) -> None:
        draw_from_thread(self, self._say, line)

    def _say(self, line: str) -> None:
        self.query_one("#fleet-log", RichLog).write(literal(line))

    # -- drawing -----------------------------------------------------------------------

    def show(self, progress: FleetProgress) -> None:
        """Draw ``progress``: from the qualification's thread, or a recorded one."""
        self.progress = progress
        self.query_one("#fleet-summary", Label).update(literal(progress.summary()))
        self.query_one("#fleet-table", Static).update(host_table(progress))
        result = progress.result
        self.query_one("#fleet-matrix", Static).update(
            heat_map(progress, result, self.link_metric) if result is not None else ""
        )
        self.query_one("#fleet-flags", Static).update(_after(progress, result))
        self.refresh_bindings()


def _after(progress: FleetProgress, result: Result | None) -> Text:
    """Under the matrix: the all-host all_reduce's figure, then the runs that failed."""
    text = Text()
    allreduce = result.allreduce if result is not None else None
    value = allreduce.metrics.get("bus_gbps") if allreduce is not None else None
    if isinstance(value, int | float):
        n = len(progress.hosts)
        text.append_text(literal(f"all_reduce over {n} hosts: bus_gbps {value:.4g}"))
        text.append("\n")
    for line in result.failures if result is not None else []:
        text.append_text(literal(line, style="red"))
        text.append("\n")
    return text


def _short(label: str) -> str:
    """A metric label (case config metric) as a column header: metric, then config."""
    case, config, metric = label.rsplit(" ", 2) if label.count(" ") >= 2 else ("", "", label)
    return f"{metric}\n{config}"


def host_table(progress: FleetProgress) -> Table:
    result = progress.result
    metrics = list(dict.fromkeys(v.metric for v in result.verdicts)) if result else []
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("host", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for metric in metrics:
        table.add_column(literal(_short(metric)), justify="right", no_wrap=True)
    for host in progress.hosts:
        state = progress.state(host)
        cells: list[Text] = [literal(host), literal(state, style=_verdict_style(state))]
        for metric in metrics:
            assert result is not None
            v = next((v for v in result.verdicts if v.host == host and v.metric == metric), None)
            if v is None:
                cells.append(literal("-", style="dim"))
                continue
            ratio = "-" if v.ratio is None else f"{v.ratio:.2f}×"
            shown = v.verdict if progress.final else "…"
            cells.append(literal(f"{ratio} {shown}", style=_verdict_style(shown)))
        table.add_row(*cells)
    return table


def _verdict_style(verdict: str) -> str:
    return VERDICT_STYLE.get(verdict.split(" ")[0], "")


def heat_map(progress: FleetProgress, result: Result, metric: str | None) -> Group | str:
    """One link metric's matrix (``metric``, else the first judged): each pair's median,
    shaded by its ratio to its peers' median (judge_links'), ``!`` on a pair judge_links
    flagged; hosts numbered as the rows. Its title names the metric; under it, the legend."""
    if not result.links:
        return ""
    metrics = list(result.links)
    shown = metric if metric in result.links else metrics[0]
    by_pair = {frozenset(link.pair): link for link in result.links[shown].links}
    which = f" ({metrics.index(shown) + 1} of {len(metrics)}, m: next)" if len(metrics) > 1 else ""
    rounds = f"rounds done {progress.rounds_done} of {len(progress.rounds)}"
    title = f"Links: {_short(shown).replace(chr(10), ' ')}{which}; {rounds}"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("", no_wrap=True)
    for i, _ in enumerate(progress.hosts, 1):
        table.add_column(str(i), justify="right", no_wrap=True)
    for i, a in enumerate(progress.hosts, 1):
        cells: list[Text] = [literal(f"{i} {a}")]
        for b in progress.hosts:
            link = by_pair.get(frozenset((a, b)))
            if a == b:
                cells.append(Text("·", style="dim"))
            elif link is None or link.median is None:
                cells.append(Text("-", style="dim"))
            else:
                style = HEAT_STYLE[heat_class(link.ratio)]
                cells.append(Text(f"{link.median:.4g}{mark(link.verdict)}", style=style))
        table.add_row(*cells)
    legend = literal(f"Each pair's median; {heat_legend()}", style="dim")
    return Group(literal(title, style="bold"), table, legend)
