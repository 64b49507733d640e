"""Drawing from a worker thread: the callback runs on the app's loop only while the
widget it draws into is still part of a running app.

A thread worker (a store read, an inventory, a qualification) may finish while the app
closes. Textual prunes the screens then, children first: a callback that ran anyway found
a Select without its overlay (NoMatches), and the worker's exception ended the app with a
traceback. Whether the app is closing is decided on the loop's own thread, where closing
happens, so nothing changes between the check and the drawing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.dom import DOMNode


def draw_from_thread(
    node: DOMNode, callback: Callable[..., Any], *args: Any, **kwargs: Any
) -> None:
    """``callback(*args, **kwargs)`` on the app's loop, waited for, unless by then the app
    has stopped running or ``node`` has left it (an app that is exiting counts as left)."""
    app = node.app

    def guarded() -> None:
        if app.is_running and node.is_attached:
            callback(*args, **kwargs)

    app.call_from_thread(guarded)
