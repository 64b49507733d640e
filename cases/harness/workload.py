"""What ``run_case`` does around a case's ``main``: read config.json, check inputs, and turn
any failure into an ``error`` event and a non-zero exit.

Exit codes: 0 ran to its end (result written), 1 failed while running, 2 bad input (a missing
data path, an unreadable config, an unsupported setting): nothing was trained.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.events import EventWriter
from harness.perf import mark_main_start

TRACEBACK_TAIL_LINES = 20


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """config.json as a dict; InputError naming the path when it is missing or malformed."""
    p = Path(path)
    try:
        config = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"config file not found: {p}") from None
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read config {p}: {e}") from None
    if not isinstance(config, dict) or not isinstance(config.get("hp"), dict):
        raise InputError(f"config {p} has no 'hp' object")
    return config


def require_paths(root: str | os.PathLike[str], relative: Iterable[str]) -> None:
    """InputError naming the first of ``root`` / ``relative`` paths that does not exist; a
    case that requires no data (the base cases) needs no data directory."""
    base, relative = Path(root), list(relative)
    if relative and not base.is_dir():
        raise InputError(f"data directory not found: {base}")
    for rel in relative:
        if not (base / rel).exists():
            raise InputError(f"missing data: {base / rel} (run the case's prepare step)")


def one_line(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def guarded(events: EventWriter, main: Callable[[], int | None]) -> int:
    """Run ``main``; on an exception write an ``error`` event and a line to stderr, and return
    the exit code (2 for InputError, 1 otherwise). KeyboardInterrupt counts as a failure.
    Marks main()'s start for e2e_time_main."""
    mark_main_start()
    try:
        return int(main() or 0)
    except BaseException as e:  # noqa: BLE001 - every failure must reach the event stream
        if isinstance(e, SystemExit):
            if e.code in (0, None):
                return 0
            code = e.code if isinstance(e.code, int) else 1
            message = f"exited with {e.code}"
        elif isinstance(e, InputError):
            code, message = e.exit_code, one_line(str(e))
        else:
            code, message = 1, one_line(f"{type(e).__name__}: {e}")
        tail = "".join(traceback.format_exception(e)).splitlines()[-TRACEBACK_TAIL_LINES:]
        try:
            events.emit("error", message=message, traceback="\n".join(tail))
        except OSError as write_error:  # the run dir itself may be the problem
            print(f"cannot write error event: {write_error}", file=sys.stderr)
        print(f"error: {message}", file=sys.stderr, flush=True)
        if not isinstance(e, (InputError, SystemExit)):
            traceback.print_exception(e, file=sys.stderr)
        return code
