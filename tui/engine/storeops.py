"""The stores as the command line reads and moves them apart from a session's runs:
``fleetperf store export|import`` (JSON lines, tui/results/transfer.py), several stores
read as one (``results`` and ``report`` with ``--store`` more than once), and the
qualifications a store keeps (tui/results/qualifications.py). The command line reaches
stores through these and Session, never by opening one itself. Each opens its store for
the one read or move: an import makes one where there is none, nothing else does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tui.engine.session import Session
from tui.results import qualifications, transfer
from tui.results.store import ResultStore
from tui.results.transfer import Merged


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


def read_stores(wheres: list[str]) -> Merged:
    """Every run of every store named, read-only, as one (a run id in two: the newer
    record, and a note naming both)."""
    return transfer.read_stores(wheres)


def latest_qualification(session: Session) -> list[dict[str, Any]]:
    """The newest qualification the store keeps, a row per host (none: [])."""
    return qualifications.latest(session.store_at)


def qualification_history(session: Session, host: str) -> list[dict[str, Any]]:
    """``host``'s row of every qualification the store keeps, oldest first."""
    return qualifications.history(session.store_at, host)
