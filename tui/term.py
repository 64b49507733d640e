"""Text from hosts, workloads and the store, made safe to show on a terminal.

A host's message or a run's error may hold escape sequences (``ESC ] 0;title BEL`` sets
the window title, ``ESC [ 2 J`` clears the screen, C1 ``CSI`` does the same in one byte).
Printed raw, the terminal would obey them. ``printable`` shows every control character
instead, as the ``\\uXXXX`` escape JSON uses: visible, and still valid inside a JSON
string (``--format json`` output stays parseable). Line breaks and tabs stay as they are.
No textual, no rich: batch mode and the app both use it.
"""

from __future__ import annotations

import re

# C0 except tab and newline, DEL, and C1 (0x80-0x9f: CSI, OSC, ST in one byte each).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab escaped as ``\\uXXXX``."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
