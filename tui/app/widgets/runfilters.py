"""The Results list's filter row: by case, vendor and config, and the run id field."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from tui.app.safe import literal
from tui.results.rows import RunRow

FIELDS = ("case", "vendor", "config")


class RunFilters(Horizontal):
    """A Select per field, with the values the runs read have as its choices, before the run
    id field. The Selects (18 widgets, 50 ms of key 4 to the list drawn) are mounted after
    the first refresh that follows the first runs given (``offer``); until then nothing is
    filtered."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.selects: dict[str, Select[str]] = {}  # by field, once mounted
        self._rows: Sequence[RunRow] = ()
        self._mounting = False

    def compose(self) -> ComposeResult:
        # A run id as fleetperf results takes it: whole, a prefix, the short form.
        yield Input(placeholder="run id", id="run-search")

    def offer(self, rows: Sequence[RunRow]) -> None:
        """Each filter's choices: the values these rows have; a chosen value still offered
        stays chosen."""
        self._rows = rows
        if not self.selects:  # _mount sets them once they are mounted
            if not self._mounting:
                self._mounting = True
                self.call_after_refresh(self._mount)
            return
        for name, select in self.selects.items():
            values = sorted({getattr(r, name) for r in rows})
            current = select.value
            select.set_options([(literal(v), v) for v in values])
            if current in values:
                select.value = current

    async def _mount(self) -> None:
        selects = {n: Select[str]([], prompt=f"any {n}", id=f"filter-{n}") for n in FIELDS}
        await self.mount_all(selects.values(), before=0)
        self.selects = selects
        self.offer(self._rows)

    def keep(self, rows: Sequence[RunRow]) -> list[RunRow]:
        """The rows that have every chosen value."""
        selects = self.selects.items()
        wanted = {name: s.value for name, s in selects if s.value is not Select.NULL}
        return [r for r in rows if all(getattr(r, k) == v for k, v in wanted.items())]

    def clear(self) -> None:
        """No value chosen: every row kept."""
        for select in self.selects.values():
            select.clear()
