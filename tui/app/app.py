"""The fleetperf terminal app: one screen per job (cases, hosts, runs, results)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import AwaitMount

from tui.app.feed import RunFeed, run_target
from tui.app.screens.cases import CasesScreen
from tui.app.screens.dialogs import ConfirmScreen, HelpScreen
from tui.core import paths
from tui.core.paths import store_path
from tui.core.term import printable
from tui.engine.handles import Batch, RunHandle, RunPlan
from tui.engine.session import Session

# The footer shows the five screen keys as one group ("12345 screens"); help names each.
SCREENS = Binding.Group("screens", compact=True)


# The screens after the first are imported when first shown, or in a thread once the first
# frame is drawn (_preload): their modules (textual-plotext, the dashboard's widgets) cost
# the first paint 0.1 s otherwise.
def _hosts_screen() -> Screen:
    from tui.app.screens.hosts import HostsScreen

    return HostsScreen()


def _runs_screen() -> Screen:
    from tui.app.screens.dashboard import DashboardScreen

    return DashboardScreen()


def _results_screen() -> Screen:
    from tui.app.screens.results import ResultsScreen

    return _styled(ResultsScreen())


def _styled(screen: Screen) -> Screen:
    """``screen``, marked styled by the app's stylesheet as it is now: its widgets are
    styled by it as they mount. Textual otherwise reparses the stylesheet and restyles
    every node of every screen as it first shows a mode's screen, twice (switch_mode: 50 ms
    of key 4 here). A theme changed later counts the app's stylesheet up and restyles."""
    screen._css_update_count = screen.app._css_update_count
    return screen


def _fleet_screen() -> Screen:
    from tui.app.screens.fleet import FleetScreen

    return FleetScreen()


@dataclass(frozen=True)
class AppConfig:
    inventory: Path
    results_dir: Path
    data_root: Path
    cases_dir: Path = paths.CASES_DIR
    suites_dir: Path = paths.SUITES_DIR
    # Served in a browser without --allow-write: no provisioning (root on the hosts) and
    # exports only to the results directory, never to a path typed in the page.
    read_only: bool = False
    store: str | None = None  # --store; None: FLEETPERF_STORE, else the results directory's

    @property
    def store_path(self) -> Path:
        return store_path(self.results_dir)


class FleetperfApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "fleetperf"
    MODES = {
        "cases": CasesScreen,
        "hosts": _hosts_screen,
        "runs": _runs_screen,
        "results": _results_screen,
        "fleet": _fleet_screen,
    }
    DEFAULT_MODE = "cases"
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("ctrl+q", "quit", "Quit", priority=True, id="app.quit"),
        Binding("1", "switch_mode('cases')", "Cases", id="go.cases", group=SCREENS),
        Binding("2", "switch_mode('hosts')", "Hosts", id="go.hosts", group=SCREENS),
        Binding("3", "switch_mode('runs')", "Runs", id="go.runs", group=SCREENS),
        Binding("4", "switch_mode('results')", "Results", id="go.results", group=SCREENS),
        Binding("5", "switch_mode('fleet')", "Fleet", id="go.fleet", group=SCREENS),
        Binding("ctrl+t", "toggle_theme", "Light/dark", show=False, id="app.theme"),
    ]

    def __init__(self, config: AppConfig) -> None:
        super().__init__()
        self.config = config
        self.feed = RunFeed()
        self.batches: list[Batch] = []
        # The Fleet screen's qualification while it runs: its stop request (set: cancel).
        self.qualifying: threading.Event | None = None
        # Everything the screens ask of hosts, runs and the store goes through the engine.
        self.session = Session(
            config.inventory,
            config.results_dir,
            config.data_root,
            config.cases_dir,
            store=config.store,
        )
        self._shown_modes = {self.DEFAULT_MODE}

    def on_ready(self) -> None:
        # Textual's Ready: the first frame is on the terminal.
        self._freeze_long_lived()
        gc.enable()  # off since the command started (tui/launch.py)
        self._preload()

    @work(thread=True, group="preload")
    def _preload(self) -> None:
        """The other screens' modules, imported while the operator reads the first one."""
        import tui.app.screens.dashboard
        import tui.app.screens.hosts
        import tui.app.screens.results  # noqa: F401

    def switch_mode(self, mode: str) -> AwaitMount:
        shown = super().switch_mode(mode)
        if mode not in self._shown_modes:
            self._shown_modes.add(mode)
            self.call_after_refresh(self._freeze_long_lived)
        return shown

    def _freeze_long_lived(self) -> None:
        # What start-up and a mode's first showing built (styles, screens, widgets,
        # imported modules) lives as long as the app: out of the collector's full passes,
        # which otherwise walk it all and stop the event loop for 50-100 ms every few
        # seconds under a busy feed (benchmarks/app_dashboard.py). Collected first, so no
        # garbage is frozen with it.
        gc.collect()
        gc.freeze()

    @property
    def running(self) -> bool:
        return self.qualifying is not None or any(not b.done for b in self.batches)

    def launch(self, plans: list[RunPlan]) -> Batch:
        """Start planned runs (from a worker thread): the feed learns them before they
        start, so the dashboard shows every run from its first event."""
        for plan in plans:
            spec = plan.spec
            target = run_target(spec.case, spec.hp, spec.smoke)
            self.feed.add_run(
                plan.run_id, spec.case.name, spec.config.ref, plan.hosts, spec.hp, target
            )
        batch = self.session.start(plans)
        batch.subscribe(self.feed.push)
        self.batches.append(batch)
        return batch

    def handle(self, run_id: str) -> RunHandle | None:
        return next((h for b in self.batches for h in b.runs if h.run_id == run_id), None)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notice is plain text, whatever the caller asks: most name hosts, paths,
        runs or errors, which come from hosts, the store or the user (tui/app/safe.py)."""
        super().notify(
            printable(message),
            title=printable(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette offers every key binding of the screen, so nothing is key-only."""
        yield from super().get_system_commands(screen)
        seen = set()
        for active in screen.active_bindings.values():
            b = active.binding
            if not b.description or b.action in seen or b.id in ("app.quit",):
                continue
            seen.add(b.action)
            key = self.get_key_display(b)
            help_text = b.tooltip or f"{b.description} ({key})"
            yield SystemCommand(
                b.description, help_text, partial(self.run_action, b.action, active.node)
            )

    def action_help(self) -> None:
        # A screen's help is its docstring: a mode's own screen, at the bottom of its stack
        # (a dialog above it has none to show).
        about = self.screen.__doc__ if len(self.screen_stack) == 1 else None
        self.push_screen(HelpScreen(self.screen, " ".join((about or "").split())))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"

    async def action_quit(self) -> None:
        if not self.running:
            self.exit(0)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.notify("Stopping the active runs...", timeout=30)
                self._cancel_and_exit()

        self.push_screen(
            ConfirmScreen(
                "A run is active. Quit and cancel it? Remote work stops; what was measured"
                " is kept in the store.",
                yes="Quit",
                no="Stay",
            ),
            answer,
        )

    @work(thread=True, exclusive=True, group="quit")
    def _cancel_and_exit(self) -> None:
        # Cancelling stops remote work; waiting lets the engine store what was measured.
        qualifying = self.qualifying
        if qualifying is not None:
            qualifying.set()  # the qualification cancels its batch and waits for it
        for batch in self.batches:
            batch.cancel()
        for batch in self.batches:
            batch.wait(timeout=300)
        deadline = time.monotonic() + 300
        while self.qualifying is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        self.call_from_thread(self.exit, 0)
