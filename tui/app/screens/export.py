"""The Results screen's export: a dialog for a format and a path, then the file written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from tui.app.threads import draw_from_thread
from tui.core import safefile
from tui.core.errors import StoreError
from tui.results.record import RunRecord
from tui.results.tables import FORMATS, export_text

if TYPE_CHECKING:
    from tui.app.app import FleetperfApp


class ExportScreen(ModalScreen[tuple[str, Path] | None]):
    """Pick a format; the path is editable unless the app is read-only (served in a
    browser): then the file goes where ``base`` says, under the results directory."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="export.cancel")]

    def __init__(self, base: Path, count: int, read_only: bool = False) -> None:
        super().__init__()
        self.base, self.count, self.read_only = base, count, read_only

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.count} run(s) to", classes="question")
            yield Input(str(self.base), id="export-path", disabled=self.read_only)
            if self.read_only:
                yield Label(
                    "Fixed in the browser: fleetperf serve --allow-write lets you choose.",
                    classes="hint",
                )
            with Horizontal(classes="buttons"):
                for fmt in FORMATS:
                    yield Button(fmt, id=f"export-{fmt}")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        fmt = str(event.button.id).removeprefix("export-")
        # Read-only: the page's keystrokes never choose where a file is written.
        path = self.base if self.read_only else Path(self.query_one(Input).value).expanduser()
        if path.suffix.lstrip(".") not in FORMATS:
            path = path.with_name(f"{path.name}.{fmt}")
        self.dismiss((fmt, path))


def export(app: FleetperfApp, records: list[RunRecord]) -> None:
    """Ask for a format and a path (under the results directory by default), then write
    ``records`` there; the outcome as a notification."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    base = app.config.results_dir / "exports" / f"fleetperf-{stamp}"

    def done(result: tuple[str, Path] | None) -> None:
        if result is None:
            return
        fmt, path = result
        try:
            safefile.make_dirs(path.parent)
            safefile.write_text(path, export_text(records, fmt))
        except OSError as exc:
            app.notify(f"{path}: {exc.strerror}", title="Not exported", severity="error")
            return
        app.notify(f"{len(records)} run(s) written to {path}", title="Exported")

    app.push_screen(ExportScreen(base, len(records), app.config.read_only), done)


def export_runs(app: FleetperfApp, run_ids: list[str]) -> None:
    """export() for these runs, their records read in a thread first (every shown run:
    thousands of them take seconds)."""

    def read() -> None:
        try:
            records = app.session.store.records(run_ids)
        except StoreError as exc:
            draw_from_thread(app, app.notify, str(exc), severity="error", timeout=10)
            return
        draw_from_thread(app, export, app, records)

    app.run_worker(read, thread=True, exclusive=True, group="export")
