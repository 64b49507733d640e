"""A DataTable for cells that change every refresh."""

from __future__ import annotations

from typing import Any

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from tui.term import printable

# About two screens of cells and rows: every update_cell makes all cached renders stale
# (their keys hold the table's update count), so a bigger cache holds only garbage.
CELLS = 2048
LINES = 256


class LiveTable(DataTable[Any]):
    """DataTable with render caches sized to what one screen shows, and plain text cells
    drawn without Rich's layout.

    A str cell is plain text, shown as it is (its control codes escaped): the dashboard's
    cells are host names and host messages, which the stock table would read as markup
    (``[/x]`` raises, ``[@click=...]`` is an action) and emoji codes. One-line rows.

    The stock caches keep 10,000 rendered cells and 1,000 rows, row texts and lines. Under
    a live feed they fill with stale renders within seconds, and the garbage collector's
    full passes walk them all. Caches sized to the screen keep the renders that are reused
    (between two updates) and drop the rest.

    Any update_cell makes every visible cell render again at the next frame. Through Rich
    (markup, padding, wrapping) that cost 40-140 ms a frame for 64 hosts at 160x50, the
    event-loop stalls of benchmarks/app_dashboard.py; a plain one-line string cropped or
    padded to its column is the same cells on screen for a small fraction of that.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Textual's own attributes (textual/widgets/_data_table.py); tests check they exist.
        self._cell_render_cache = LRUCache(CELLS)
        self._row_render_cache = LRUCache(LINES)
        self._row_renderable_cache = LRUCache(LINES)
        self._line_cache = LRUCache(LINES)

    def add_row(
        self,
        *cells: CellType,
        height: int | None = 1,
        key: str | None = None,
        label: Any = None,
    ) -> RowKey:
        return super().add_row(*map(_plain, cells), height=height, key=key, label=label)

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: CellType,
        *,
        update_width: bool = False,
    ) -> None:
        super().update_cell(row_key, column_key, _plain(value), update_width=update_width)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        text = self._plain_cell(row_index, column_index)
        pad = self.cell_padding
        if text is None or width < 2 * pad:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        # The post style only re-applies the component's colours over a cell's own styles;
        # a plain string has none, so it changes nothing here.
        component_style, _post = self._get_styles_to_render_cell(
            False,
            False,
            fixed,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        # What Rich's Styled(Padding(cell)) gives a one-line cell: one style throughout.
        meta = Style.from_meta({"row": row_index, "column": column_index})
        style = base_style + meta + component_style
        body = set_cell_size(text, width - 2 * pad)
        return [[Segment(" " * pad + body + " " * pad, style)]]

    def _plain_cell(self, row_index: int, column_index: int) -> str | None:
        """A body cell's text when the fast path draws it as the stock path would: a
        one-line string (_plain left it a str: nothing the stock path would interpret)."""
        if row_index < 0 or column_index < 0:
            return None  # the header and row labels: the stock path
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        value = self._data.get(row_key, {}).get(column_key)
        if not isinstance(value, str) or self.rows[row_key].height != 1:
            return None
        if "\n" in value:
            return None
        return value


def _plain(value: CellType) -> CellType:
    """A str cell with its control codes escaped; a Text (drawn as it is, the stock way)
    where the stock path would read markup or emoji codes in it."""
    if not isinstance(value, str):
        return value
    value = printable(value)
    if "[" in value or value.count(":") >= 2:
        return Text(value, no_wrap=True, end="")
    return value
