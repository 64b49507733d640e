"""The event writer: one JSON object per line in RUN_DIR/events.jsonl (docs/workload-contract.md).

Each record is encoded to one complete line (ending in ``\\n``) and handed to the kernel in a
single ``write`` on a file opened with ``O_APPEND``: nothing is buffered in the process, so a
record is visible to a reader as soon as ``emit`` returns, and records of several processes
on one host never interleave inside a line. A reader that sees a last line without its ``\\n``
is looking at a write in progress (or a writer that died mid-line) and must not parse it
(the controller's reader, ``playbooks/library/fleetperf_tail.py``, keeps that rule). A
writer that finds such a torn line when it opens the file first terminates it, so its own
records start on a line of their own.

Rank rules (the contract): rank 0 of each node (LOCAL_RANK 0) writes ``start``, ``step``,
``eval`` and ``sys``; global rank 0 alone writes ``result``; any rank writes ``error``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The kinds of record, defined here once: the controller's reader (tui/core/events.py) takes
# these and drops a line of any other kind.
KINDS = ("start", "step", "eval", "sys", "result", "error")


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null. Tensors and numpy scalars via item()."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return _clean(value.item())
    return value


class EventWriter:
    """Appends event records to ``path`` following the contract's rank rules.

    ``all_ranks=True`` lets every rank write the node kinds (step records of every rank, for
    debugging); by default only LOCAL_RANK 0 does.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        rank: int = 0,
        local_rank: int = 0,
        *,
        all_ranks: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.rank = rank
        self.local_rank = local_rank
        self.all_ranks = all_ranks
        self.clock = clock
        self._fd: int | None = None

    def allowed(self, kind: str) -> bool:
        """Whether this process writes records of ``kind``."""
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}; expected one of {', '.join(KINDS)}")
        if kind == "error":
            return True
        if kind == "result":
            return self.rank == 0
        return self.local_rank == 0 or self.all_ranks

    def emit(self, kind: str, **fields: Any) -> bool:
        """Write one record now if this rank writes ``kind``; returns whether it was written."""
        if not self.allowed(kind):
            return False
        record = {"t": self.clock(), "kind": kind, "rank": self.rank, **_clean(fields)}
        line = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
        self._write(line.encode("utf-8"))
        return True

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    os.write(fd, b"\n")  # end a torn line left by a writer that died mid-line
        return fd

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self._fd = self._open()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
