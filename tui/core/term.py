"""Text from hosts, workloads and the store, made safe to show on a terminal.

A host's message or a run's error may hold escape sequences (``ESC ] 0;title BEL`` sets
the window title, ``ESC [ 2 J`` clears the screen, C1 ``CSI`` does the same in one byte) or
bidi controls that reorder what is shown. Printed raw, the terminal would obey them.
``printable`` is defined with the rest of the text boundary, in tui/core/text.py; batch mode,
the cli and the app import it from here. No textual, no rich.
"""

from __future__ import annotations

from tui.core.text import printable

__all__ = ["printable"]
