"""Modal dialogs: confirm (yes/no) and help (the keys of the screen below)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, Static

from tui.app.safe import literal


class ConfirmScreen(ModalScreen[bool]):
    """A question with Yes / No; Escape answers no. The question is plain text: it names
    hosts and runs."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
    ]

    def __init__(self, question: str, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question, self.yes, self.no = question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(literal(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button(f"{self.no} (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    """Every key of the screen it was opened on, with its binding id and what it does."""

    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close", id="help.close")]

    def __init__(self, under: Screen, about: str) -> None:
        super().__init__()
        self.under, self.about = under, about

    def compose(self) -> ComposeResult:
        lines = [f"[b]{self.under.title or 'fleetperf'}[/b]", self.about, "", "[b]Keys[/b]"]
        seen = set()
        # The app's and the screen's own keys (they carry an id) before the focused
        # widget's generic ones (a tree's twenty folding keys).
        bindings = sorted(
            (active.binding for active in self.under.active_bindings.values()),
            key=lambda b: b.id is None,
        )
        for b in bindings:
            if not b.description or (b.action, b.description) in seen:
                continue
            seen.add((b.action, b.description))
            shown = self.app.get_key_display(b)
            lines.append(f"  {shown:<10} {b.description:<22} [dim]{b.id or ''}[/dim]")
        lines += ["", "Every action is also in the command palette (ctrl+p)."]
        with VerticalScroll(classes="dialog help"):
            yield Static("\n".join(lines))
            yield Label("escape closes", classes="hint")
