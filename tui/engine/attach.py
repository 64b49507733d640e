"""Another controller's run, read from its run directory as it grows.

The controller that runs a run logs every event of its workloads to RUN_DIR/events.jsonl,
one JSON object a line, as ``events.as_dict`` writes it: the event's type and fields
(tui/executors/tracker.py; host phases are not logged, nor the run's start and end, which
the store records). ``RunLog`` reads that file's complete lines as they are written;
``logged_event`` turns one back into its typed event through the workload contract's one
parser (tui/core/events.py), so a line from a shared results directory is checked and
cleaned as a workload's line is. No torch, no textual.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tui.core import safefile
from tui.core.events import Dropped, Event, parse
from tui.core.stream import capped_lines

# The logged event types and the workload contract's kinds they were parsed from.
KINDS = {
    "WorkloadStarted": "start",
    "MetricSample": "step",
    "EvalSample": "eval",
    "SysSample": "sys",
    "CaseResult": "result",
    "WorkloadError": "error",
}


def logged_event(run_id: str, line: str) -> Event | Dropped:
    """One line of a run's events.jsonl -> its event, or why it was dropped. The line is
    written back as the workload line it came from and read by ``events.parse``."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return Dropped("not JSON (or nested too deep)")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return Dropped("not a logged event")
    kind, host = KINDS.get(data["type"]), data.get("host")
    if kind is None or not isinstance(host, str):
        return Dropped("not a logged workload event")
    received = data.get("received")
    if not isinstance(received, int | float) or isinstance(received, bool):
        received = None
    fields = {k: v for k, v in data.items() if k not in ("type", "run_id", "host", "received")}
    values = fields.pop("values", None) if kind == "sys" else None
    if isinstance(values, dict):  # a sys sample's readings are the line's own fields
        fields = {**values, **fields}
    return parse(run_id, host, json.dumps({**fields, "kind": kind}), received)


class RunLog:
    """A run's events.jsonl, read as it grows: each ``lines()`` gives the complete lines
    written since the last; a line still being written waits for its end. A file not
    there yet is read once it is; a link (the file or its run directory) is never
    followed, nor anything but a regular file opened (tui/core/safefile.py open_regular)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # bytes of complete lines handed on
        self._file: BinaryIO | None = None

    def lines(self) -> Iterator[str]:
        if self._file is None:
            try:
                self._file = safefile.open_regular(self.path)
            except OSError:  # not written yet (or a link, a FIFO, a linked run directory)
                return
        self._file.seek(self.offset)
        for head, size, ended in capped_lines(self._file):  # a line's cap held at most
            if not ended:
                return
            self.offset += size
            if line := head.decode("utf-8", "replace").strip():
                yield line

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
