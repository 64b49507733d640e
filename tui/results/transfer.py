"""Results between stores: several stores read as one (``results`` and ``report`` with
``--store`` given more than once), and ``fleetperf store export|import`` (JSON lines).

An export's first line is a header: the format and its version, the store's schema
revision, how many runs follow; then one run record a line, whole (RunRecord's JSON:
metrics, monitoring, verdict, peak, ...), oldest first. The same runs export to the same
bytes from either backend. docs/store.md. Controller code: no torch, no textual.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from tui.core import paths, safefile
from tui.core.errors import StoreError, UsageError
from tui.results.record import RunRecord
from tui.results.store import ResultStore, resolve_id
from tui.results.storedb import HEAD

FORMAT = "fleetperf-store-export"
FORMAT_VERSION = 1  # raised when a line's meaning changes; a newer one is refused


def open_existing(where: str) -> ResultStore:
    """A store to read: a SQLite file that is not there is refused, never made."""
    file = paths.store_file(where)
    if file is not None and not file.is_file():
        raise UsageError(f"no results store at {file}")
    return ResultStore(where)


@dataclass
class Merged:
    """Runs read from several stores, one record per run id."""

    records: list[RunRecord]  # oldest first
    where: str  # the stores, for messages (passwords masked)
    notes: list[str] = field(default_factory=list)  # a run id found in more than one

    def find(self, text: str) -> RunRecord:
        """The run ``text`` names, as ``fleetperf results RUN_ID`` takes it."""
        run_id = resolve_id(sorted(r.run_id for r in self.records), text, self.where)
        return next(r for r in self.records if r.run_id == run_id)


def read_stores(wheres: list[str]) -> Merged:
    """Every run of every store, read-only. A run id in two stores: the newer record (the
    later finished, else started; the first store's on a tie), with a note naming both."""
    chosen: dict[str, tuple[RunRecord, str]] = {}
    notes, shown = [], []
    for where in wheres:
        with open_existing(where) as store:
            shown.append(store.where)
            records = store.list()
        for record in records:
            if record.run_id not in chosen:
                chosen[record.run_id] = record, store.where
                continue
            kept, kept_where = chosen[record.run_id]
            if record == kept:
                continue
            newer = _moment(record) > _moment(kept)
            if newer:
                chosen[record.run_id] = record, store.where
            notes.append(
                f"run {record.run_id} is in {kept_where} and {store.where} with different"
                f" records: {store.where if newer else kept_where}'s, the newer, is shown"
            )
    records = sorted((r for r, _ in chosen.values()), key=lambda r: (r.started, r.run_id))
    return Merged(records, ", ".join(shown), notes)


def _moment(record: RunRecord) -> str:
    return record.finished or record.started


def export(store: ResultStore, out: TextIO) -> int:
    """Every run of ``store`` to ``out`` as JSON lines after the header; how many."""
    records = store.list()
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_revision": HEAD,
        "runs": len(records),
    }
    out.write(json.dumps(header) + "\n")
    for record in records:
        out.write(record.model_dump_json() + "\n")
    return len(records)


def export_file(store: ResultStore, path: Path) -> int:
    """``export`` to the file ``path``, written as every file the controller writes: 0600,
    whole or not at all, never through a link planted at that name (tui/core/safefile.py)."""
    with safefile.replacing(path) as raw:
        out = io.TextIOWrapper(raw, encoding="utf-8")
        count = export(store, out)
        out.flush()
        out.detach()  # the file stays open for replacing() to fsync and rename
    return count


@dataclass
class Imported:
    added: int = 0
    identical: int = 0  # already in the store, the same record: skipped
    different: list[str] = field(default_factory=list)  # already there, another record: kept


def read_export(path: Path) -> list[RunRecord]:
    """An export's records, every line checked before any is stored; UsageError naming
    the file and line of the first that is not right."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UsageError(f"{path}: cannot read it ({why})") from None
    header = _json(path, 1, lines[0] if lines else "")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UsageError(f"{path} line 1: not a fleetperf store export (no {FORMAT} header)")
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UsageError(
            f"{path} line 1: export format version {version!r} is newer than this"
            f" fleetperf's ({FORMAT_VERSION}); upgrade fleetperf"
        )
    records = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            records.append(RunRecord.model_validate(_json(path, number, line)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "record"
            raise UsageError(
                f"{path} line {number}: not a run record ({where}: {first['msg']})"
            ) from None
    if header.get("runs") != len(records):
        raise UsageError(
            f"{path}: the header says {header.get('runs')!r} runs, {len(records)} follow"
            " (a cut file?)"
        )
    return records


def _json(path: Path, number: int, line: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} line {number}: not JSON ({exc.msg})") from None


def import_records(store: ResultStore, records: list[RunRecord]) -> Imported:
    """Add the runs ``store`` lacks; a run id it has is skipped (counted as identical, or
    named as different: the store's record is kept, never overwritten)."""
    present = {r.run_id: r for r in store.list()}
    done = Imported()
    for record in records:
        there = present.get(record.run_id)
        if there is not None:
            if there == record:
                done.identical += 1
            else:
                done.different.append(record.run_id)
            continue
        try:
            store.add(record)
        except StoreError:
            if store.get(record.run_id) is None:  # not the owner rule: the database failed
                raise
            done.different.append(record.run_id)  # another controller stored it since
            continue
        done.added += 1
    return done
