"""Runs moved between a session's store and a file: ``fleetperf store export|import``
(JSON lines, tui/results/transfer.py), for the command line to reach through the engine
rather than opening the store itself. Each opens the session's store (``store_at``) for
the move alone: an import makes one where there is none, an export never does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tui.engine.session import Session
from tui.results import transfer
from tui.results.store import ResultStore


@dataclass(frozen=True)
class Moved:
    """What a move did: the runs written (an export) or added (an import), and the store
    as messages name it (a URL's password masked)."""

    count: int
    where: str
    identical: int = 0  # an import's runs the store had already, the same record
    different: tuple[str, ...] = ()  # an import's runs the store had with another: kept


def import_runs(session: Session, file: Path) -> Moved:
    """The runs of the export ``file`` the store lacks; every line is checked before any
    is stored (UsageError naming the file and line)."""
    records = transfer.read_export(file)
    with ResultStore(session.store_at) as store:
        done = transfer.import_records(store, records)
        return Moved(done.added, store.where, done.identical, tuple(done.different))


def export_runs(session: Session, out: TextIO | Path) -> Moved:
    """Every run of the store as JSON lines, a header first: to the stream ``out``, or
    written whole to the file ``out`` (OSError where it cannot be)."""
    with transfer.open_existing(session.store_at) as store:
        if isinstance(out, Path):
            return Moved(transfer.export_file(store, out), store.where)
        return Moved(transfer.export(store, out), store.where)
