"""Text from hosts, workloads, the store or the user, for textual: never markup.

A str given to a Label, Static, Tree node or DataTable cell is read as content markup:
``[/x]`` in a run's error raises MarkupError, ``[@click=app.quit]`` becomes an action,
``[rank0]:`` vanishes as an unknown tag. A Text is shown as it is; its control codes are
escaped first (tui.core.term.printable), or the terminal would obey them.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tui.core.term import printable


def literal(text: object, **kwargs: Any) -> Text:
    """``text`` shown literally; ``kwargs`` are Text's (style, no_wrap, overflow...)."""
    return Text(printable(str(text)), **kwargs)
