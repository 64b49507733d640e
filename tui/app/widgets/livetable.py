"""A DataTable for cells that change every refresh."""

from __future__ import annotations

from typing import Any

from textual.cache import LRUCache
from textual.widgets import DataTable

# About two screens of cells and rows: every update_cell makes all cached renders stale
# (their keys hold the table's update count), so a bigger cache holds only garbage.
CELLS = 2048
LINES = 256


class LiveTable(DataTable[Any]):
    """DataTable with render caches sized to what one screen shows.

    The stock caches keep 10,000 rendered cells and 1,000 rows, row texts and lines. Under
    a live feed they fill with stale renders within seconds, and the garbage collector's
    full passes walk them all: 100-200 ms stalls of the event loop every few seconds at
    5,000 events/s from 64 hosts (benchmarks/app_dashboard.py). Caches sized to the
    screen keep the renders that are reused (between two updates) and drop the rest.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Textual's own attributes (textual/widgets/_data_table.py); tests check they exist.
        self._cell_render_cache = LRUCache(CELLS)
        self._row_render_cache = LRUCache(LINES)
        self._row_renderable_cache = LRUCache(LINES)
        self._line_cache = LRUCache(LINES)
