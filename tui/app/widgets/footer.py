"""The screens' footer: Textual's, rebuilt only when the keys it shows change."""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """Textual's footer recomposes (a dozen key widgets mounted and styled) on every signal
    that bindings may have changed: a focus move, a mount, a dialog. Opening Results sent
    five, in the 0.1-0.2 s before the seeds' table is drawn; most changed nothing shown."""

    def __init__(self, *, compact: bool = False) -> None:
        super().__init__(compact=compact)
        self._composed: tuple[Any, ...] | None = None  # the keys the last compose showed

    def _keys(self) -> tuple[Any, ...]:
        """What compose reads: each active binding (its key, text, group), whether it is
        enabled now and its tooltip, and how the keymap displays it."""
        return tuple(
            (binding, enabled, tooltip, self.app.get_key_display(binding))
            for _, binding, enabled, tooltip in self.screen.active_bindings.values()
        )

    async def recompose(self) -> None:
        keys = self._keys()
        if keys != self._composed:
            self._composed = keys
            await super().recompose()
