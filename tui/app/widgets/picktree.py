"""A tree whose space key marks the highlighted node on its screen instead of folding it."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import Tree


class PickTree(Tree[Any]):
    BINDINGS = [Binding("space", "screen.toggle", "Mark", id="tree.mark")]
