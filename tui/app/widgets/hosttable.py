"""The Runs screen's host table: rows kept as text, each row's line drawn once per change.

A line-API widget (ScrollView + render_line): the table keeps its rows as tuples of str,
caches one Strip per row, and when a row's text changes it drops that row's Strip and
repaints that one line. DataTable (which this replaces) draws every visible line again
after any cell update (its caches are keyed by the table's update count): with 64 hosts
changing every tick that was the dashboard's worst event-loop stalls
(benchmarks/app_dashboard.py, docs/benchmarks.md).

It shows what the dashboard's DataTable showed (cursor_type="row", zebra stripes, one-line
rows, a left-aligned bold header, one cell of padding each side) in the same theme colours;
tests compare the two line by line. Cells are host text shown as it is: never markup, its
control codes escaped (tui.core.term.printable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.core.term import printable

PAD = 1  # blank cells each side of a cell, as DataTable's default cell_padding
HEADER = 1  # lines


class HostTable(ScrollView, can_focus=True):
    """Rows of one-line text cells under a fixed header, with a row cursor.

    ``columns`` maps each column's key (also its label) to its width in cells, or None
    for the width of its widest cell. Rows stay in the order they were first put.
    """

    ALLOW_SELECT = False
    # DataTable's keys for a row cursor, with its descriptions (the palette lists them).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Cursor right", show=False),
        Binding("left", "scroll_left", "Cursor left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "cursor_top", "Top", show=False),
        Binding("ctrl+end", "cursor_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "hosttable--header",
        "hosttable--cursor",
        "hosttable--hover",
        "hosttable--even-row",
        "hosttable--odd-row",
    }
    # DataTable's colours for the same parts (textual/widgets/_data_table.py).
    DEFAULT_CSS = """
    HostTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .hosttable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .hosttable--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .hosttable--even-row {
            background: $surface-darken-1 40%;
        }
        & > .hosttable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .hosttable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .hosttable--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .hosttable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .hosttable--hover {
            background: $block-hover-background;
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor moved to a row (or the first row appeared under it)."""

        def __init__(self, table: HostTable, row: int, key: str) -> None:
            super().__init__()
            self.table, self.row, self.key = table, row, key

        @property
        def control(self) -> HostTable:
            return self.table

    def __init__(
        self,
        columns: Mapping[str, int | None],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._columns = list(columns)
        self._fixed = [columns[c] for c in self._columns]  # None: as wide as its cells
        self._keys: list[str] = []  # row order
        self._index: dict[str, int] = {}
        self._cells: dict[str, tuple[str, ...]] = {}
        self._widths = self._empty_widths()  # each column's, its padding included
        self._lines: dict[str, tuple[tuple[object, ...], Strip]] = {}  # key -> (look, line)
        self._styles: dict[str, Style] = {}  # component styles for the current pseudo-classes
        self._pseudo: object = None
        self.cursor_row = 0
        self._hover: int | None = None  # the row under the mouse, while it moves there
        self._update_size()

    # -- data --------------------------------------------------------------------------

    @property
    def rows(self) -> Mapping[str, tuple[str, ...]]:
        """Each row's cells by key, as shown (control codes escaped)."""
        return self._cells

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def cursor_key(self) -> str | None:
        return self._keys[self.cursor_row] if self._keys else None

    def get_cell(self, key: str, column: str) -> str:
        return self._cells[key][self._columns.index(column)]

    def put(self, key: str, cells: Sequence[str]) -> None:
        """Add the row ``key`` at the end, or change its cells; repaints that row only,
        and only if its text changed."""
        shown = tuple(printable(c) for c in cells)
        if len(shown) != len(self._columns):
            raise ValueError(f"row {key!r}: {len(shown)} cells for {len(self._columns)} columns")
        old = self._cells.get(key)
        if old == shown:
            return
        self._cells[key] = shown
        if old is None:
            self._index[key] = len(self._keys)
            self._keys.append(key)
        self._lines.pop(key, None)
        if self._fit_columns(shown, old):
            self._update_size()
            self.refresh()
        else:
            if old is None:
                self._update_size()
            self._refresh_row(self._index[key])
        if old is None and len(self._keys) == 1:
            self._highlighted()  # the cursor has a row under it now

    def clear(self) -> None:
        self._keys.clear()
        self._index.clear()
        self._cells.clear()
        self._lines.clear()
        self._widths = self._empty_widths()
        self.cursor_row, self._hover = 0, None
        self._update_size()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def _empty_widths(self) -> list[int]:
        """Column widths with no rows: an auto-width column as wide as its label."""
        return [
            PAD * 2 + (w if w is not None else cell_len(c))
            for c, w in zip(self._columns, self._fixed, strict=True)
        ]

    def _fit_columns(self, cells: tuple[str, ...], old: tuple[str, ...] | None) -> bool:
        """Widen or narrow the auto-width columns to their widest cell; True if any changed."""
        changed = False
        for i, fixed in enumerate(self._fixed):
            if fixed is not None:
                continue
            width = PAD * 2 + cell_len(cells[i])
            if width > self._widths[i]:
                self._widths[i], changed = width, True
            elif old is not None and PAD * 2 + cell_len(old[i]) == self._widths[i] > width:
                widest = max(
                    [cell_len(self._columns[i])] + [cell_len(r[i]) for r in self._cells.values()]
                )
                changed |= PAD * 2 + widest != self._widths[i]
                self._widths[i] = PAD * 2 + widest
        if changed:
            self._lines.clear()
        return changed

    def _update_size(self) -> None:
        self.virtual_size = Size(sum(self._widths), HEADER + len(self._keys))

    # -- drawing -----------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._lines.clear()
        self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        pseudo = self.get_pseudo_class_state()  # focus changes the header's and cursor's look
        if pseudo != self._pseudo:
            self._pseudo = pseudo
            self._styles.clear()
            self._lines.clear()
        return super().render_lines(crop)

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            # A row's own style (a stripe) as DataTable takes it; cursor and hover as
            # DataTable's component styles, added over it.
            if name.endswith("-row") or name.endswith("header"):
                style = self.get_component_styles(name).rich_style
            else:
                style = self.get_component_rich_style(name)
            self._styles[name] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y < HEADER:
            line = self._header_line(width)
        else:
            row = y - HEADER + scroll_y
            if row >= len(self._keys):
                return Strip.blank(width, self.rich_style)
            line = self._row_line(row, width)
        return line.crop(scroll_x, scroll_x + width)

    def _header_line(self, width: int) -> Strip:
        text = "".join(_cell(c, w) for c, w in zip(self._columns, self._widths, strict=True))
        return _strip(text, width, self._style("hosttable--header"))

    def _row_line(self, row: int, width: int) -> Strip:
        key = self._keys[row]
        cursor = row == self.cursor_row
        hover = row == self._hover
        look = (width, row % 2, cursor, hover)
        cached = self._lines.get(key)
        if cached is not None and cached[0] == look:
            return cached[1]
        style = self._style("hosttable--odd-row" if row % 2 else "hosttable--even-row")
        if hover:
            style += self._style("hosttable--hover")
        if cursor:
            style += self._style("hosttable--cursor")
        cells = self._cells[key]
        text = "".join(_cell(c, w) for c, w in zip(cells, self._widths, strict=True))
        line = _strip(text, width, style)
        self._lines[key] = (look, line)
        return line

    def _refresh_row(self, row: int | None) -> None:
        """Repaint one row's line, if it is on screen."""
        if row is None:
            return
        y = HEADER + row - self.scroll_offset.y
        if HEADER <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- cursor and mouse --------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        row = max(0, min(row, len(self._keys) - 1))
        old, self.cursor_row = self.cursor_row, row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
            self._highlighted()
        self._scroll_to_cursor()

    def _highlighted(self) -> None:
        if self._keys:
            self.post_message(
                self.RowHighlighted(self, self.cursor_row, self._keys[self.cursor_row])
            )

    def _scroll_to_cursor(self) -> None:
        rows = self.scrollable_content_region.height - HEADER  # lines under the header
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif rows > 0 and self.cursor_row >= top + rows:
            self.scroll_to(y=self.cursor_row - rows + 1, animate=False, immediate=True)

    def _set_hover(self, row: int | None) -> None:
        if row != self._hover:
            old, self._hover = self._hover, row
            self._refresh_row(old)
            self._refresh_row(row)

    def _row_at(self, y: int) -> int | None:
        """The row at line ``y`` of the widget, None on the header or below the rows."""
        row = y - HEADER + self.scroll_offset.y
        return row if y >= HEADER and row < len(self._keys) else None

    def _row_under(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)  # None over a scrollbar
        return None if offset is None else self._row_at(offset.y)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self._row_under(event))

    def on_leave(self, _event: events.Leave) -> None:
        self._set_hover(None)

    def on_click(self, event: events.Click) -> None:
        row = self._row_under(event)
        if row is not None:
            self.move_cursor(row)
            event.stop()

    def _key_moves(self, row: int) -> None:
        self._set_hover(None)  # the keyboard's cursor, not the mouse's, as DataTable does
        self.move_cursor(row)

    def action_cursor_up(self) -> None:
        self._key_moves(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._key_moves(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self._page(-1)

    def action_page_down(self) -> None:
        self._page(1)

    def _page(self, sign: int) -> None:
        """A page of rows: the view and the cursor move by it together, as DataTable's."""
        page = sign * max(self.scrollable_content_region.height - HEADER, 1)
        self.scroll_to(y=self.scroll_offset.y + page, animate=False, immediate=True)
        self._key_moves(self.cursor_row + page)

    def action_scroll_home(self) -> None:
        self._set_hover(None)
        self.scroll_to(x=0, animate=False)

    def action_scroll_end(self) -> None:
        self._set_hover(None)
        self.scroll_to(x=self.max_scroll_x, animate=False)

    def action_cursor_top(self) -> None:
        self._key_moves(0)

    def action_cursor_bottom(self) -> None:
        self._key_moves(len(self._keys) - 1)


def _cell(text: str, width: int) -> str:
    """One cell: its text cropped or padded to the column, one blank each side."""
    return " " * PAD + set_cell_size(text, width - 2 * PAD) + " " * PAD


def _strip(text: str, width: int, style: Style) -> Strip:
    """The line in one style, filled to the widget's width (wider when the table is)."""
    fill = max(width - cell_len(text), 0)
    return Strip([Segment(text + " " * fill, style)])
